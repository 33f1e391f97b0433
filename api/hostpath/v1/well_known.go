package v1

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// The names below are the one home of every key hostpath puts on, and
// reads from, the claims, PersistentVolumes, StorageClasses and Nodes it
// serves: the provisioner writes them, the host definer reads them to find
// the multihost volumes of a pool and to record the nodes it gave their
// directories, and the e2e tools use them. They live in the API package
// because every program imports it. Keys that Kubernetes defines (the
// scheduler's selected node, the provisioner library's provisioned-by) are
// used from k8s.io/component-helpers/storage/volume, never spelled again.

// DefaultProvisionerName is the provisioner name of the StorageClasses and
// PersistentVolumes of hostpath (the --provisioner-name default of the
// provisioner and the host definer).
const DefaultProvisionerName = "hostpath.dev/provisioner"

// CapacityProvisionerName is the second provisioner name the provisioner
// and the host definer serve, whatever their --provisioner-name: a DNS
// subdomain, so that it can also be the name of the CSIDriver object
// (manifests/base/provisioner/csidriver.yaml) through which the
// kube-scheduler's VolumeBinding plugin finds the CSIStorageCapacity
// objects the provisioner publishes. DefaultProvisionerName cannot name a
// CSIDriver (it holds a "/"), so the StorageClasses of this name are the
// capacity-aware ones. A StorageClass's provisioner cannot change: existing
// classes keep DefaultProvisionerName, and new classes opt in.
const CapacityProvisionerName = "hostpath.dev"

// ProvisionerNames are the provisioner names one installation serves: the
// one it is configured with (--provisioner-name, DefaultProvisionerName
// unless changed) and CapacityProvisionerName. Whatever compares a
// StorageClass's provisioner, or a PersistentVolume's
// storagehelpers.AnnDynamicallyProvisioned, with the installation's name
// asks Has. The
// zero value serves no name.
//
// +k8s:deepcopy-gen=false
type ProvisionerNames struct {
	names []string
}

// NewProvisionerNames returns the names of an installation configured with
// name: name first, then CapacityProvisionerName (once, if name is it).
func NewProvisionerNames(name string) ProvisionerNames {
	if name == CapacityProvisionerName {
		return ProvisionerNames{names: []string{name}}
	}
	return ProvisionerNames{names: []string{name, CapacityProvisionerName}}
}

// Has reports whether name is one of the names; "" never is.
func (n ProvisionerNames) Has(name string) bool {
	return name != "" && slices.Contains(n.names, name)
}

// Name is the configured name (the first); "" for the zero value.
func (n ProvisionerNames) Name() string {
	if len(n.names) == 0 {
		return ""
	}
	return n.names[0]
}

// Additional are the names but the first, for the provisioner library's
// AdditionalProvisionerNames.
func (n ProvisionerNames) Additional() []string {
	if len(n.names) < 2 {
		return nil
	}
	return slices.Clone(n.names[1:])
}

// String is the names, comma-separated, for messages.
func (n ProvisionerNames) String() string { return strings.Join(n.names, ", ") }

// StorageClass parameters the host definer reads.
const (
	// ParamPool names a class's storage pool; DefaultPool when absent.
	ParamPool = "pool"
	// ParamDirMode is the permission bits of a class's volume directories
	// (octal text); DefaultDirMode when absent.
	ParamDirMode = "dirMode"
	// ParamEnforceSize, "true" or "false" (the default), makes a class's
	// volumes fail on pools that cannot enforce their size (the manager's
	// EnforceSize; rescheduled to another node when the scheduler chose
	// the node).
	ParamEnforceSize = "enforceSize"
	// ParamMode is how a class makes volumes: ModeNode or ModeMultihost.
	ParamMode = "mode"
	// DefaultPool is the pool of a class without ParamPool.
	DefaultPool = "default"
	// DefaultDirMode is the mode of a directory whose class names none.
	DefaultDirMode = "0777"
)

