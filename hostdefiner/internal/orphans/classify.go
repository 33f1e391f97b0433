package orphans

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// location is one directory of one pool on one node.
type location struct{ node, pool, dir string }

// reference is a PV that wants a directory at a location.
type reference struct {
	pv *corev1.PersistentVolume
	// multihost says the PV is a multihost one; pending, that the node is
	// in its hostpath.dev/pending-nodes (and not in hostpath.dev/nodes).
	multihost, pending bool
}

// references returns the locations pv refers to, with whether each node is
// pending: none for a PV of another provisioner, its node for a node-mode
// PV (a PV without hostpath.dev/mode is one), every node of
// hostpath.dev/nodes and hostpath.dev/pending-nodes for a multihost PV.
func references(pv *corev1.PersistentVolume, provisioner hostpathv1.ProvisionerNames) map[location]reference {
	out := map[location]reference{}
	if m, ok := hostpathv1.MultihostDirectoryOf(pv, provisioner); ok {
		if m.Pool == "" || m.Directory == "" {
			return out
		}
		for _, n := range m.PendingNodes {
			out[location{n, m.Pool, m.Directory}] = reference{pv: pv, multihost: true, pending: true}
		}
		for _, n := range m.Nodes {
			out[location{n, m.Pool, m.Directory}] = reference{pv: pv, multihost: true}
		}
		return out
	}
	a := pv.Annotations
	if !provisioner.Has(a[storagehelpers.AnnDynamicallyProvisioned]) {
		return out
	}
	if mode := a[hostpathv1.AnnotationMode]; mode != "" && mode != hostpathv1.ModeNode {
		return out
	}
	loc := location{a[hostpathv1.AnnotationNode], a[hostpathv1.AnnotationPool], a[hostpathv1.AnnotationDirectory]}
	if loc.node != "" && loc.pool != "" && loc.dir != "" {
		out[loc] = reference{pv: pv}
	}
	return out
}

// Classify compares what the managers hold (listings) with the
// PersistentVolumes of provisioner, listed before and after the managers
// were: a directory is referred to when a PV of either list refers to it,
// and a PV is expected to have its directories when it is in both lists
// (its annotations as in the later one). The findings are sorted by node,
// pool, directory, kind and PV.
func Classify(provisioner hostpathv1.ProvisionerNames, before, after []corev1.PersistentVolume, listings []NodeListing) []Finding {
	referred := map[location]bool{}
	owners := map[string]*corev1.PersistentVolume{}
	seen := map[types.UID]bool{}
	for i := range before {
		pv := &before[i]
		seen[pv.UID] = true
		owners[pv.Name] = pv
		for loc := range references(pv, provisioner) {
			referred[loc] = true
		}
	}
	expected := map[location][]reference{}
	for i := range after {
		pv := &after[i]
		owners[pv.Name] = pv
		for loc, ref := range references(pv, provisioner) {
			referred[loc] = true
			if seen[pv.UID] {
				expected[loc] = append(expected[loc], ref)
			}
		}
	}
	var out []Finding
	present := map[location]bool{}
	pools := map[string]map[string]PoolListing{}
	for _, n := range listings {
		if n.Err != nil {
			out = append(out, unreachable(n.Node, "", n.Err))
			continue
		}
		pools[n.Node] = n.Pools
		for pool, l := range n.Pools {
			if l.Err != nil {
				out = append(out, unreachable(n.Node, pool, l.Err))
				continue
			}
			for _, v := range l.Volumes {
				loc := location{n.Node, pool, v.Name}
				present[loc] = true
				if !referred[loc] {
					out = append(out, unreferenced(loc, v, owners, provisioner))
				}
			}
		}
	}
	for loc, refs := range expected {
		l, ok := pools[loc.node][loc.pool]
		if !ok || l.Err != nil || present[loc] {
			// Unknown (the node or pool is reported unreachable, or was
			// not listed), or there.
			continue
		}
		for _, ref := range refs {
			out = append(out, absent(loc, ref, l.NotFound))
		}
	}
	slices.SortFunc(out, compareFindings)
	return out
}

// compareFindings orders findings by node, pool, directory, kind, PV.
func compareFindings(a, b Finding) int {
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Directory, b.Directory),
		cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.PV, b.PV))
}

// unreachable is the finding of a node (pool "") or pool that could not be
// listed.
func unreachable(node, pool string, err error) Finding {
	return Finding{Node: node, Pool: pool, Kind: KindUnreachable, Detail: err.Error(), Error: err.Error()}
}

