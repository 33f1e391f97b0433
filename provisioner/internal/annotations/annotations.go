// Package annotations is the one home, for the provisioner, of the names it
// puts on, and reads from, Kubernetes objects: the claim annotations that
// choose a node or a directory, the PersistentVolume annotations that say
// what a volume is, the values of the mode annotation, and the
// PersistentVolume finalizer, and how a list of nodes is written in one.
// Both the provisioner and the reclaim package import it. The names the
// host definer reads too (the multihost volume's pool, directory, mode and
// node lists) are defined once, in the HostDefinition API package
// (hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1, well_known.go); this
// package gives them their provisioner names and adds the provisioner's own.
package annotations

import hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"

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
// Retain volume whose owner record names the claim's namespace (that of
// the volume's claim, or one an administrator handed it over to), and that
// no volume names. The directory is handed to the new volume only after
// those checks.
const ReuseDirectory = "hostpath.dev/reuse-directory"

// PersistentVolume annotations saying what a volume is. Those shared with
// the host definer are hostpathv1's.
const (
	// ProvisionedBy names the provisioner that made a volume; the library
	// sets it.
	ProvisionedBy = hostpathv1.AnnotationProvisionedBy
	// Node is the node that holds the directory (node mode).
	Node = hostpathv1.AnnotationNode
	// Pool is the storage pool.
	Pool = hostpathv1.AnnotationPool
	// Directory is the directory's name inside the pool.
	Directory = hostpathv1.AnnotationDirectory
	// ClaimNamespace is the namespace of the claim the volume was made for.
	ClaimNamespace = hostpathv1.AnnotationClaimNamespace
	// ClaimName is the name of the claim the volume was made for.
	ClaimName = hostpathv1.AnnotationClaimName
	// Mode is how the volume was made, ModeNode or ModeMultihost (the
	// StorageClass parameter "mode"; not the Kubernetes volumeMode). A PV
	// without it counts as node mode.
	Mode = hostpathv1.AnnotationMode
	// Nodes lists, sorted and comma-separated, the nodes that hold the
	// directory of a multihost volume: those that got it when it was made
	// (their HostDefinition of the pool Ready and their manager serving),
	// and those the host definer gave it since.
	Nodes = hostpathv1.AnnotationNodes
	// PendingNodes lists, sorted and comma-separated, the nodes that were
	// still to get the directory when a multihost volume was made (their
	// HostDefinition of the pool PendingForCreation, or Ready without a
	// serving manager pod): the host definer gives it to them and moves
	// them to Nodes. Absent when there are none.
	PendingNodes = hostpathv1.AnnotationPendingNodes
)

// Annotations of Kubernetes and of the provisioner library that tell the
// claims and PersistentVolumes of one provisioner from another's. The
// library decides by them which objects it acts on, and package cachetrim
// decides by them which objects the instance caches as stubs.
const (
	// StorageProvisioner on a claim names the provisioner that is to make
	// its volume: kube-controller-manager's PersistentVolume controller
	// sets it, and BetaStorageProvisioner to the same value, from the
	// claim's StorageClass when it finds no volume to bind and the class
	// names an external provisioner (for a WaitForFirstConsumer class,
	// once the scheduler has selected a node). The library provisions only
	// a claim whose StorageProvisioner (else BetaStorageProvisioner) is
	// one of its names.
	StorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// BetaStorageProvisioner is StorageProvisioner's older name, still
	// set beside it.
	BetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// MigratedTo on a PersistentVolume of an in-tree volume plugin names
	// the CSI driver that serves it since CSI migration; the library acts
	// on a PV whose MigratedTo is one of its names as on its own.
	MigratedTo = "pv.kubernetes.io/migrated-to"
)

// PersistentVolume annotations about the volume's size, which the PV's
// capacity states (and the claim's status.capacity once bound).
const (
	// SizeEnforcement says how the pool enforces the volume's size as a
	// limit: "btrfs", "xfs" or "ext4" (see the manager's
	// client.Enforcement constants), or EnforcementNone when it does not
	// and the volume can outgrow its capacity. A multihost volume's is
	// the kind its nodes share: EnforcementNone when any node lacks one,
	// else the kinds, sorted and comma-separated.
	SizeEnforcement = "hostpath.dev/size-enforcement"
	// SizeUsed is what the volume used the last time its instance looked:
	// the bytes its quota counts, rounded up to a whole MiB, as a quantity
	// such as "0", "1536Mi" or "2Gi". Node mode only, where the size is
	// enforced (absent elsewhere: a multihost volume's usage differs per
	// node). The instance of the volume's node looks every
	// --usage-interval and writes it again only when the usage moved 1 MiB
	// or more away from it (package usage).
	SizeUsed = "hostpath.dev/size-used"
)