// Claim annotations that choose the node of a node-mode volume, in order of
// precedence; after them comes the scheduler's
// storagehelpers.AnnSelectedNode (k8s.io/component-helpers/storage/volume),
// which the provisioner also sets itself on a pinned claim of a
// WaitForFirstConsumer class.
const (
	// AnnotationProvisionOnNode pins a claim to a node.
	AnnotationProvisionOnNode = "hostpath.dev/provision-on-node"
	// AnnotationKubevirtProvisionOnNode is kubevirt's hostpath-provisioner
	// key, honoured like AnnotationProvisionOnNode so that its users can
	// switch without editing claims.
	AnnotationKubevirtProvisionOnNode = "kubevirt.io/provisionOnNode"
)

// ClaimNodeAnnotations are the annotations of a claim that name its node,
// in the order of precedence (the first set wins): the pins, then the
// scheduler's volume.kubernetes.io/selected-node.
var ClaimNodeAnnotations = []string{AnnotationProvisionOnNode, AnnotationKubevirtProvisionOnNode, storagehelpers.AnnSelectedNode}

// AnnotationReuseDirectory on a claim names an existing directory of the
// pool to use instead of the pathPattern (node mode): a directory kept by a
// deleted Retain volume whose owner record names the claim's namespace
// (that of the volume's claim, or one an administrator handed it over to),
// and that no volume names. The provisioner hands the directory to the new
// volume only after those checks.
const AnnotationReuseDirectory = "hostpath.dev/reuse-directory"

// PersistentVolume annotations of the provisioner's volumes: who made a
// volume, for which claim, and where its directory is. The provisioner
// library sets the provisioner's name in the Kubernetes annotation
// storagehelpers.AnnDynamicallyProvisioned (pv.kubernetes.io/provisioned-by).
const (
	// AnnotationNode is the node that holds the directory of a node-mode
	// volume.
	AnnotationNode = "hostpath.dev/node"
	// AnnotationClaimNamespace is the namespace of the claim the volume was
	// made for. The owner record of the volume's directory keeps it
	// (NewCreateVolumeRequest).
	AnnotationClaimNamespace = "hostpath.dev/claim-namespace"
	// AnnotationClaimName is the name of the claim the volume was made for.
	AnnotationClaimName = "hostpath.dev/claim-name"
	// AnnotationPool is the volume's storage pool.
	AnnotationPool = "hostpath.dev/pool"
	// AnnotationDirectory is the directory's name inside the pool.
	AnnotationDirectory = "hostpath.dev/directory"
	// AnnotationMode is how the volume was made, ModeNode or ModeMultihost
	// (the StorageClass parameter "mode"; not the Kubernetes volumeMode). A
	// PV without it counts as node mode.
	AnnotationMode = "hostpath.dev/mode"
	// AnnotationNodes lists, sorted and comma-separated, the nodes that hold
	// the directory of a multihost volume: those that got it when it was
	// made (their HostDefinition of the pool Ready and their manager
	// serving), and those the host definer gave it since.
	AnnotationNodes = "hostpath.dev/nodes"
	// AnnotationPendingNodes lists, sorted and comma-separated, the nodes
	// that were still to get the directory when a multihost volume was made
	// (their HostDefinition of the pool PendingForCreation, or Ready
	// without a serving manager pod): the host definer gives them the
	// directory, and moves them to AnnotationNodes, once they are defined.
	// Absent when there are none.
	AnnotationPendingNodes = "hostpath.dev/pending-nodes"
)

// The values of AnnotationMode and of the StorageClass parameter "mode":
// how a claim becomes directories.
const (
	// ModeNode is one directory on one node, with node affinity to it.
	ModeNode = "node"
	// ModeMultihost is the same directory on every defined node of the
	// pool, without node affinity.
	ModeMultihost = "multihost"
)

