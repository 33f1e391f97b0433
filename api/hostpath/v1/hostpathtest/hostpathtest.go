// Package hostpathtest builds, for tests only, the Kubernetes objects the
// programs read: PersistentVolumes of node mode and multihost with the
// annotations of hostpathv1 (hostpath.dev/api/hostpath/v1), claims,
// StorageClasses, Nodes and manager pods; it also takes the events of a
// FakeRecorder (Events), decodes objects kept in testdata (Load), reads
// what a fake clientset was asked to write (Writes, Patches) and fills an
// informer's store from its list (Replace), which tests of several
// packages did each for themselves. Each builder makes a
// small valid object and takes options (funcs that change it, applied in
// order), so that a test says only what matters to it; the options of
// this package change one thing each, and a test's own funcs of the same
// type mix with them.
//
// It lives beside the vocabulary it spells, in the api module that both
// the provisioner and the host definer import, rather than in either
// program: a fixture of one program imported by the other's tests would be
// an import across programs. Only _test.go files import it (make verify
// keeps packages whose name ends in "test" out of the binaries). The fake
// managers these objects are served by are in
// hostpath.dev/api/managerapi/managertest.
package hostpathtest

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// DefaultPool is the pool of the PVs built here unless InPool says
// otherwise.
const DefaultPool = hostpathv1.DefaultPool

// UID is the UID the builders give the object named name: "uid-<name>".
func UID(name string) types.UID { return types.UID("uid-" + name) }

// NodePV returns a node-mode PV named name on node, provisioned by
// hostpathv1.DefaultProvisionerName, whose directory is name+"-dir" of
// DefaultPool, with UID UID(name) and no phase, changed by opts.
func NodePV(name, node string, opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: UID(name), Annotations: map[string]string{
		storagehelpers.AnnDynamicallyProvisioned: hostpathv1.DefaultProvisionerName,
		hostpathv1.AnnotationMode:                hostpathv1.ModeNode,
		hostpathv1.AnnotationNode:                node,
		hostpathv1.AnnotationPool:                DefaultPool,
		hostpathv1.AnnotationDirectory:           name + "-dir",
	}}}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

// MultihostPV returns NodePV(name, "") made multihost on nodes (see
// Multihost), changed by opts.
func MultihostPV(name string, nodes []string, opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	return NodePV(name, "", append([]func(*v1.PersistentVolume){Multihost(nodes...)}, opts...)...)
}

// Multihost makes a PV multihost, its directory on nodes: mode multihost,
// hostpathv1.AnnotationNodes, no hostpathv1.AnnotationNode.
func Multihost(nodes ...string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		delete(pv.Annotations, hostpathv1.AnnotationNode)
		pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
		pv.Annotations[hostpathv1.AnnotationNodes] = hostpathv1.JoinNodes(nodes)
	}
}

// PendingOn sets the nodes a multihost PV is still to be given to
// (hostpathv1.AnnotationPendingNodes); none removes the annotation.
func PendingOn(nodes ...string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		if len(nodes) == 0 {
			delete(pv.Annotations, hostpathv1.AnnotationPendingNodes)
			return
		}
		pv.Annotations[hostpathv1.AnnotationPendingNodes] = hostpathv1.JoinNodes(nodes)
	}
}

// OnNode sets the node of a node-mode PV.
func OnNode(node string) func(*v1.PersistentVolume) {
	return Annotation(hostpathv1.AnnotationNode, node)
}

// InPool sets the pool of the PV's directory.
func InPool(pool string) func(*v1.PersistentVolume) {
	return Annotation(hostpathv1.AnnotationPool, pool)
}

// InDirectory sets the name of the PV's directory.
func InDirectory(dir string) func(*v1.PersistentVolume) {
	return Annotation(hostpathv1.AnnotationDirectory, dir)
}

// ProvisionedBy sets the provisioner that made the PV.
func ProvisionedBy(name string) func(*v1.PersistentVolume) {
	return Annotation(storagehelpers.AnnDynamicallyProvisioned, name)
}

// Annotation sets an annotation of the PV.
func Annotation(key, value string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Annotations[key] = value }
}

// WithoutAnnotation removes an annotation of the PV.
func WithoutAnnotation(key string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { delete(pv.Annotations, key) }
}

