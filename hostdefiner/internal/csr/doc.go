// Package csr issues the managers' serving certificates through the
// CertificateSigningRequest API (certificates.k8s.io/v1), as the kubelet's
// serving certificates are: each manager asks for a certificate of signer
// managerapi.SignerName for its node, and the host definer's leader approves,
// signs and keeps the CA. Three controllers, in the shape of Kubernetes'
// sample-controller (informers feed a typed workqueue of
// hostpath.dev/api/runtime/worker; the syncs read listers only):
//
//   - The Approver decides every CSR of the signer that has no Approved or
//     Denied condition yet.
//   - The Signer signs every approved CSR of the signer that has no
//     certificate yet.
//   - The Authority keeps the CA in the Secret managerapi.CASecret and the bundle
//     callers trust in the ConfigMap managerapi.CABundleConfigMap, and rotates
//     the CA on request.
//
// CSRs of other signers are never touched.
//
// # What is approved
//
// All managers run under one service account, so a request made with it
// proves only that it comes from some manager pod (or from anyone who may
// create pods with that service account), not from the manager of the node
// the certificate would name. The proof of the node is the pod-bound token:
// for a CSR made with a service account token bound to a pod, the API server
// fills spec.extra with the pod's name, UID and node (managerapi.ExtraPodName,
// managerapi.ExtraPodUID, managerapi.ExtraNodeName), which the requester cannot
// forge. The Approver approves (reason ReasonApproved) only when all of these hold:
//
//   - spec.username is the managers' service account (else ReasonNotManager);
//   - spec.extra names one pod, UID and node (else ReasonUnknownPod), and
//     that pod is a manager pod (the manager selector, the service account)
//     in the managers' namespace with that UID (else ReasonUnknownPod), not
//     terminating or finished (else ReasonPodTerminating), on that node (else
//     ReasonWrongNode);
//   - the request parses and its signature checks; its common name is
//     CommonNamePrefix + node and its only organization, if any, is
//     Organization; its DNS names are exactly [managerapi.ServerName(node)],
//     with no IP address, email or URI; its usages are among digital
//     signature, key encipherment and server auth and include server auth;
//     its key is ECDSA, Ed25519 or RSA of at least 2048 bits (else
//     ReasonWrongNode when the names are those of another node, or
//     ReasonBadRequest).
//
// Anything else is denied, with the reason and a message saying why. A pod
// that the pod cache does not hold yet is looked for again for
// PodCacheGrace after the CSR's creation before the CSR is denied.
//
// # What is signed
//
// The Signer checks the request's shape again (an administrator may approve
// by hand) and issues a leaf certificate: a random 128-bit serial, the
// request's subject and DNS names, valid from 5 minutes before now (clock
// skew) for spec.expirationSeconds (default DefaultLifetime) capped by
// Config.MaxLifetime and by the CA's own end, key usage digital signature
// (and key encipherment for an RSA key), extended key usage server auth, not
// a CA, with the CA's key identifier. A CSR that cannot be signed gets a
// Failed condition with the reason (ReasonBadRequest, ReasonWrongNode, or
// ReasonSignFailed when the CA has expired). Until the CA Secret exists an
// approved CSR waits for it.
//
// # The CA and its rotation
//
// The Secret managerapi.CASecret (type kubernetes.io/tls) holds the signing CA
// in tls.crt and tls.key, and in PreviousCertKey the old CAs still trusted,
// until the time in PreviousUntilAnnotation. When the Secret is missing the
// Authority creates it with a new CA (ECDSA P-256, self-signed, common name
// "hostpath-manager-ca@<unix time>", 10 years); an existing Secret is used
// as it is (bring your own CA: any CA certificate and matching key). The key
// is never logged. The ConfigMap managerapi.CABundleConfigMap, key
// managerapi.CABundleKey, holds the bundle: the current CA and the previous
// ones still trusted.
//
// Setting RotateAnnotation on the Secret to a new value rotates the CA: a
// new CA signs from then on, the old one moves to PreviousCertKey and stays
// in the bundle for Config.CAOverlap (which must exceed the certificates'
// lifetime, so that every manager renews under the new CA meanwhile), and
// RotatedAnnotation records the value handled. Once the overlap ends, the
// old CA leaves the Secret and the bundle. A rotation during an overlap
// keeps every old CA until the end of the new overlap.
package csr
