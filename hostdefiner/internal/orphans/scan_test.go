package orphans

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

// managerPod is a manager pod on node with ip, Ready or not.
func managerPod(name, node, ip string, ready bool) *corev1.Pod {
	return hostpathtest.ManagerPod(DefaultNamespace, name, node, ip, hostpathtest.Readiness(ready))
}

// storageClass is a class of provisioner with parameter pool (none when
// empty).
func storageClass(name, provisioner, pool string) *storagev1.StorageClass {
	if pool == "" {
		return hostpathtest.Class(name, provisioner)
	}
	return hostpathtest.Class(name, provisioner, hostpathtest.Parameters(map[string]string{hostpathv1.ParamPool: pool}))
}

func ptrTo(pv corev1.PersistentVolume) *corev1.PersistentVolume { return &pv }

func TestScan(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		// managers are the pools and volumes of the managers, by node;
		// failures script their errors.
		managers map[string]map[string][]managerapi.Volume
		failures []managertest.Failure
		// dialErr fails the Dial of these nodes.
		dialErr   map[string]error
		addresses map[string]string
		// during, when set, changes the cluster while n1 is listed.
		during    func(kube *fake.Clientset)
		want      []string
		wantNodes []string
		wantDials []string
	}{{
		name: "pods, addresses, pools and findings",
		objects: []runtime.Object{
			managerPod("m1", "n1", "10.0.0.1", true), managerPod("m2", "n2", "10.0.0.2", true),
			managerPod("m3", "n3", "10.0.0.3", false), managerPod("m4", "n4", "10.0.0.4", false),
			managerPod("m0", "", "", false),
			storageClass("hostpath", testProvisioner, ""), storageClass("fast", testProvisioner, "fast"),
			storageClass("theirs", "other.dev/provisioner", "theirs"),
			storageClass("capacity-aware", hostpathv1.CapacityProvisionerName, "cap"),
			ptrTo(nodePV(testProvisioner, "pv-a", "n1", "default", "dir-a")),
			ptrTo(nodePV(testProvisioner, "pv-b", "n2", "default", "dir-b")),
			ptrTo(nodePV(testProvisioner, "pv-gone-node", "n5", "default", "dir-5")),
			ptrTo(multihostPV("pv-s", "shared", "dir-s", []string{"n1", "n2"}, []string{"n4"})),
			ptrTo(nodePV("other.dev/provisioner", "pv-other", "n6", "theirs", "dir-o")),
		},
		managers: map[string]map[string][]managerapi.Volume{
			"n1": {
				"default": {vol("dir-a", "pv-a"), vol("dir-old", "pv-old")},
				"extra":   {withPolicy(vol("kept", "pv-kept"), managerapi.ReclaimRetain, true)},
				"shared":  {vol("dir-s", "pv-s")},
			},
			"n2": {"default": nil, "shared": {vol("dir-s", "pv-s")}},
			"n4": {"default": nil, "fast": nil, "shared": nil},
		},
		addresses: map[string]string{"n4": "127.0.0.1:18443"},
		want: []string{
			"n1 default dir-old orphan -: owner pv-old (no such PV)",
			"n1 extra kept retained -: owner pv-kept (no such PV)",
			"n2 default dir-b missing pv-b: PV pv-b (claim ns/claim-pv-b), node mode",
			"n3 - - unreachable -: no Ready manager pod on the node (not Ready: m3)",
			"n4 shared dir-s pending pv-s: PV pv-s (claim ns/claim-pv-s), multihost: the node is in hostpath.dev/pending-nodes",
			"n5 - - unreachable -: no manager pod on the node (app.kubernetes.io/name=hostpath-manager in namespace hostpath-system)",
		},
		wantNodes: []string{
			"n1 10.0.0.1:8443 [cap default extra fast shared]",
			"n2 10.0.0.2:8443 [cap default fast shared]",
			"n3  [] no Ready manager pod on the node (not Ready: m3)",
			"n4 127.0.0.1:18443 [cap default fast shared]",
			"n5  [] no manager pod on the node (app.kubernetes.io/name=hostpath-manager in namespace hostpath-system)",
		},
		wantDials: []string{"n1 10.0.0.1:8443", "n2 10.0.0.2:8443", "n4 127.0.0.1:18443"},
	}, {
		name: "a manager that cannot be dialled or refuses the token",
		objects: []runtime.Object{
			managerPod("m1", "n1", "10.0.0.1", true), managerPod("m2", "n2", "10.0.0.2", true),
			ptrTo(nodePV(testProvisioner, "pv-a", "n1", "default", "dir-a")),
		},
		managers: map[string]map[string][]managerapi.Volume{"n2": {}},
		failures: []managertest.Failure{{Node: "n2", Method: managertest.Host, Err: managerapi.Errorf(managerapi.ReasonUnauthorized, "token rejected")}},
		dialErr:  map[string]error{"n1": errors.New("bad address")},
		want: []string{
			"n1 - - unreachable -: manager at 10.0.0.1:8443: bad address",
			"n2 - - unreachable -: manager at 10.0.0.2:8443: GET /v1/host: manager answered 401 Unauthorized: token rejected",
		},
		wantDials: []string{"n1 10.0.0.1:8443", "n2 10.0.0.2:8443"},
	}, {
		name: "a claim provisioned during the scan leaves no orphan",
		objects: []runtime.Object{
			managerPod("m1", "n1", "10.0.0.1", true),
			ptrTo(nodePV(testProvisioner, "pv-gone", "n1", "default", "dir-gone")),
		},
		managers: map[string]map[string][]managerapi.Volume{"n1": {"default": {vol("dir-new", "pv-new")}}},
		during: func(kube *fake.Clientset) {
			// pv-new is made, pv-gone deleted with its directory.
			pv := nodePV(testProvisioner, "pv-new", "n1", "default", "dir-new")
			_ = kube.Tracker().Add(&pv)
			_ = kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("persistentvolumes"), "", "pv-gone")
		},
		want:      []string{},
		wantDials: []string{"n1 10.0.0.1:8443"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := fake.NewClientset(tc.objects...)
			managers := managertest.New()
			for node, pools := range tc.managers {
				m := managers.Node(node)
				for pool, vols := range pools {
					m.AddPool(managerapi.Pool{Name: pool})
					for _, v := range vols {
						v.Pool = pool
						m.AddVolume(v)
					}
				}
			}
			for _, fl := range tc.failures {
				managers.Fail(fl)
			}
			if tc.during != nil {
				managers.OnCall(func(c managertest.Call) {
					if c.Node == "n1" && c.Method == managertest.Host {
						tc.during(kube)
					}
				})
			}
			var (
				mu    sync.Mutex
				dials []string
			)
			s := &Scanner{
				Kube: kube, Namespace: DefaultNamespace, Provisioner: testNames,
				ManagerSelector: DefaultManagerSelector, ManagerPort: managerapi.ServingPort, Addresses: tc.addresses,
				Dial: func(node, address string) (Manager, error) {
					mu.Lock()
					dials = append(dials, node+" "+address)
					mu.Unlock()
					if err := tc.dialErr[node]; err != nil {
						return nil, err
					}
					return managertest.For[Manager](managers)(node)
				},
			}
			r, err := s.Scan(ctx)
			if err != nil {
				t.Fatalf("Scan() = %v", err)
			}
			checkLines(t, r.Findings, tc.want)
			slices.Sort(dials)
			if !slices.Equal(dials, tc.wantDials) {
				t.Errorf("Dialled %q, want %q", dials, tc.wantDials)
			}
			if tc.wantNodes != nil {
				var nodes []string
				for _, n := range r.Nodes {
					nodes = append(nodes, strings.TrimSpace(fmt.Sprintf("%s %s %v %s", n.Node, n.Address, n.Pools, n.Error)))
				}
				if !slices.Equal(nodes, tc.wantNodes) {
					t.Errorf("Nodes:\n  %s\nwant:\n  %s", strings.Join(nodes, "\n  "), strings.Join(tc.wantNodes, "\n  "))
				}
			}
			if r.Counts["total"] != len(tc.want) {
				t.Errorf("Counts = %v, want a total of %d", r.Counts, len(tc.want))
			}
		})
	}
}