// PersistentVolume annotations about the volume's size, which the PV's
// capacity states (and the claim's status.capacity once bound).
const (
	// AnnotationSizeEnforcement says how the pool enforces the volume's
	// size as a limit: "btrfs", "xfs" or "ext4" (the manager's
	// managerapi.EnforcementBtrfs and the others), or EnforcementNone when it does not
	// and the volume can outgrow its capacity. A multihost volume's is the
	// kind its nodes share: EnforcementNone when any node lacks one, else
	// the kinds, sorted and comma-separated.
	AnnotationSizeEnforcement = "hostpath.dev/size-enforcement"
	// AnnotationSizeUsed is what the volume used the last time its
	// provisioner instance looked: the bytes its quota counts, rounded up
	// to a whole MiB, as a quantity such as "0", "1536Mi" or "2Gi". Node
	// mode only, where the size is enforced (absent elsewhere: a multihost
	// volume's usage differs per node). The instance of the volume's node
	// looks every --usage-interval and writes it again only when the usage
	// moved 1 MiB or more away from it.
	AnnotationSizeUsed = "hostpath.dev/size-used"
)

// EnforcementNone is the AnnotationSizeEnforcement of a volume whose size
// is not enforced, and the HostDefinition's Status.SizeEnforcement of a
// pool that enforces none.
const EnforcementNone = "none"

// AnnotationHealth on a PersistentVolume is the condition of its directory,
// as the provisioner instance of the node that holds it saw it last:
// absent (or "") when healthy, else one of the Health* values. A multihost
// PV's says the condition of each node whose copy is not healthy, sorted by
// node and comma-separated: "node-a=DirectoryMissing,
// node-c=PoolReadOnly". It is written only when a condition changes, and an
// event goes with each change, so a restarted instance that finds the
// condition it sees recorded says nothing again.
const AnnotationHealth = "hostpath.dev/health"

// The values of AnnotationHealth, one condition at a time, the most severe
// first when several hold.
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
	// the provisioner's --usage-warning-threshold percent of it.
	HealthUsageHigh = "UsageHigh"
)

// AnnotationNodeGoneSince on a node-mode PV is when the provisioner
// instance elected for it first saw its Node missing (RFC 3339), with
// --node-gone-grace-period set; it goes when the Node is back.
const AnnotationNodeGoneSince = "hostpath.dev/node-gone-since"

// AnnotationRecordedPolicy on a PV is the reclaim policy that the owner
// records of its directory say on every node that holds it ("Delete" or
// "Retain", as RecordedReclaimPolicy words the PV's policy). The provisioner
// sets it on the PV it makes (the create request records that policy); when
// the PV's persistentVolumeReclaimPolicy changes, the instance that acts
// for the PV records the new policy with every node's directory and then
// updates this annotation. A node's sweeper removes the directory of a PV
// that is gone only if its record says Delete.
const AnnotationRecordedPolicy = "hostpath.dev/recorded-reclaim-policy"

// FinalizerDirectoryProtection keeps a PersistentVolume until the
// provisioner instance of its node (for a multihost volume, the elected
// instance) has removed its directory (reclaim policy Delete) or marked it
// retained (Retain, Recycle), or until its node is gone. The provisioner
// sets it in the PVs it makes and removes it.
const FinalizerDirectoryProtection = "hostpath.dev/directory-protection"

// LabelManager, set to "false" on a Node, keeps the manager DaemonSet (and
// so every volume directory) off it; a node without the label, or with any
// other value, runs a manager. A multihost local PV's node affinity is
// this label NotIn ["false"] (ManagerNodeSelector): the nodes that run a
// manager, including those that join later.
const LabelManager = "hostpath.dev/manager"

// ManagerNodeSelector selects the nodes that run a manager: those not
// labelled LabelManager=false. It is the required node affinity of the
// manager DaemonSet (manifests/base/manager) and of multihost local PVs.
func ManagerNodeSelector() *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key:      LabelManager,
			Operator: corev1.NodeSelectorOpNotIn,
			Values:   []string{"false"},
		}},
	}}}
}

// JoinNodes is the value of AnnotationNodes or AnnotationPendingNodes for a
// list of nodes: the names, comma-separated, in the order given.
func JoinNodes(nodes []string) string { return strings.Join(nodes, ",") }

