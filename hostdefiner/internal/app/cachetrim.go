package app

import "hostpath.dev/api/runtime/cachetrim"

// The host definer's trim list: what its informers drop from each object
// they cache (cachetrim.Transform drops every object's managedFields; the
// rules below drop more from Nodes and Pods), and what each cache holds.
// It is the host definer's alone: the provisioner keeps its own
// (provisioner/internal/app/cachetrim), so that a program that starts
// reading a field changes only its own list. A dropped field reads as
// empty, with no error.
//
// The host definer updates HostDefinitions, CSR statuses, the CA Secret,
// the bundle ConfigMap and the ConfigMap of the classes with the cached
// objects, so nothing but managedFields is dropped from those kinds. It
// never writes a Node or a Pod.
//
// What each cache holds (the leader only):
//
//   - Nodes and StorageClasses, every one in the cluster, and the
//     multihost PersistentVolumes (labelled hostpath.dev/node=Multihost,
//     the only ones it asks the API server for); managedFields dropped,
//     and a Node's status
//     (cachetrim.NodeStatus: the host definer reads a Node's name, labels
//     and spec.taints).
//   - Pods and DaemonSets of --namespace, all of them (manager,
//     provisioner and host definer pods); managedFields dropped, and the
//     Pod fields of cachetrim.PodContainers (the host definer reads a pod's
//     metadata, owner included, spec.nodeName, spec.serviceAccountName,
//     status.phase, status.conditions and status.podIP; of a provisioner
//     pod, which package classes reads from the same cache, only its
//     labels, deletionTimestamp and spec.nodeName).
//   - Every HostDefinition; managedFields dropped.
//   - CertificateSigningRequests of signer managerapi.SignerName, the Secret
//     managerapi.CASecret and the ConfigMap managerapi.CABundleConfigMap of
//     --namespace (field selectors); managedFields dropped.
//   - The ConfigMap hostpathv1.ClassesConfigMap of --namespace (a field
//     selector); managedFields dropped.
//   - The ConfigMap managerapi.CABundleConfigMap again (the informer of
//     api/managerapi/trust), kept whole.
//
// What it saves: docs/benchmarks.md, "What trimming the caches saves"
// (BenchmarkTransform, on testdata).

// cacheTrim is the transform of every informer of the host definer.
var cacheTrim = cachetrim.Transform(cachetrim.NodeStatus, cachetrim.PodContainers)
