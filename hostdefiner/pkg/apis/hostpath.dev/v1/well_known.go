package v1

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"hostpath.dev/manager/pkg/client"
)

// The names below are shared by the provisioner, which writes them, and the
// host definer, which reads them to find the multihost volumes of a pool
// and to record the nodes it gave their directories. They live in the API
// package because both programs import it.

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
// AnnotationProvisionedBy, with the installation's name asks Has. The
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
	// ParamEnforceSize, "true", makes a class's volumes fail on pools that
	// cannot enforce their size (the manager's EnforceSize).
	ParamEnforceSize = "enforceSize"
	// ParamMode is how a class makes volumes: ModeNode or ModeMultihost.
	ParamMode = "mode"
	// DefaultPool is the pool of a class without ParamPool.
	DefaultPool = "default"
	// DefaultDirMode is the mode of a directory whose class names none.
	DefaultDirMode = "0777"
)

// PersistentVolume annotations of the provisioner's volumes.
const (
	// AnnotationProvisionedBy names the provisioner that made a volume (the
	// provisioner library sets it).
	AnnotationProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// AnnotationNode is the node that holds the directory of a node-mode
	// volume.
	AnnotationNode = "hostpath.dev/node"
	// AnnotationClaimNamespace is the namespace of the claim the volume was
	// made for. It is the manager client's, which records it in the owner
	// record of the volume's directory (client.NewCreateVolumeRequest).
	AnnotationClaimNamespace = client.AnnotationClaimNamespace
	// AnnotationClaimName is the name of the claim the volume was made for.
	AnnotationClaimName = "hostpath.dev/claim-name"
	// AnnotationPool is the volume's storage pool.
	AnnotationPool = "hostpath.dev/pool"
	// AnnotationDirectory is the directory's name inside the pool.
	AnnotationDirectory = "hostpath.dev/directory"
	// AnnotationMode is how the volume was made, ModeNode or ModeMultihost
	// (the StorageClass parameter "mode"; not the Kubernetes volumeMode). A
	// PV without it counts as node mode. The manager's client reads it too
	// (client.NewCreateVolumeRequest), so it is defined there.
	AnnotationMode = client.AnnotationMode
	// AnnotationNodes lists, sorted and comma-separated, the nodes that hold
	// the directory of a multihost volume: those that got it when the
	// volume was made and those the host definer gave it since.
	AnnotationNodes = "hostpath.dev/nodes"
	// AnnotationPendingNodes lists, sorted and comma-separated, the nodes
	// that were being defined when a multihost volume was made: the host
	// definer gives them the directory, and moves them to AnnotationNodes,
	// once they are defined. Absent when there are none.
	AnnotationPendingNodes = "hostpath.dev/pending-nodes"
)

// The values of AnnotationMode and of the StorageClass parameter "mode".
const (
	// ModeNode is one directory on one node, with node affinity to it.
	ModeNode = "node"
	// ModeMultihost is the same directory on every defined node of the
	// pool, without node affinity (defined with client.AnnotationMode).
	ModeMultihost = client.ModeMultihost
)

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
	if !provisioner.Has(a[AnnotationProvisionedBy]) {
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
