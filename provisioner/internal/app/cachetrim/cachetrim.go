// Package cachetrim is the provisioner's trim list: what its informers keep
// of each object, listed in one place, beside the program that reads them
// (package app sets New on every informer factory). It is the
// provisioner's alone: the host definer keeps its own
// (hostdefiner/internal/app, cachetrim.go), and the mechanism,
// hostpath.dev/manager/pkg/runtime/cachetrim, holds only managedFields
// and the two rules both programs choose (Node status, Pod containers), so
// a change of what the provisioner reads changes this package only.
//
// New drops every object's managedFields (the mechanism's), a Node's
// status (shared.NodeStatus: the provisioner and the library read a Node's
// name, labels and spec.taints, and never write one) and a Pod's
// containers and volumes (shared.PodContainers: the provisioner reads a
// pod's metadata, spec.nodeName, status.phase, status.conditions and
// status.podIP, a manager's URL), then
// replaces each PersistentVolumeClaim and PersistentVolume that this
// instance will never act on by a stub: a new object with the few fields
// of the original that the provisioner library and this program read to
// skip it. Each instance caches every claim and PV of the cluster; with
// stubs, those of other provisioners cost it a fraction of their size.
//
// # Which objects become stubs
//
// The decision is made from the object alone (a transform sees one object,
// not the StorageClasses), by the annotations the library itself decides
// by, so that a stub is always an object the library skips:
//
//   - A claim (ForeignClaim) whose annotations
//     volume.kubernetes.io/storage-provisioner and
//     volume.beta.kubernetes.io/storage-provisioner, where set, and at least
//     one is, name a provisioner that is not hostpath's: not one of the
//     instance's ProvisionerNames, not hostpathv1.DefaultProvisionerName,
//     not hostpathv1.CapacityProvisionerName, not empty.
//     kube-controller-manager sets them from the claim's StorageClass when
//     it finds no volume to bind (for WaitForFirstConsumer, once the
//     scheduler selected a node); the library provisions only a claim whose
//     first annotation, else the beta one, names one of its names
//     (shouldProvision), and the Qualifier refuses the others too
//     (provisioner.Provisioner.ShouldProvision), so neither provisions, nor
//     reports, a claim of another provisioner. A claim without these
//     annotations stays whole: a pending claim not yet annotated (it may be
//     ours), a WaitForFirstConsumer claim waiting for the scheduler, a
//     claim bound to a PV made by hand.
//   - A PersistentVolume (ForeignVolume) whose annotations
//     pv.kubernetes.io/provisioned-by and pv.kubernetes.io/migrated-to
//     name no hostpath provisioner (as above; absent counts as none), and
//     whose spec.csi.driver, if any, does not either. The library acts only
//     on a PV whose provisioned-by names one of its names, or without it
//     whose CSI driver does or (not CSI) whose migrated-to does
//     (isProvisionerForVolume); this program acts only on PVs whose
//     provisioned-by does. PVs of other provisioners and PVs made by hand
//     become stubs.
//
// Objects of hostpath's names are never stubs, whatever the instance is
// configured with, nor is any other kind. Each version of an object is
// decided anew: a pending claim is whole until kube-controller-manager
// names another provisioner on it, and a stub whose annotations come to
// name hostpath is cached whole again at that update.
//
// # What a stub keeps
//
// A claim stub has exactly: metadata.name, metadata.namespace,
// metadata.uid, metadata.resourceVersion; the annotations
// volume.kubernetes.io/storage-provisioner and
// volume.beta.kubernetes.io/storage-provisioner, those that are set;
// spec.volumeName.
//
// A PersistentVolume stub has exactly: metadata.name, metadata.uid,
// metadata.resourceVersion; the annotations pv.kubernetes.io/provisioned-by,
// pv.kubernetes.io/migrated-to, hostpath.dev/node, hostpath.dev/pool and
// hostpath.dev/directory, those that are set.
//
// Every other field reads as empty. Why each is kept:
//
//   - name and namespace: the cache's key and its namespace index (the
//     listers); a PV's name is also its existence, which protects
//     directories: the sweeper never removes a directory whose owner PV
//     exists, whoever's it is (reclaim.Sweeper), and a directory is reused
//     only once its owner PV is gone (provisioner's checkReusable).
//   - uid: the library finds claims by UID (its "uid" index of the claim
//     cache, its work queue's keys).
//   - resourceVersion: event handlers tell a resync from a change by it
//     (package resize).
//   - the storage-provisioner annotations: the library skips the claim by
//     them (shouldProvision), so does the Qualifier (ForeignClaim), and
//     Transform decides again from them (it is idempotent).
//   - spec.volumeName: the library reads it first, and skips a bound claim
//     before it asks the Qualifier.
//   - provisioned-by and migrated-to: the library skips the PV by them
//     (isProvisionerForVolume) and so does every part of this program that
//     reads PVs, by provisioned-by: the reclaim controller, the sweeper
//     (locationOf), the resize controller (volumeOf), the usage refresher,
//     the capacity publisher, the start-up adoption; and Transform decides
//     again from them.
//   - hostpath.dev/node, hostpath.dev/pool, hostpath.dev/directory: a PV
//     that names a directory of a pool this way protects it, whoever made
//     the PV (a PV made by hand pointing into a pool): a claim's
//     hostpath.dev/reuse-directory refuses a directory any PV names, and the
//     start-up adoption gives no owner to a directory two PVs name
//     (provisioner's volumesNaming and keyOf).
//
// Nothing else of a claim or PV of another provisioner is needed: its
// class, its spec and status but the above, its labels, finalizers and
// deletion time are read only after one of the filters above said the
// object is hostpath's, or read as empty to the same end: the resize
// controller looks at a claim's phase before its PV, and passes a stub by
// as not Bound; the Qualifier reads its class only after ForeignClaim.
// Stubs whose kept annotations are equal and name
// only provisioners share one annotations map: cached objects are never
// changed in place (the informers' rule; the library and this program
// copy an object before they change it).
//
// # Nothing writes a stub
//
// An update (PUT) of a stub would erase on the API server every field the
// stub dropped. None is made. In the library and this program, the only
// update of a claim or PV is the library's rescheduleProvisioning (the
// claim without volume.kubernetes.io/selected-node), reached only from
// provisionClaimOperation after shouldProvision said yes, which takes a
// storage-provisioner annotation of one of its names: never a stub's. Every
// other write of a claim or PV is a patch of the fields it changes, made
// only for objects that passed the filters above (selected-node for a
// claim of a hostpath class, the resize controller's and the reclaim
// controller's for PVs of the provisioner names, the usage refresher's for
// PVs of its node). The one other update, of a CSIStorageCapacity
// (package capacity), is of a kind New keeps whole but managedFields.
// TestLibrarySkipsStubs runs the library over stubs with a Qualifier and a
// DeletionGuard that say yes to everything and checks that it provisions
// and deletes nothing, counts no failure and writes no claim or PV.
//
// # What it saves
//
// BenchmarkForeignCache lists 10,000 objects of another provisioner, as
// the API server sends them (testdata), into informers with the indexes of
// the provisioner's (by namespace; claims by UID, the library's), cached
// whole (managedFields dropped) and as stubs, and reports the live heap
// they take. The figures, and what a stub still costs, are in
// docs/benchmarks.md, "Stubs of other provisioners' objects".
//
// # What each cache of the provisioner holds
//
//   - PersistentVolumeClaims, PersistentVolumes, StorageClasses and Nodes,
//     every one in the cluster (the library's informers are these):
//     managedFields dropped, a Node's status dropped, the claims and PVs of
//     other provisioners as stubs (above).
//   - Pods of --namespace matching --instance-selector (the provisioner
//     instances): managedFields and the Pod fields of shared.PodContainers dropped.
//   - Unless --manager-url is set: Pods of --manager-namespace matching
//     --manager-selector (the managers), trimmed the same way; every
//     HostDefinition, managedFields dropped; and the ConfigMap
//     client.CABundleConfigMap of --manager-namespace (one object,
//     manager/pkg/client/trust's informer), kept whole.
//   - Unless --capacity-interval is 0: the CSIStorageCapacities of
//     --namespace labelled with its own node (the objects it publishes,
//     one per capacity-aware StorageClass), managedFields dropped. It
//     updates them from the cache, which a nil managedFields allows.
//
// Code that starts reading a field of a claim or PV of another provisioner
// must keep it here first: a dropped field reads as empty, with no error.
package cachetrim