// SplitNodes reads a value of AnnotationNodes or AnnotationPendingNodes
// back, dropping blanks; "" gives none.
func SplitNodes(value string) []string {
	var out []string
	for n := range strings.SplitSeq(value, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// VolumeDirectory is what the annotations of a PV of the provisioner say
// of its directory: where it is, and on which nodes.
//
// +k8s:deepcopy-gen=false
type VolumeDirectory struct {
	// Pool and Directory locate the directory (AnnotationPool,
	// AnnotationDirectory); they are not validated here.
	Pool, Directory string
	// Multihost says the volume is of ModeMultihost.
	Multihost bool
	// Node is the node of a node-mode volume (AnnotationNode; "" when the
	// PV names none); "" for a multihost one.
	Node string
	// Nodes and PendingNodes are a multihost volume's AnnotationNodes
	// (they hold the directory) and AnnotationPendingNodes (the host
	// definer gives them the directory), split; nil in node mode.
	Nodes, PendingNodes []string
}

// VolumeDirectoryOf reads the annotations of a PV that one of the
// provisioner names made, and false for any other PV. A PV without
// AnnotationMode counts as ModeNode; one with another value than the two
// modes is not one of ours. Every reader of a PV's directory (deletion,
// the sweeper, expansion, usage, capacity, the host definer) goes through
// it.
func VolumeDirectoryOf(pv *corev1.PersistentVolume, provisioner ProvisionerNames) (VolumeDirectory, bool) {
	a := pv.Annotations
	if !provisioner.Has(a[storagehelpers.AnnDynamicallyProvisioned]) {
		return VolumeDirectory{}, false
	}
	d := VolumeDirectory{Pool: a[AnnotationPool], Directory: a[AnnotationDirectory]}
	switch a[AnnotationMode] {
	case "", ModeNode:
		d.Node = a[AnnotationNode]
	case ModeMultihost:
		d.Multihost = true
		d.Nodes, d.PendingNodes = SplitNodes(a[AnnotationNodes]), SplitNodes(a[AnnotationPendingNodes])
	default:
		return VolumeDirectory{}, false
	}
	return d, true
}

// MultihostDirectoryOf is VolumeDirectoryOf for multihost PVs only: false
// for any other PV.
func MultihostDirectoryOf(pv *corev1.PersistentVolume, provisioner ProvisionerNames) (VolumeDirectory, bool) {
	d, ok := VolumeDirectoryOf(pv, provisioner)
	return d, ok && d.Multihost
}

// Holders are the nodes that hold the directory now: the node of a
// node-mode volume (none when it names none), the Nodes of a multihost one.
func (d VolumeDirectory) Holders() []string {
	if d.Multihost {
		return d.Nodes
	}
	if d.Node == "" {
		return nil
	}
	return []string{d.Node}
}

// On reports whether node holds the directory now (Holders).
func (d VolumeDirectory) On(node string) bool {
	return node != "" && slices.Contains(d.Holders(), node)
}

// Listed reports whether the PV names node at all: On, or among a
// multihost volume's PendingNodes.
func (d VolumeDirectory) Listed(node string) bool {
	return d.On(node) || slices.Contains(d.PendingNodes, node)
}

// VolumePath returns the host path of the directory of a PV of the
// provisioner: spec.hostPath.path, or spec.local.path for a PV of a class
// with volumeType local; "" for a PV of any other source. Code that needs
// a PV's path reads it here, so it works for both.
func VolumePath(pv *corev1.PersistentVolume) string {
	switch s := pv.Spec.PersistentVolumeSource; {
	case s.HostPath != nil:
		return s.HostPath.Path
	case s.Local != nil:
		return s.Local.Path
	}
	return ""
}

// ClassPool returns the pool a StorageClass of the provisioner names by its
// parameters: ParamPool, DefaultPool when it is absent. An empty value is
// returned as it is (an invalid pool name, which the provisioner refuses).
func ClassPool(params map[string]string) string {
	if pool, ok := params[ParamPool]; ok {
		return pool
	}
	return DefaultPool
}
