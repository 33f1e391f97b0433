package orphans

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// listed is a reachable node whose pools hold vols.
func listed(node string, pools map[string][]managerapi.Volume) NodeListing {
	l := NodeListing{Node: node, Address: node + ":8443", Pools: map[string]PoolListing{}}
	for p, vols := range pools {
		l.Pools[p] = PoolListing{Volumes: vols}
	}
	return l
}

func TestClassify(t *testing.T) {
	pvA := nodePV(testProvisioner, "pv-a", "n1", "default", "dir-a")
	pvShared := multihostPV("pv-s", "default", "dir-s", []string{"n1", "n2"}, []string{"n3"})
	other := nodePV("other.dev/provisioner", "pv-other", "n1", "default", "dir-other")
	tests := []struct {
		name          string
		before, after []corev1.PersistentVolume // after defaults to before
		listings      []NodeListing
		want          []string
	}{{
		name:     "node-mode PV with its directory",
		before:   []corev1.PersistentVolume{pvA},
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-a", "pv-a")}})},
		want:     []string{},
	}, {
		name: "PVs of the capacity-aware provisioner name are compared too",
		before: []corev1.PersistentVolume{
			nodePV(hostpathv1.CapacityProvisionerName, "pv-c", "n1", "default", "dir-c"),
			nodePV(hostpathv1.CapacityProvisionerName, "pv-d", "n1", "default", "dir-d"),
		},
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-c", "pv-c")}})},
		want:     []string{"n1 default dir-d missing pv-d: PV pv-d (claim ns/claim-pv-d), node mode: the node has no directory"},
	}, {
		name:     "node-mode PV without its directory",
		before:   []corev1.PersistentVolume{pvA},
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": nil}), listed("n2", map[string][]managerapi.Volume{"default": nil})},
		want:     []string{"n1 default dir-a missing pv-a: PV pv-a (claim ns/claim-pv-a), node mode: the node has no directory"},
	}, {
		name:     "node-mode PV whose pool the node lacks",
		before:   []corev1.PersistentVolume{pvA},
		listings: []NodeListing{{Node: "n1", Pools: map[string]PoolListing{"default": {NotFound: true}}}},
		want:     []string{"n1 default dir-a missing pv-a: PV pv-a (claim ns/claim-pv-a), node mode: the node has no directory; the manager has no pool default"},
	}, {
		name:   "multihost PV everywhere, pending node has it too",
		before: []corev1.PersistentVolume{pvShared},
		listings: []NodeListing{
			listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n2", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n3", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
		},
		want: []string{},
	}, {
		name:   "multihost PV missing on a node, pending on another",
		before: []corev1.PersistentVolume{pvShared},
		listings: []NodeListing{
			listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n2", map[string][]managerapi.Volume{"default": nil}),
			listed("n3", map[string][]managerapi.Volume{"default": nil}),
		},
		want: []string{
			"n2 default dir-s missing pv-s: PV pv-s (claim ns/claim-pv-s), multihost: the node is in hostpath.dev/nodes but has no directory",
			"n3 default dir-s pending pv-s: PV pv-s (claim ns/claim-pv-s), multihost: the node is in hostpath.dev/pending-nodes and has not got the directory yet",
		},
	}, {
		name:   "orphans: owner gone, no owner record, owner elsewhere",
		before: []corev1.PersistentVolume{pvShared},
		listings: []NodeListing{
			listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n2", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n3", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n4", map[string][]managerapi.Volume{"default": {
				withPolicy(vol("dir-gone", "pv-gone"), managerapi.ReclaimDelete, false),
				vol("dir-s", "pv-s"),
				vol("legacy", ""),
			}}),
		},
		want: []string{
			"n4 default dir-gone orphan -: owner pv-gone (no such PV), ownedSince 2026-11-23T05:41:03Z, reclaimPolicy Delete",
			"n4 default dir-s orphan -: owner pv-s (its PV refers to n1 default/dir-s, n2 default/dir-s, n3 default/dir-s), ownedSince 2026-11-23T05:41:03Z",
			"n4 default legacy orphan -: no owner record",
		},
	}, {
		name:   "misplaced: the owner PV exists and names another pool (a pool renamed)",
		before: []corev1.PersistentVolume{pvShared},
		listings: []NodeListing{
			listed("n1", map[string][]managerapi.Volume{"renamed": {vol("dir-s", "pv-s")}}),
			listed("n2", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n3", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
		},
		want: []string{
			"n1 renamed dir-s misplaced -: owner pv-s (its PV refers to n1 default/dir-s, n2 default/dir-s, n3 default/dir-s)",
		},
	}, {
		name: "retained: marked, or policy Retain with the owner gone",
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": {
			withPolicy(vol("kept", "pv-old"), "", true),
			withPolicy(vol("kept-by-policy", "pv-old2"), managerapi.ReclaimRetain, false),
		}})},
		want: []string{
			"n1 default kept retained -: owner pv-old (no such PV), ownedSince 2026-11-23T05:41:03Z, retained",
			"n1 default kept-by-policy retained -: owner pv-old2 (no such PV), ownedSince 2026-11-23T05:41:03Z, reclaimPolicy Retain",
		},
	}, {
		name:     "a PV of another provisioner is ignored",
		before:   []corev1.PersistentVolume{other},
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-other", "pv-other")}}), listed("n2", map[string][]managerapi.Volume{"default": nil})},
		want:     []string{"n1 default dir-other orphan -: owner pv-other (a PV of another provisioner)"},
	}, {
		name:   "unreachable node and pool hide their findings",
		before: []corev1.PersistentVolume{pvA, nodePV(testProvisioner, "pv-b", "n2", "fast", "dir-b")},
		listings: []NodeListing{
			{Node: "n1", Err: errRefused},
			{Node: "n2", Pools: map[string]PoolListing{"fast": {Err: errUnauthorized}, "default": {Volumes: []managerapi.Volume{vol("x", "pv-x")}}}},
		},
		want: []string{
			"n1 - - unreachable -: dial tcp 10.0.0.3:8443: connect: connection refused",
			"n2 default x orphan -: owner pv-x (no such PV)",
			"n2 fast - unreachable -: GET /v1/pools/fast/volumes: manager answered 401 Unauthorized: token rejected",
		},
	}, {
		name:     "a PV made while the managers were listed is no orphan's owner",
		after:    []corev1.PersistentVolume{pvA},
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-a", "pv-a")}})},
		want:     []string{},
	}, {
		name:     "a PV deleted while the managers were listed is not missing",
		before:   []corev1.PersistentVolume{pvA},
		after:    []corev1.PersistentVolume{},
		listings: []NodeListing{listed("n1", map[string][]managerapi.Volume{"default": nil})},
		want:     []string{},
	}, {
		name:   "a node that gained a multihost directory since the first list",
		before: []corev1.PersistentVolume{multihostPV("pv-s", "default", "dir-s", []string{"n1"}, []string{"n2"})},
		after:  []corev1.PersistentVolume{multihostPV("pv-s", "default", "dir-s", []string{"n1", "n2"}, nil)},
		listings: []NodeListing{
			listed("n1", map[string][]managerapi.Volume{"default": {vol("dir-s", "pv-s")}}),
			listed("n2", map[string][]managerapi.Volume{"default": nil}),
		},
		want: []string{"n2 default dir-s missing pv-s: PV pv-s (claim ns/claim-pv-s), multihost: the node is in hostpath.dev/nodes"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			after := tc.after
			if after == nil {
				after = tc.before
			}
			checkLines(t, Classify(testNames, tc.before, after, tc.listings), tc.want)
		})
	}
}