import (
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	shared "hostpath.dev/manager/pkg/runtime/cachetrim"
)

// claimAnnotations are the annotations a claim stub keeps: those that name
// the provisioner that is to make its volume. kube-controller-manager's
// PersistentVolume controller sets AnnStorageProvisioner, and
// AnnBetaStorageProvisioner to the same value, from the claim's
// StorageClass; the library provisions only a claim whose
// AnnStorageProvisioner (else AnnBetaStorageProvisioner) is one of its
// names.
var claimAnnotations = []string{storagehelpers.AnnStorageProvisioner, storagehelpers.AnnBetaStorageProvisioner}

// volumeAnnotations are the annotations a PersistentVolume stub keeps: who
// made it (the library acts on a PV whose AnnDynamicallyProvisioned, or
// since CSI migration AnnMigratedTo, is one of its names) and where its
// directory is.
var volumeAnnotations = []string{
	storagehelpers.AnnDynamicallyProvisioned, storagehelpers.AnnMigratedTo,
	hostpathv1.AnnotationNode, hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory,
}

// nameAnnotations are the kept annotations whose values are provisioner
// names, few in a cluster: maps of only these are shared between stubs.
var nameAnnotations = []string{
	storagehelpers.AnnStorageProvisioner, storagehelpers.AnnBetaStorageProvisioner,
	storagehelpers.AnnDynamicallyProvisioned, storagehelpers.AnnMigratedTo,
}

