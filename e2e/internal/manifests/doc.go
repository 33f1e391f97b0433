// Package manifests checks the kustomize manifests (manifests/, its base in
// manifests/base, the OpenShift overlay manifests/openshift and the
// components in manifests/components/) as `kubectl kustomize` renders them,
// without a cluster: what the manifests must agree on and the local cluster
// cannot show, such as the manager's NetworkPolicy, which its network does
// not enforce, the OpenShift SecurityContextConstraints, which it does
// not have, and the node agents' tolerations (control-plane nodes only
// with the component control-plane), as its nodes carry no control-plane
// taint. The tests need the pinned kubectl (.cache/k8s/VERSION/bin, from
// the Kubernetes build) and skip without it, unless HOSTPATH_E2E_REQUIRED is
// "true".
package manifests
