// Package cachetrim trims what the informers of the provisioner and the
// host definer keep: Transform, set on every informer factory of both
// programs (informers.WithTransform; the provisioner's through its own
// transform, provisioner/internal/cachetrim), drops from each object,
// before it is cached or handed to an event handler, the fields that
// neither program nor the provisioner library
// (sig-storage-lib-external-provisioner) reads.
//
// # What Transform drops
//
// From every object, metadata.managedFields: nothing reads it, and it is
// often the largest part of a small object. It becomes nil, never an empty
// list: an Update (PUT) of a cached object without managedFields leaves
// the server's as they are, while an empty list would reset them. The
// library updates claims taken from the cache, and the host definer
// updates HostDefinitions, CSR statuses, the CA Secret and the bundle
// ConfigMap that way, so nothing else is dropped from those kinds (an
// Update would erase on the server what the cache dropped). The
// provisioner's own transform goes further only for the claims and PVs of
// other provisioners, which nothing updates.
//
// From a Node, all of its status (images, conditions, addresses, capacity,
// allocatable, nodeInfo, volumesInUse, volumesAttached, daemonEndpoints,
// ...): the programs read a Node's name, labels and spec.taints only
// (node affinity of a DaemonSet is matched on labels and metadata.name),
// and never write a Node. Metadata and spec are kept whole.
//
// From a Pod, spec.containers, spec.initContainers,
// spec.ephemeralContainers, spec.volumes, status.containerStatuses,
// status.initContainerStatuses and status.ephemeralContainerStatuses:
// the programs read a pod's metadata (labels, UID, deletionTimestamp),
// spec.nodeName, spec.serviceAccountName, status.phase,
// status.conditions (Ready) and status.podIP, and never write a Pod. The
// rest of spec and status is small and kept.
//
// Code that starts reading a dropped field must keep it here first: a
// dropped field reads as empty, with no error.
//
// What it saves (BenchmarkTransform, on testdata): a worker Node with 30
// images takes 17.1 KiB of heap once decoded, 2.6 KiB trimmed (its JSON
// 10.8 KiB, 1.2 KiB trimmed); a manager pod 22.4 KiB, 4.8 KiB trimmed
// (JSON 9.3 KiB, 2.6 KiB). Transform allocates nothing.
//
// # What each cache holds
//
// The provisioner (one instance per node) composes Transform with stubs
// of the claims and PersistentVolumes of other provisioners; its package
// provisioner/internal/cachetrim lists what each of its caches holds.
//
// The host definer (hostdefiner/internal/app, the leader only):
//
//   - Nodes, StorageClasses and PersistentVolumes, every one in the
//     cluster; managedFields dropped, and Node status.
//   - Pods and DaemonSets of --namespace, all of them (manager,
//     provisioner and host definer pods); managedFields dropped, and the
//     Pod fields above.
//   - Every HostDefinition; managedFields dropped.
//   - CertificateSigningRequests of signer client.SignerName, the Secret
//     client.CASecret and the ConfigMap client.CABundleConfigMap of
//     --namespace (field selectors); managedFields dropped.
//   - The ConfigMap client.CABundleConfigMap again (manager/pkg/client/trust's
//     informer), kept whole.
package cachetrim

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

var _ cache.TransformFunc = Transform

// Transform trims obj in place (the informer's own decoded copy, which
// client-go allows a transform to change) and returns it. It never fails;
// what is not an object with metadata is returned as it is. Trimming a
// trimmed object changes nothing, as client-go asks.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Node:
		o.Status = v1.NodeStatus{}
	case *v1.Pod:
		trimPod(o)
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// trimPod drops the containers, their statuses and the volumes of p.
func trimPod(p *v1.Pod) {
	p.Spec.Containers = nil
	p.Spec.InitContainers = nil
	p.Spec.EphemeralContainers = nil
	p.Spec.Volumes = nil
	p.Status.ContainerStatuses = nil
	p.Status.InitContainerStatuses = nil
	p.Status.EphemeralContainerStatuses = nil
}