// maxShared bounds the number of distinct annotation maps shared between
// stubs. Users can write any value into their claims' annotations; past
// this many, stubs get maps of their own.
const maxShared = 64

// New returns the transform of the provisioner's informers for an instance
// of names (see the package doc). It never fails, and is idempotent, as
// client-go asks. It may run on several informers at once.
func New(names hostpathv1.ProvisionerNames) cache.TransformFunc {
	t := &trimmer{names: names, shared: map[string]map[string]string{}}
	return shared.Transform(shared.NodeStatus, shared.PodContainers, shared.For(t.claim), shared.For(t.volume))
}

// trimmer is the state of one transform: the names and the annotation maps
// shared between stubs.
type trimmer struct {
	names  hostpathv1.ProvisionerNames
	mu     sync.Mutex
	shared map[string]map[string]string
}

// claim returns the stub of a claim of another provisioner, else c.
func (t *trimmer) claim(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	if ForeignClaim(c, t.names) {
		return t.claimStub(c)
	}
	return c
}

// volume returns the stub of a PersistentVolume of another provisioner,
// else pv.
func (t *trimmer) volume(pv *v1.PersistentVolume) *v1.PersistentVolume {
	if ForeignVolume(pv, t.names) {
		return t.volumeStub(pv)
	}
	return pv
}

// ForeignClaim reports whether claim is, by its storage-provisioner
// annotations, another provisioner's than hostpath's (see the package
// doc): both, where set, name another provisioner, and one at least is
// set.
func ForeignClaim(claim *v1.PersistentVolumeClaim, names hostpathv1.ProvisionerNames) bool {
	set := false
	for _, key := range claimAnnotations {
		p, ok := claim.Annotations[key]
		if !ok {
			continue
		}
		if !otherProvisioner(p, names) {
			return false
		}
		set = true
	}
	return set
}

// ForeignVolume reports whether pv is another provisioner's than hostpath's,
// or made by hand (see the package doc): neither its provisioned-by nor its
// migrated-to annotation nor its CSI driver names hostpath.
func ForeignVolume(pv *v1.PersistentVolume, names hostpathv1.ProvisionerNames) bool {
	if hostpathName(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned], names) || hostpathName(pv.Annotations[storagehelpers.AnnMigratedTo], names) {
		return false
	}
	return pv.Spec.CSI == nil || !hostpathName(pv.Spec.CSI.Driver, names)
}

// otherProvisioner reports whether name is a provisioner name that is not
// hostpath's.
func otherProvisioner(name string, names hostpathv1.ProvisionerNames) bool {
	return name != "" && !hostpathName(name, names)
}

// hostpathName reports whether name is one of names or of hostpath's
// default names, whatever the instance is configured with.
func hostpathName(name string, names hostpathv1.ProvisionerNames) bool {
	return names.Has(name) || name == hostpathv1.DefaultProvisionerName || name == hostpathv1.CapacityProvisionerName
}

// claimStub returns the stub of a claim of another provisioner.
func (t *trimmer) claimStub(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion,
			Annotations: t.keep(c.Annotations, claimAnnotations),
		},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: c.Spec.VolumeName},
	}
}

// volumeStub returns the stub of a PersistentVolume of another
// provisioner.
func (t *trimmer) volumeStub(pv *v1.PersistentVolume) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion,
			Annotations: t.keep(pv.Annotations, volumeAnnotations),
		},
	}
}

// keep returns the annotations of from among keys, nil when none is set: a
// map shared with the stubs that keep the same ones when all of them name
// provisioners, else a map of its own.
func (t *trimmer) keep(from map[string]string, keys []string) map[string]string {
	n, onlyNames := 0, true
	for _, k := range keys {
		if _, ok := from[k]; ok {
			n++
			onlyNames = onlyNames && slices.Contains(nameAnnotations, k)
		}
	}
	switch {
	case n == 0:
		return nil
	case !onlyNames:
		return pick(from, keys, n)
	}
	var id strings.Builder
	for _, k := range keys {
		if v, ok := from[k]; ok {
			id.WriteString(k)
			id.WriteByte(0)
			id.WriteString(v)
			id.WriteByte(0)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.shared[id.String()]; ok {
		return m
	}
	m := pick(from, keys, n)
	if len(t.shared) < maxShared {
		t.shared[id.String()] = m
	}
	return m
}

// pick returns a new map of the n annotations of from among keys.
func pick(from map[string]string, keys []string, n int) map[string]string {
	m := make(map[string]string, n)
	for _, k := range keys {
		if v, ok := from[k]; ok {
			m[k] = v
		}
	}
	return m
}