// unreferenced is the finding of a directory no PV refers to: misplaced
// when its owner PV exists and refers to another place; retained when its
// owner record says it was kept on purpose (marked retained, or recorded
// with policy Retain for an owner that no longer exists); else an orphan.
func unreferenced(loc location, v managerapi.Volume, owners map[string]*corev1.PersistentVolume, provisioner hostpathv1.ProvisionerNames) Finding {
	f := Finding{
		Node: loc.node, Pool: loc.pool, Directory: loc.dir, Kind: KindOrphan,
		Owner: v.Owner, OwnedSince: v.OwnedSince, Retained: v.Retained, ReclaimPolicy: v.ReclaimPolicy,
	}
	owner, exists := owners[v.Owner]
	switch {
	case exists && refersElsewhere(owner, provisioner, loc):
		f.Kind = KindMisplaced
	case v.Retained || v.Owner != "" && !exists && v.ReclaimPolicy == managerapi.ReclaimRetain:
		f.Kind = KindRetained
	}
	parts := []string{ownerText(v.Owner, owner, provisioner)}
	if v.OwnedSince != nil {
		parts = append(parts, "ownedSince "+v.OwnedSince.UTC().Format(time.RFC3339))
	}
	if v.Retained {
		parts = append(parts, "retained")
	}
	if v.ReclaimPolicy != "" {
		parts = append(parts, "reclaimPolicy "+v.ReclaimPolicy)
	}
	f.Detail = strings.Join(parts, ", ")
	return f
}

// refersElsewhere reports whether pv, a PV of provisioner, names a
// directory other than loc's: a node-mode PV another node, pool or
// directory; a multihost PV another pool or directory (a multihost PV uses
// its pool and directory on every node, listed or not yet). The
// provisioner's sweeper never removes such a directory.
func refersElsewhere(pv *corev1.PersistentVolume, provisioner hostpathv1.ProvisionerNames, loc location) bool {
	if m, ok := hostpathv1.MultihostDirectoryOf(pv, provisioner); ok {
		return m.Pool != loc.pool || m.Directory != loc.dir
	}
	refs := references(pv, provisioner)
	_, here := refs[loc]
	return len(refs) > 0 && !here
}

// ownerText says who the owner record names and what became of that PV.
func ownerText(name string, pv *corev1.PersistentVolume, provisioner hostpathv1.ProvisionerNames) string {
	switch {
	case name == "":
		return "no owner record"
	case pv == nil:
		return fmt.Sprintf("owner %s (no such PV)", name)
	case !provisioner.Has(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]):
		return fmt.Sprintf("owner %s (a PV of another provisioner)", name)
	}
	var elsewhere []string
	for loc := range references(pv, provisioner) {
		elsewhere = append(elsewhere, loc.node+" "+loc.pool+"/"+loc.dir)
	}
	if len(elsewhere) == 0 {
		return fmt.Sprintf("owner %s (its PV names no directory)", name)
	}
	slices.Sort(elsewhere)
	return fmt.Sprintf("owner %s (its PV refers to %s)", name, strings.Join(elsewhere, ", "))
}

// absent is the finding of a PV whose directory is not at loc: missing,
// or pending for a node of its hostpath.dev/pending-nodes.
func absent(loc location, ref reference, poolNotFound bool) Finding {
	f := Finding{Node: loc.node, Pool: loc.pool, Directory: loc.dir, Kind: KindMissing, PV: ref.pv.Name}
	a := ref.pv.Annotations
	if ns, name := a[hostpathv1.AnnotationClaimNamespace], a[hostpathv1.AnnotationClaimName]; name != "" {
		f.Claim = ns + "/" + name
	} else if c := ref.pv.Spec.ClaimRef; c != nil {
		f.Claim = c.Namespace + "/" + c.Name
	}
	what := "PV " + ref.pv.Name
	if f.Claim != "" {
		what += " (claim " + f.Claim + ")"
	}
	switch {
	case ref.pending:
		f.Kind = KindPending
		f.Detail = what + ", multihost: the node is in " + hostpathv1.AnnotationPendingNodes + " and has not got the directory yet"
	case ref.multihost:
		f.Detail = what + ", multihost: the node is in " + hostpathv1.AnnotationNodes + " but has no directory"
	default:
		f.Detail = what + ", node mode: the node has no directory"
	}
	if poolNotFound {
		f.Detail += "; the manager has no pool " + loc.pool
	}
	return f
}
