package managerapi

// The names of the managers' transport security, shared by the managers
// (which request serving certificates), the host definer (which approves
// and signs them) and the callers (which verify them). See
// docs/security.md, "Transport security".

// SignerName is the CertificateSigningRequest signer of the managers'
// serving certificates. The host definer approves and signs its CSRs.
const SignerName = "hostpath.dev/manager-serving"

// serverNameSuffix follows the node name in a manager's DNS SAN.
const serverNameSuffix = ".manager.hostpath.dev"

// ServerName is the DNS name in the serving certificate of the manager on
// node, which callers set as TLS ServerName: it names the node, not the pod
// IP, so a new pod IP changes nothing. A node name is a DNS subdomain, so
// the result is a DNS name (when it fits in 253 characters).
func ServerName(node string) string { return node + serverNameSuffix }

// CABundleConfigMap is the ConfigMap, in the product's namespace, that
// holds the certificates callers trust for the managers (CABundleKey, PEM;
// during a CA rotation both the new and the old CA).
const CABundleConfigMap = "hostpath-manager-ca"

// CABundleKey is the key of the bundle in CABundleConfigMap.
const CABundleKey = "ca.crt"

// CASecret is the Secret, in the product's namespace, that holds the CA
// that signs the managers' certificates (only the host definer reads it).
const CASecret = "hostpath-manager-ca"

// ServingPort is the managers' default HTTPS port for /v1;
// HealthPort serves /healthz, /readyz and /metrics in plain HTTP.
const (
	ServingPort = 8443
	HealthPort  = 8081
)
