package reclaim

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
)

// shared is where a multihost PV's data lives: the same directory of the
// same pool on every node, listed in annotations.Nodes (made at creation,
// or given since by the host definer) and annotations.PendingNodes (still
// to get it from the host definer).
type shared struct {
	pool, name     string
	nodes, pending []string
}

// multihostDirectory returns the directory of pv, and false when pv is not a
// multihost volume of provisioner.
func multihostDirectory(pv *v1.PersistentVolume, provisioner string) (shared, bool) {
	m, ok := hostpathv1.MultihostDirectoryOf(pv, provisioner)
	if !ok {
		return shared{}, false
	}
	return shared{pool: m.Pool, name: m.Directory, nodes: m.Nodes, pending: m.PendingNodes}, true
}

// listed reports whether the PV names node in annotations.Nodes or
// annotations.PendingNodes.
func (d shared) listed(node string) bool {
	return slices.Contains(d.nodes, node) || slices.Contains(d.pending, node)
}

// multihostOnNode reports whether pv is a multihost PV of provisioner that
// lists node.
func multihostOnNode(pv *v1.PersistentVolume, provisioner, node string) bool {
	d, ok := multihostDirectory(pv, provisioner)
	return ok && d.listed(node)
}
