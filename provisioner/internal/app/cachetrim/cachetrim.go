// Package cachetrim is the provisioner's trim list: what its informers keep
// of each object, listed in one place, beside the program that reads them
// (package app sets New on every informer factory). It is the
// provisioner's alone: the host definer keeps its own
// (hostdefiner/internal/app, cachetrim.go), and the mechanism,
// hostpath.dev/api/runtime/cachetrim, holds only managedFields
// and two rules the host definer chooses (Node status, Pod containers), so
// a change of what the provisioner reads changes this package only.
//
// New drops every object's managedFields (the mechanism's), replaces each
// Node and HostDefinition by a stub (nodeStub, definitionStub: a new
// object with only the fields this program and the library read of it)
// and each Pod by a podstub.Pod (a struct of the provisioner's own, with
// the few fields it reads of a pod: package podstub says which, and why
// no *v1.Pod); every instance keeps every HostDefinition and the pods of
// every instance and manager, so these are the part of an instance's
// memory that grows with the number of nodes; of the Nodes, it keeps its
// own and, for a while, those it looked up: package nodes),
// then replaces each PersistentVolume of another provisioner that
// is cached at all by a stub: a new object with the few fields of the
// original that the provisioner library and this program read to skip it.
// The provisioner never writes a Node or a Pod, so a stub is never sent
// back to the API server.
//
// # What is never cached
//
// Each instance asks the API server only for the PVs, and where the
// claim-labelling policy is bound the claims, whose watch label selects
// them (Scope, hostpathv1.WatchSelector: its node's, Multihost, NodeGone,
// Unsorted): the objects of other provisioners and of other nodes never
// reach it. Without the policy it watches every claim. Either way it
// keeps in its caches only those it may act on, or that protect a
// directory: the claim and PV informers (ClaimInformer, VolumeInformer,
// which Register registers with the informer factory) pass each listed
// object and each watch event through Keep first, so the claims of other
// provisioners cost an instance without the policy the decoding of their
// events, not memory that grows with the cluster, and a label set wrong
// makes nothing cached that Keep refuses. Keep decides from the object
// and, for a claim, its StorageClass in the cache (the claim informer
// lists and watches only once the StorageClass cache has synced):
//
//   - A claim (Keep.Claim) is not cached when its annotations
//     volume.kubernetes.io/storage-provisioner and
//     volume.beta.kubernetes.io/storage-provisioner, where set, and at
//     least one is, name a provisioner that is not hostpath's
//     (responsibility.ForeignClaim: not one of the instance's ProvisionerNames, not
//     hostpathv1.DefaultProvisionerName, not
//     hostpathv1.CapacityProvisionerName, not empty).
//     kube-controller-manager sets them from the claim's StorageClass when
//     it finds no volume to bind; the library provisions only a claim
//     whose first annotation, else the beta one, names one of its names
//     (shouldProvision), and the Qualifier refuses the others too
//     (provisioner.Provisioner.ShouldProvision). Nor, when neither names
//     hostpath, is a claim cached that has no StorageClass (a claim of
//     class "" binds only to PVs made by hand, and one whose class is
//     assigned later is updated then) or whose StorageClass exists and is
//     another provisioner's (a WaitForFirstConsumer claim of another
//     class, not annotated until the scheduler picks its node). A claim
//     whose StorageClass does not exist yet is cached: that class may come
//     as hostpath's, and a pinned claim is not updated by anyone else.
//   - Nor is a claim cached that is bound to a node-mode PV, of one of the
//     instance's names and in the PV cache, of another node
//     (Keep.boundElsewhere): that node's instance alone provisions,
//     resizes, clones from and reports on it. So an instance caches the
//     claims of its node, the pending ones (which any instance may have to
//     report on or give back to the scheduler) and the multihost ones,
//     not every bound claim of the cluster. The claim informer waits for
//     the PV cache too.
//   - A PersistentVolume (Keep.Volume) is not cached when it is another
//     provisioner's or made by hand (responsibility.ForeignVolume: its annotations
//     pv.kubernetes.io/provisioned-by and pv.kubernetes.io/migrated-to
//     name no hostpath provisioner, absent counts as none, and its
//     spec.csi.driver, if any, does not either) and names no directory of
//     a pool (none of hostpath.dev/node, hostpath.dev/pool,
//     hostpath.dev/directory). The library acts only on a PV whose
//     provisioned-by names one of its names, or without it whose CSI
//     driver does or (not CSI) whose migrated-to does
//     (isProvisionerForVolume); this program acts only on PVs whose
//     provisioned-by does. Another provisioner's PV that names a directory
//     is cached as a stub (below): it protects that directory.
//   - Nor is a node-mode PV of the instance's names cached that is settled
//     on another node (Keep.settledElsewhere): Bound, not under deletion,
//     not marked hostpath.dev/node-gone-since, an instance running on its
//     node (in the peer cache). Only that node's instance acts for it. Any
//     other state of such a PV may need another instance (Released or
//     under deletion on a Node that is gone: the instance elected for it
//     releases it), and so may a PV of a node that runs no instance, so it
//     is cached. A Bound PV whose Node is deleted is found by the reclaim
//     controller's scan of the API server (reclaim's nodegonescan.go) and
//     marked, which brings it into every cache. The PV informer lists and
//     watches once the peer cache has synced. So an instance caches the
//     PVs of its node, the multihost ones and those in passing states, not
//     every PV of the cluster.
//
// Each version of an object is decided anew: an object that Keep comes to
// accept is cached at that update; one it no longer accepts leaves the
// cache at that update (the filter remembers what it passed on and turns
// the update into a deletion). The parts of this program that must know
// whether an object it does not cache exists ask the API server: the
// sweeper, before it removes a directory whose owner PV is not in the
// cache (reclaim.Sweeper); the reuse of a retained directory
// (provisioner's volumeExists); a clone's source claim and PV that are not
// in the cache (provisioner's cloneSource).
//
// # Which PVs become stubs
//
// A PersistentVolume that is cached although responsibility.ForeignVolume says it is
// another provisioner's (it names a directory of a pool) is a stub. Since
// the PVs are watched by label, only such a PV that carries the watch
// label arrives at all (one labelled by hand); the parts that need the
// unlabelled ones ask the API server (provisioner's knownVolumes). PVs of
// hostpath's names are never stubs, whatever the instance is configured
// with, nor are claims (a claim is cached whole or not at all), nor is any
// other kind. A stub whose annotations come to name hostpath is cached
// whole again at that update.
//
// # What a stub keeps
//
// A PersistentVolume stub has exactly: metadata.name, metadata.uid,
// metadata.resourceVersion; the annotations pv.kubernetes.io/provisioned-by,
// pv.kubernetes.io/migrated-to, hostpath.dev/node, hostpath.dev/pool and
// hostpath.dev/directory, those that are set.
//
// Every other field reads as empty. Why each is kept:
//
//   - name: the cache's key; a PV's name is also its existence, which
//     protects directories: the sweeper never removes a directory whose
//     owner PV exists, whoever's it is (reclaim.Sweeper), and a directory
//     is reused only once its owner PV is gone (provisioner's
//     checkReusable).
//   - uid and resourceVersion: event handlers tell a resync from a change
//     by the resourceVersion; the UID is an object's identity.
//   - provisioned-by and migrated-to: the library skips the PV by them
//     (isProvisionerForVolume) and so does every part of this program that
//     reads PVs, by provisioned-by: the reclaim controller, the sweeper
//     (locationOf), the resize controller (volumeOf), the usage refresher,
//     the capacity publisher, the start-up adoption; and Keep and Transform
//     decide again from them (both are idempotent).
//   - hostpath.dev/node, hostpath.dev/pool, hostpath.dev/directory: a PV
//     that names a directory of a pool this way protects it, whoever made
//     the PV (a PV made by hand pointing into a pool): a claim's
//     hostpath.dev/reuse-directory refuses a directory any PV names, and the
//     start-up adoption gives no owner to a directory two PVs name
//     (provisioner's volumesNaming and keyOf).
//
// Nothing else of another provisioner's PV is needed: its spec and status,
// its labels, finalizers and deletion time are read only after one of the
// filters above said the PV is hostpath's.
//
// # Nothing writes a stub
//
// An update (PUT) of a stub would erase on the API server every field the
// stub dropped. None is made. In the library and this program, the only
// update of a claim or PV is the library's rescheduleProvisioning (of a
// claim, never a stub). Every other write of a PV is a patch of the fields
// it changes, made only for PVs that passed the filters above (the resize
// controller's and the reclaim controller's for PVs of the provisioner
// names, the usage refresher's for PVs of its node). The one other update,
// of a CSIStorageCapacity (package capacity), is of a kind New keeps whole
// but managedFields. TestLibrarySkipsStubs runs the library over stubs,
// and over the informers of ClaimInformer and VolumeInformer, with a
// Qualifier and a DeletionGuard that say yes to everything, and checks
// that it provisions and deletes nothing, counts no failure and writes no
// claim or PV.
//
// # What it saves
//
// BenchmarkForeignCache lists 10,000 objects of another provisioner, as
// the API server sends them (testdata), into informers with the indexes of
// the provisioner's (by namespace; claims by UID, the library's): cached
// whole (managedFields dropped), as stubs, and through Keep (not cached),
// and reports the live heap they take. The figures are in
// docs/benchmarks.md, "Objects of another provisioner".
//
// # What each cache of the provisioner holds
//
//   - PersistentVolumeClaims and PersistentVolumes that Keep accepts (the
//     node's own, the multihost ones, the pending and passing ones, and
//     stubs of PVs that name a directory), every StorageClass and Node in
//     the cluster (the library's informers
//     are these): managedFields dropped, Nodes as stubs (nodeStub), the PVs
//     of other provisioners that name a directory as stubs (above).
//   - Pods of --namespace matching --instance-selector (the provisioner
//     instances), as podstub.Pods (read with podstub.Lister, never a
//     typed lister).
//   - Unless --manager-url is set: Pods of --manager-namespace matching
//     --manager-selector (the managers), as podstub.Pods the same way; every
//     HostDefinition, as a stub (definitionStub); and the ConfigMap
//     managerapi.CABundleConfigMap of --manager-namespace (one object,
//     api/managerapi/trust's informer), kept whole.
//   - Unless --capacity-interval is 0: the CSIStorageCapacities of
//     --namespace labelled with its own node (the objects it publishes,
//     one per capacity-aware StorageClass), managedFields dropped. It
//     updates them from the cache, which a nil managedFields allows.
//
// Code that starts reading a claim or PV of another provisioner must ask
// the API server, or be kept here first: an object that is not cached
// reads as NotFound, and a dropped field as empty, with no error.
package cachetrim

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	shared "hostpath.dev/api/runtime/cachetrim"
	"hostpath.dev/provisioner/internal/podstub"
	"hostpath.dev/provisioner/internal/responsibility"
)

