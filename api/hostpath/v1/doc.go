// Package v1 is the hostpath.dev/v1 API of the host definer: the
// cluster-scoped HostDefinition, one per (node, storage pool), which says
// whether the node is ready to hold volume directories of the pool.
//
// # Naming
//
// A HostDefinition is named "<pool>.<node>" (Name): a pool name is a DNS
// label, so it holds no dot, and everything after the first dot is the node
// name, which may itself contain dots (node names are DNS subdomains). When
// the two together are longer than a name may be (253 characters), the node
// part is cut and a hash of the full node name appended. Programs never
// parse names: Spec.NodeName and Spec.Pool are the truth, and the host
// definer looks definitions up by them.
//
// The clientset, informers and listers under hostpath.dev/api/generated
// and the deepcopy functions in zz_generated.deepcopy.go are generated from
// these types by k8s.io/code-generator, and the CRD in
// manifests/base/hostdefiner/crd.yaml by controller-gen (`make generate`).
//
// +k8s:deepcopy-gen=package
// +groupName=hostpath.dev
package v1