// MadeFor records the claim namespace/name the PV was made for, in the
// annotations the provisioner writes (hostpathv1.AnnotationClaimNamespace
// and AnnotationClaimName).
func MadeFor(namespace, name string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Annotations[hostpathv1.AnnotationClaimNamespace] = namespace
		pv.Annotations[hostpathv1.AnnotationClaimName] = name
	}
}

// ClaimRef sets the PV's spec.claimRef to the claim namespace/name, of
// UID UID(name).
func ClaimRef(namespace, name string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name, UID: UID(name)}
	}
}

// Capacity sets the PV's capacity, a resource.Quantity string ("1Gi").
func Capacity(size string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
	}
}

// HostPath sets the PV's hostPath source to path.
func HostPath(path string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}
	}
}

// Phase sets the PV's status.phase.
func Phase(p v1.PersistentVolumePhase) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Status.Phase = p }
}

// ReclaimPolicy sets the PV's reclaim policy.
func ReclaimPolicy(p v1.PersistentVolumeReclaimPolicy) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = p }
}

// OfClass sets the PV's StorageClass.
func OfClass(name string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Spec.StorageClassName = name }
}

// ResourceVersion sets the PV's resourceVersion.
func ResourceVersion(rv string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.ResourceVersion = rv }
}

// Finalizers sets the PV's finalizers.
func Finalizers(f ...string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Finalizers = f }
}

// Deleting marks the PV as being deleted (a deletionTimestamp of now),
// with hostpathv1.FinalizerDirectoryProtection as its finalizers unless it
// has some.
func Deleting(pv *v1.PersistentVolume) {
	pv.DeletionTimestamp = ptr.To(metav1.Now())
	if len(pv.Finalizers) == 0 {
		pv.Finalizers = []string{hostpathv1.FinalizerDirectoryProtection}
	}
}

// Claim returns a claim namespace/name of UID UID(name) requesting 1Gi,
// ReadWriteOnce, changed by opts.
func Claim(namespace, name string, opts ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: UID(name)},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ClaimOfClass sets the claim's StorageClass.
func ClaimOfClass(name string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To(name) }
}

// Requesting sets the storage the claim requests ("2Gi").
func Requesting(size string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
	}
}

// BoundToPV binds the claim to the PV named pv, whose capacity is size:
// spec.volumeName, phase Bound, status access modes and capacity.
func BoundToPV(pv, size string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv
		c.Status.Phase = v1.ClaimBound
		c.Status.AccessModes = c.Spec.AccessModes
		c.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
	}
}

// ClaimAnnotation sets an annotation of the claim.
func ClaimAnnotation(key, value string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) { metav1.SetMetaDataAnnotation(&c.ObjectMeta, key, value) }
}

// Class returns a StorageClass of provisioner, changed by opts.
func Class(name, provisioner string, opts ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
	for _, o := range opts {
		o(sc)
	}
	return sc
}

// Binding sets the class's volume binding mode.
func Binding(mode storagev1.VolumeBindingMode) func(*storagev1.StorageClass) {
	return func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = ptr.To(mode) }
}

// Parameters sets the class's parameters (hostpathv1.ParamPool, ParamMode,
// ...).
func Parameters(params map[string]string) func(*storagev1.StorageClass) {
	return func(sc *storagev1.StorageClass) { sc.Parameters = params }
}

// AllowExpansion sets whether the class's claims may grow.
func AllowExpansion(allow bool) func(*storagev1.StorageClass) {
	return func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = ptr.To(allow) }
}

// Node returns a Node of UID UID(name) whose kubernetes.io/hostname label
// is name, changed by opts.
func Node(name string, opts ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: UID(name), Labels: map[string]string{v1.LabelHostname: name}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Hostname sets the node's kubernetes.io/hostname label ("" removes it).
func Hostname(hostname string) func(*v1.Node) {
	return func(n *v1.Node) {
		if hostname == "" {
			delete(n.Labels, v1.LabelHostname)
			return
		}
		n.Labels[v1.LabelHostname] = hostname
	}
}

// NodeLabel sets a label of the node.
func NodeLabel(key, value string) func(*v1.Node) {
	return func(n *v1.Node) { n.Labels[key] = value }
}

// Ready gives the node a Ready condition of True.
func Ready(n *v1.Node) {
	n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue})
}
