package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Watches by node. The API server indexes nothing by annotation, but it
// selects by label: LabelNode on a claim or PersistentVolume of hostpath
// says which provisioner instances watch it, so that each instance asks
// the API server only for the objects of its own node and those every
// instance may have to act for (WatchSelector), as the kubelet watches
// only its own pods. The provisioner sets it on the PVs it makes, changes
// it with the node-gone mark, and labels the PVs made before it existed
// when it starts; a MutatingAdmissionPolicy (manifests/base/policies,
// claim-labels.yaml) sets it on the claims, from their annotations and
// the modes of the classes in ClassesConfigMap, which the host definer
// keeps (docs/scale.md, "Watches by node").
//
// The label only narrows what the API server sends: an instance still
// decides from the object itself whether it acts (package
// provisioner/internal/responsibility), and asks the API server before it
// removes a directory whose PV it does not cache. A wrong label makes an
// object unseen by the instance that should act, never acted on by one
// that should not.

// LabelNode is the label of the claims and PersistentVolumes of hostpath
// that says which instances watch them: a node's name (its instance;
// NodeLabelValue), or one of NodeLabelMultihost, NodeLabelNodeGone and
// NodeLabelUnsorted (every instance).
const LabelNode = "hostpath.dev/node"

// The values of LabelNode that name no node. Each begins with a capital
// letter, which no node name has (a node's name is a lowercase DNS
// subdomain), so none can be taken for a node.
const (
	// NodeLabelMultihost: a multihost claim or PV (a class of
	// hostpath.dev/mode multihost), which any instance may be elected for.
	NodeLabelMultihost = "Multihost"
	// NodeLabelNodeGone: a node-mode PV marked with
	// AnnotationNodeGoneSince, whose node's instance is gone; the elected
	// instance releases or deletes it.
	NodeLabelNodeGone = "NodeGone"
	// NodeLabelUnsorted: a claim that is not bound yet (the instance
	// elected for it may have to speak for it, or give it back to the
	// scheduler), one whose node cannot be told, and any object of a node
	// whose name is too long for a label value.
	NodeLabelUnsorted = "Unsorted"
)

// NodeLabelValue is the value of LabelNode for the objects of node: its
// name, or NodeLabelUnsorted when the name is not a valid label value (a
// node name may have up to 253 characters, a label value 63).
func NodeLabelValue(node string) string {
	if node == "" || len(validation.IsValidLabelValue(node)) > 0 {
		return NodeLabelUnsorted
	}
	return node
}

// VolumeNodeLabel is the value of LabelNode for pv, a PersistentVolume
// of hostpath: NodeLabelMultihost for a multihost PV; for a node-mode one,
// NodeLabelNodeGone once marked with AnnotationNodeGoneSince, else
// NodeLabelValue of the node its AnnotationNode names.
func VolumeNodeLabel(pv *corev1.PersistentVolume) string {
	switch {
	case IsMultihost(pv):
		return NodeLabelMultihost
	case pv.Annotations[AnnotationNodeGoneSince] != "":
		return NodeLabelNodeGone
	}
	return NodeLabelValue(pv.Annotations[AnnotationNode])
}

// WatchSelector selects the claims and PersistentVolumes that the
// instance on node watches: LabelNode naming node, or one of the values
// that every instance watches.
func WatchSelector(node string) labels.Selector {
	values := []string{NodeLabelMultihost, NodeLabelNodeGone, NodeLabelUnsorted}
	if v := NodeLabelValue(node); v != NodeLabelUnsorted {
		values = append(values, v)
	}
	r, err := labels.NewRequirement(LabelNode, selection.In, values)
	if err != nil {
		// Every value is a valid label value (NodeLabelValue).
		panic("hostpath: the watch selector of node " + node + ": " + err.Error())
	}
	return labels.NewSelector().Add(*r)
}

// UnlabelledSelector selects the objects without LabelNode: those made
// before the label, and those of other provisioners.
func UnlabelledSelector() labels.Selector {
	r, err := labels.NewRequirement(LabelNode, selection.DoesNotExist, nil)
	if err != nil {
		panic("hostpath: the selector of unlabelled objects: " + err.Error())
	}
	return labels.NewSelector().Add(*r)
}

// ClassesConfigMap is the ConfigMap, in the namespace of the provisioner
// and the host definer, that the host definer keeps with the
// StorageClasses of hostpath and their modes, as the parameters of the
// claim-labelling MutatingAdmissionPolicy: a key ClassKeyPrefix+NAME per
// class, whose value is its hostpath.dev/mode (ModeNode or
// ModeMultihost), ProvisionerKey and ImmediateKey of each class, the key
// ProvisionersKey, and ServedKey of each node that runs a provisioner
// instance.
const ClassesConfigMap = "hostpath-classes"