// volumeAnnotations are the annotations a PersistentVolume stub keeps: who
// made it (the library acts on a PV whose AnnDynamicallyProvisioned, or
// since CSI migration AnnMigratedTo, is one of its names) and where its
// directory is.
var volumeAnnotations = []string{
	storagehelpers.AnnDynamicallyProvisioned, storagehelpers.AnnMigratedTo,
	hostpathv1.AnnotationNode, hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory,
}

// New returns the transform of the provisioner's informers for an instance
// of names (see the package doc). It never fails, and is idempotent, as
// client-go asks. It may run on several informers at once.
func New(names hostpathv1.ProvisionerNames) cache.TransformFunc {
	return shared.Transform(shared.For(nodeStub), shared.Into(podstub.From), shared.For(definitionStub), shared.For(func(pv *v1.PersistentVolume) *v1.PersistentVolume {
		if responsibility.ForeignVolume(pv, names) {
			return volumeStub(pv)
		}
		return pv
	}))
}

// volumeStub returns the stub of a PersistentVolume of another
// provisioner.
func volumeStub(pv *v1.PersistentVolume) *v1.PersistentVolume {
	var annotations map[string]string
	for _, k := range volumeAnnotations {
		if v, ok := pv.Annotations[k]; ok {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion, Annotations: annotations},
	}
}

