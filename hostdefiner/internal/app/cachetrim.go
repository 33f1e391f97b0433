package app

import (
	v1 "k8s.io/api/core/v1"

	"hostpath.dev/manager/pkg/runtime/cachetrim"
)

// The host definer's trim list: what its informers drop from each object
// they cache (cachetrim.Transform drops every object's managedFields; the
// rules below drop more from Nodes and Pods), and what each cache holds.
// It is the host definer's alone: the provisioner keeps its own
// (provisioner/internal/app/cachetrim), so that a program that starts
// reading a field changes only its own list. A dropped field reads as
// empty, with no error.
//
// The host definer updates HostDefinitions, CSR statuses, the CA Secret and
// the bundle ConfigMap with the cached objects, so nothing but
// managedFields is dropped from those kinds. It never writes a Node or a
// Pod.
//
// What each cache holds (the leader only):
//
//   - Nodes, StorageClasses and PersistentVolumes, every one in the
//     cluster; managedFields dropped, and a Node's status (trimNode).
//   - Pods and DaemonSets of --namespace, all of them (manager,
//     provisioner and host definer pods); managedFields dropped, and the
//     Pod fields of trimPod.
//   - Every HostDefinition; managedFields dropped.
//   - CertificateSigningRequests of signer client.SignerName, the Secret
//     client.CASecret and the ConfigMap client.CABundleConfigMap of
//     --namespace (field selectors); managedFields dropped.
//   - The ConfigMap client.CABundleConfigMap again (the informer of
//     manager/pkg/client/trust), kept whole.
//
// What it saves (BenchmarkTransform, on testdata): a worker Node with 30
// images takes 17.1 KiB of heap once decoded, 2.6 KiB trimmed (its JSON
// 10.8 KiB, 1.2 KiB trimmed); a manager pod 22.4 KiB, 4.8 KiB trimmed
// (JSON 9.3 KiB, 2.6 KiB). The transform allocates nothing.

// cacheTrim is the transform of every informer of the host definer.
var cacheTrim = cachetrim.Transform(cachetrim.For(trimNode), cachetrim.For(trimPod))

// trimNode drops all of a Node's status (images, conditions, addresses,
// capacity, allocatable, nodeInfo, volumesInUse, volumesAttached,
// daemonEndpoints, ...): the host definer reads a Node's name, labels and
// spec.taints only (node affinity of a DaemonSet is matched on labels and
// metadata.name). Metadata and spec are kept whole.
func trimNode(n *v1.Node) *v1.Node {
	n.Status = v1.NodeStatus{}
	return n
}

// trimPod drops a Pod's containers, their statuses and its volumes: the
// host definer reads a pod's metadata (labels, UID, deletionTimestamp,
// owner), spec.nodeName, spec.serviceAccountName, status.phase,
// status.conditions (Ready) and status.podIP. The rest of spec and status
// is small and kept.
func trimPod(p *v1.Pod) *v1.Pod {
	p.Spec.Containers, p.Spec.InitContainers, p.Spec.EphemeralContainers, p.Spec.Volumes = nil, nil, nil, nil
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
	return p
}