// ClassKeyPrefix prefixes the key of each class in ClassesConfigMap.
const ClassKeyPrefix = "class."

// ProvisionersKey is the key of ClassesConfigMap whose value is the
// provisioner names of the installation, separated by single spaces: the
// policy labels a claim whose
// storage-provisioner annotation names one of them even when its class
// is not listed yet.
const ProvisionersKey = "provisioners"

// ClassKey is the key of the class name in ClassesConfigMap.
func ClassKey(class string) string { return ClassKeyPrefix + class }

// The claim's provisioner, named at once. The PV controller writes the
// class's provisioner into a claim's storage-provisioner annotations
// (volume.kubernetes.io/storage-provisioner and its beta twin) before any
// external provisioner may act on the claim: one more update of each
// claim, which the library waits for, in the PV controller's path
// (docs/bench/2026-11-29.md, "The claim's provisioner, named at once").
// The PV controller writes nothing when the annotation already names the
// class's provisioner, so the claim-labelling policy sets both annotations
// itself where the PV controller would, on a claim of a class of hostpath
// that is not bound and names no provisioner yet: at its creation, when
// its class binds Immediate (ImmediateKey) or it has a selected node; in
// the scheduler's update that selects its node (never in another writer's
// update, which a policy of its own may confine). The host
// definer keeps ProvisionerKey and ImmediateKey of each class of hostpath
// in ClassesConfigMap; without them (a ConfigMap of an older host definer)
// the policy sets nothing, and the PV controller does it as before.
const (
	// ProvisionerKeyPrefix prefixes the key of each class of hostpath
	// whose value is the class's provisioner.
	ProvisionerKeyPrefix = "provisioner."
	// ImmediateKeyPrefix prefixes the key, with an empty value, of each
	// class of hostpath whose volumeBindingMode is Immediate (the API
	// server's default).
	ImmediateKeyPrefix = "immediate."
)

// ProvisionerKey is the key of the class name's provisioner in
// ClassesConfigMap.
func ProvisionerKey(class string) string { return ProvisionerKeyPrefix + class }

// ImmediateKey is the key in ClassesConfigMap that says the class name
// binds Immediate.
func ImmediateKey(class string) string { return ImmediateKeyPrefix + class }

// ClaimLabelsPolicy is the name of the MutatingAdmissionPolicy that sets
// LabelNode on the claims of hostpath, and of its binding: an instance
// watches claims by WatchSelector only when the API server serves the
// binding (Kubernetes 1.36 and later, with manifests/base/policies'
// claim-labels.yaml applied), and every claim otherwise.
const ClaimLabelsPolicy = "hostpath-claim-labels"

// ClaimNodeLabel is the value of LabelNode for claim, a claim of
// hostpath, whose class is of mode ModeMultihost when multihost is true,
// when served says whether an instance runs on a node (ServedKey in
// ClassesConfigMap): what the claim-labelling policy (ClaimLabelsPolicy)
// sets, computed the same way, for tests and for the provisioner.
//
//   - NodeLabelMultihost for a multihost claim;
//   - NodeLabelValue of the node that the first set of
//     ClaimNodeAnnotations names, for a bound claim (spec.volumeName set),
//     and for a pending one whose node runs an instance: only that
//     instance acts for it;
//   - NodeLabelUnsorted otherwise: a claim that names no node, or a
//     pending one whose node runs no instance (the elected instance
//     speaks for it, or gives it back to the scheduler).
func ClaimNodeLabel(claim *corev1.PersistentVolumeClaim, multihost bool, served func(node string) bool) string {
	if multihost {
		return NodeLabelMultihost
	}
	node := ClaimNode(claim)
	if node == "" || (claim.Spec.VolumeName == "" && !served(node)) {
		return NodeLabelUnsorted
	}
	return NodeLabelValue(node)
}

// ClaimNode is the node that the first set of ClaimNodeAnnotations of
// claim names, or "".
func ClaimNode(claim *corev1.PersistentVolumeClaim) string {
	for _, a := range ClaimNodeAnnotations {
		if node := claim.Annotations[a]; node != "" {
			return node
		}
	}
	return ""
}

// ServedKeyPrefix prefixes the key of each node that runs a provisioner
// instance in ClassesConfigMap (the host definer keeps them, with an empty
// value): the policy labels a pending claim with its node only when that
// node's instance runs, and Unsorted otherwise, so that the elected
// instance speaks for a claim whose node runs none (or does not exist).
const ServedKeyPrefix = "node."

// ServedKey is the key of node in ClassesConfigMap.
func ServedKey(node string) string { return ServedKeyPrefix + node }