// nodeStub is the Node an instance caches (its own, and the others it
// looks up: package nodes): its name, UID, resourceVersion, labels,
// deletionTimestamp and spec.taints. The provisioner reads a Node's name
// and UID (the owner of its CSIStorageCapacities), its labels
// (kubernetes.io/hostname for the PV's node affinity, the control-plane
// role) and its taints (the control-plane taint); the reclaim controller
// asks only whether a Node is there (the library reads no Node since v13).
// Dropped: annotations, owner references, finalizers, the rest of spec
// (pod CIDRs, provider ID) and the whole status (images, conditions,
// addresses), which is most of a Node.
func nodeStub(n *v1.Node) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, DeletionTimestamp: n.DeletionTimestamp},
		Spec: v1.NodeSpec{Taints: n.Spec.Taints},
	}
}

// definitionStub is the HostDefinition an instance caches: its name, UID,
// resourceVersion, deletionTimestamp, spec (node and pool) and
// status.phase, what the managers' resolver reads to send a multihost
// volume to the nodes that define its pool (managers.Resolver.Targets).
// Dropped: the rest of the status (conditions, tries, times, the manager
// pod, host and boot IDs, sizes), which the host definer writes and reads.
func definitionStub(d *hostpathv1.HostDefinition) *hostpathv1.HostDefinition {
	return &hostpathv1.HostDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, UID: d.UID, ResourceVersion: d.ResourceVersion, DeletionTimestamp: d.DeletionTimestamp},
		Spec:       d.Spec,
		Status:     hostpathv1.HostDefinitionStatus{Phase: d.Status.Phase},
	}
}
