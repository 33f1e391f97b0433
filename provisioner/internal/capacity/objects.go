package capacity

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// Labels of the objects.
const (
	// LabelManagedBy is the recommended label of the program that writes
	// an object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is its value on the objects: the provisioner.
	ManagedBy = "hostpath-provisioner"
	// LabelNode is the node an object describes (LabelValue of its name).
	LabelNode = "hostpath.dev/node"
	// LabelStorageClass is the class an object describes (LabelValue of
	// its name), for kubectl get -l; storageClassName is the truth.
	LabelStorageClass = "hostpath.dev/storage-class"
)

// namePrefix starts the name of every object.
const namePrefix = "hp-"

// labelHashLength is the number of hex digits of SHA-256 that end a label
// value made from a longer name.
const labelHashLength = 16

// ObjectName is the name of the object of class on node, whose
// kubernetes.io/hostname label is hostname: "hp-" and 32 hex digits of
// the SHA-256 of the three. None of them holds a "/", so "/" separates
// them without ambiguity. A change of either immutable field of the object
// (storageClassName, nodeTopology) is a new name.
func ObjectName(class, node, hostname string) string {
	sum := sha256.Sum256([]byte(class + "/" + node + "/" + hostname))
	return namePrefix + hex.EncodeToString(sum[:16])
}

// LabelValue is a label value standing for name (a DNS subdomain): name
// itself when it has at most 63 characters, else its first 46, "-" and 16
// hex digits of its SHA-256 (63 characters).
func LabelValue(name string) string {
	if len(name) <= validation.LabelValueMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	keep := validation.LabelValueMaxLength - 1 - labelHashLength
	return name[:keep] + "-" + hex.EncodeToString(sum[:])[:labelHashLength]
}

// Selector selects the objects of node: those the provisioner manages
// whose LabelNode stands for node.
func Selector(node string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelNode: LabelValue(node)})
}

// objectLabels are the labels of the object of class on node.
func objectLabels(class, node string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelNode: LabelValue(node), LabelStorageClass: LabelValue(class)}
}

// capacityAware reports whether the Publisher publishes for sc: a class of
// hostpathv1.CapacityProvisionerName that waits for the first consumer
// (the scheduler checks capacity for no other).
func capacityAware(sc *storagev1.StorageClass) bool {
	return sc.Provisioner == hostpathv1.CapacityProvisionerName &&
		sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// figure is what is published for one class, and how far it must move to
// be written.
type figure struct {
	// available is the capacity to publish, in bytes.
	available int64
	// threshold is the move in bytes that is written (see moved).
	threshold int64
	// why says why available is 0 when the pool has no figure; "" else.
	why string
}

// figureOf returns the figure of class from what the host reports: the
// available bytes of the class's pool, or 0 when the pool is absent,
// cannot be read, or does not enforce sizes for a class that demands it.
func figureOf(host *managerapi.Host, sc *storagev1.StorageClass) figure {
	name := hostpathv1.ClassPool(sc.Parameters)
	for _, pool := range host.Pools {
		if pool.Name != name {
			continue
		}
		f := figure{threshold: max(MinThreshold, pool.CapacityBytes/thresholdDivisor)}
		switch {
		case pool.Error != "":
			f.why = "the pool's statistics cannot be read: " + pool.Error
		case sc.Parameters[hostpathv1.ParamEnforceSize] == "true" && pool.Enforcement == "":
			f.why = "the class asks for enforceSize and the pool does not enforce sizes"
		default:
			f.available = max(pool.AvailableBytes, 0)
		}
		return f
	}
	return figure{threshold: MinThreshold, why: "the manager has no pool " + name}
}

// moved reports whether a published capacity must be written again for
// the available bytes now: when it is unset, when either is 0 and the other
// is not, or when they are more than threshold apart.
func moved(published *resource.Quantity, now, threshold int64) bool {
	if published == nil {
		return true
	}
	old := published.Value()
	if old == now {
		return false
	}
	return old == 0 || now == 0 || old-now > threshold || now-old > threshold
}

// object is the object of sc on node, whose kubernetes.io/hostname label
// is hostname, in namespace, publishing available bytes.
func object(namespace string, sc *storagev1.StorageClass, node *v1.Node, hostname string, available int64) *storagev1.CSIStorageCapacity {
	return &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ObjectName(sc.Name, node.Name, hostname),
			Namespace:       namespace,
			Labels:          objectLabels(sc.Name, node.Name),
			OwnerReferences: []metav1.OwnerReference{nodeOwner(node)},
		},
		NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{v1.LabelHostname: hostname}},
		StorageClassName: sc.Name,
		Capacity:         resource.NewQuantity(available, resource.BinarySI),
	}
}

// nodeOwner is the owner reference to node: a namespaced object may have a
// cluster-scoped owner, and the garbage collector deletes it when no Node
// of that UID exists. It does not block the Node's deletion
// (blockOwnerDeletion would need the right to update the Node's
// finalizers).
func nodeOwner(node *v1.Node) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}

// immutableDiffers reports whether cur differs from want in a field that
// cannot be updated (an object made by hand under the name): it must be
// deleted, and made again.
func immutableDiffers(cur, want *storagev1.CSIStorageCapacity) bool {
	return cur.StorageClassName != want.StorageClassName || !equality.Semantic.DeepEqual(cur.NodeTopology, want.NodeTopology)
}

// needsRepair reports whether cur lacks want's labels or owner reference,
// or has a maximumVolumeSize, which the scheduler would prefer to the
// capacity.
func needsRepair(cur, want *storagev1.CSIStorageCapacity) bool {
	for k, v := range want.Labels {
		if cur.Labels[k] != v {
			return true
		}
	}
	return cur.MaximumVolumeSize != nil || !equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences)
}

// updated is cur made as want: want's labels added, its owner reference
// and capacity, and no maximumVolumeSize.
func updated(cur, want *storagev1.CSIStorageCapacity) *storagev1.CSIStorageCapacity {
	out := cur.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	maps.Copy(out.Labels, want.Labels)
	out.OwnerReferences = want.OwnerReferences
	out.Capacity = want.Capacity
	out.MaximumVolumeSize = nil
	return out
}
