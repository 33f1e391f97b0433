// Package annotations is the one home of the names the provisioner puts on,
// and reads from, Kubernetes objects: the claim annotations that choose a
// node or a directory, the PersistentVolume annotations that say what a
// volume is, the values of the mode annotation, and the PersistentVolume
// finalizer, and how a list of nodes is written in one. Both the provisioner
// and the reclaim package import it; it imports only the standard library.
package annotations

import "strings"

// Claim annotations that choose the node of a node-mode volume, in order of
// precedence.
const (
	// ProvisionOnNode pins a claim to a node.
	ProvisionOnNode = "hostpath.dev/provision-on-node"
	// KubevirtProvisionOnNode is kubevirt's hostpath-provisioner key,
	// honoured like ProvisionOnNode.
	KubevirtProvisionOnNode = "kubevirt.io/provisionOnNode"
	// SelectedNode is set by the scheduler for WaitForFirstConsumer claims
	// (and by the owning instance for pinned ones).
	SelectedNode = "volume.kubernetes.io/selected-node"
)

// ReuseDirectory on a claim names an existing directory of the pool to use
// instead of the pathPattern (node mode): a directory kept by a deleted
// Retain volume, or one without an owner record that no volume names. The
// directory is handed to the new volume only after those checks.
const ReuseDirectory = "hostpath.dev/reuse-directory"

// PersistentVolume annotations saying what a volume is.
const (
	// ProvisionedBy names the provisioner that made a volume; the library
	// sets it.
	ProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// Node is the node that holds the directory (node mode).
	Node = "hostpath.dev/node"
	// Pool is the storage pool.
	Pool = "hostpath.dev/pool"
	// Directory is the directory's name inside the pool.
	Directory = "hostpath.dev/directory"
	// ClaimNamespace is the namespace of the claim the volume was made for.
	ClaimNamespace = "hostpath.dev/claim-namespace"
	// ClaimName is the name of the claim the volume was made for.
	ClaimName = "hostpath.dev/claim-name"
	// Mode is how the volume was made, ModeNode or ModeMultihost (the
	// StorageClass parameter "mode"; not the Kubernetes volumeMode). A PV
	// without it counts as node mode.
	Mode = "hostpath.dev/mode"
	// Nodes lists, sorted and comma-separated, the nodes that held the
	// directory of a multihost volume when it was made.
	Nodes = "hostpath.dev/nodes"
	// PendingNodes lists, sorted and comma-separated, the nodes whose
	// manager was not Ready when a multihost volume was made: they get the
	// directory later. Absent when there were none.
	PendingNodes = "hostpath.dev/pending-nodes"
)

// The values of Mode, which are also those of the StorageClass parameter
// "mode": how a claim becomes directories.
const (
	// ModeNode is one directory on one node, with node affinity to it.
	ModeNode = "node"
	// ModeMultihost is the same directory on every node that runs a
	// manager, without node affinity.
	ModeMultihost = "multihost"
)

// Finalizer keeps a PersistentVolume until the instance of its node (for a
// multihost volume, the elected instance) has removed its directory (reclaim
// policy Delete) or marked it retained (Retain, Recycle), or until its node
// is gone. The provisioner sets it in the PVs it makes; package reclaim
// removes it.
const Finalizer = "hostpath.dev/directory-protection"

// JoinNodes is the value of Nodes or PendingNodes for a list of nodes: the
// names, comma-separated, in the order given.
func JoinNodes(nodes []string) string { return strings.Join(nodes, ",") }

// SplitNodes reads a value of Nodes or PendingNodes back, dropping blanks;
// "" gives none.
func SplitNodes(value string) []string {
	var out []string
	for n := range strings.SplitSeq(value, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