// Health on a PersistentVolume is the condition of its directory, as the
// provisioner instance of the node that holds it saw it last (package
// usage): absent (or "") when healthy, else one of the Health* values. A
// multihost PV's says the condition of each node whose copy is not
// healthy, sorted by node and comma-separated: "node-a=DirectoryMissing,
// node-c=PoolReadOnly". It is written only when a condition changes, and
// an event goes with each change, so a restarted instance that finds the
// condition it sees recorded says nothing again.
const Health = "hostpath.dev/health"

// The values of Health, one condition at a time, the most severe first
// when several hold.
const (
	// HealthPoolMissing: the manager answers PoolNotFound for the pool
	// (not configured on the node, or its directory is gone).
	HealthPoolMissing = "PoolMissing"
	// HealthDirectoryMissing: the pool is there and the volume's directory
	// is not.
	HealthDirectoryMissing = "DirectoryMissing"
	// HealthPoolReadOnly: the pool's filesystem, or its mount, is
	// read-only (the manager's GET /v1/host says readOnly).
	HealthPoolReadOnly = "PoolReadOnly"
	// HealthUsageHigh: the volume, whose size is enforced, uses at least
	// --usage-warning-threshold percent of it.
	HealthUsageHigh = "UsageHigh"
)

// ControlPlaneRole is the label and taint key of control-plane nodes
// (node-role.kubernetes.io/control-plane, as kubeadm sets them). The node
// agents tolerate its taint only with the kustomize component that adds
// them to control-plane nodes, so the provisioner names that component to
// a claim pinned to such a node.
const ControlPlaneRole = "node-role.kubernetes.io/control-plane"

// NodeGoneSince on a node-mode PV is when the instance elected for it first
// saw its Node missing (RFC 3339), with --node-gone-grace-period set; it
// goes when the Node is back (see package reclaim).
const NodeGoneSince = "hostpath.dev/node-gone-since"

// RecordedPolicy on a PV is the reclaim policy that the owner records of
// its directory say on every node that holds it ("Delete" or "Retain", as
// client.RecordedReclaimPolicy words the PV's policy). The provisioner sets
// it on the PV it makes (the create request records that policy); when the
// PV's persistentVolumeReclaimPolicy changes, the instance that acts for
// the PV records the new policy with every node's directory and then
// updates this annotation (package reclaim). A node's sweeper removes the
// directory of a PV that is gone only if its record says Delete.
const RecordedPolicy = "hostpath.dev/recorded-reclaim-policy"

// EnforcementNone is the SizeEnforcement of a volume whose size is not
// enforced.
const EnforcementNone = "none"

// The values of Mode, which are also those of the StorageClass parameter
// "mode": how a claim becomes directories.
const (
	// ModeNode is one directory on one node, with node affinity to it.
	ModeNode = hostpathv1.ModeNode
	// ModeMultihost is the same directory on every node defined for the
	// pool (see package managers, Resolver.Targets), without node affinity.
	ModeMultihost = hostpathv1.ModeMultihost
)

// Finalizer keeps a PersistentVolume until the instance of its node (for a
// multihost volume, the elected instance) has removed its directory (reclaim
// policy Delete) or marked it retained (Retain, Recycle), or until its node
// is gone. The provisioner sets it in the PVs it makes; package reclaim
// removes it.
const Finalizer = "hostpath.dev/directory-protection"

// JoinNodes is the value of Nodes or PendingNodes for a list of nodes: the
// names, comma-separated, in the order given (hostpathv1.JoinNodes).
func JoinNodes(nodes []string) string { return hostpathv1.JoinNodes(nodes) }

// SplitNodes reads a value of Nodes or PendingNodes back, dropping blanks;
// "" gives none (hostpathv1.SplitNodes).
func SplitNodes(value string) []string { return hostpathv1.SplitNodes(value) }
