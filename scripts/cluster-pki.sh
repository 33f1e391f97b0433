#!/usr/bin/env bash
# cluster-pki.sh NODE_NAME...: make the local cluster's CA, serving and client
# certificates (ECDSA P-256, openssl), the service-account signing key, and one
# kubeconfig per client under .cluster/. Called by cluster-up.sh.
# cluster-pki.sh --nodes NODE_NAME...: only these nodes' kubelet certificates
# and kubeconfigs, signed by the existing CA (node-add.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

NODES_ONLY=false
if [ "${1:-}" = --nodes ]; then
  NODES_ONLY=true
  shift
  [ -f "$PKI_DIR/ca.key" ] || die "no cluster CA in $PKI_DIR (run make cluster-up)"
fi
mkdir -p "$PKI_DIR"
cd "$PKI_DIR"
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }

# sign NAME SUBJECT [SAN]: a leaf certificate; with a SAN it also serves TLS.
sign() {
  local name=$1 subj=$2 san=${3:-}
  key "$name"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

if ! $NODES_ONLY; then
  key ca
  openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=hostpath-local-ca" -out ca.crt 2>/dev/null
  sign apiserver "/CN=kube-apiserver" \
    "IP:$API_IP,IP:127.0.0.1,IP:${SERVICE_CIDR%.0/16}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign admin "/O=system:masters/CN=hostpath-admin"
  sign kube-controller-manager "/CN=system:kube-controller-manager"
  sign kube-scheduler "/CN=system:kube-scheduler"
  sign kube-proxy "/CN=system:kube-proxy"
  sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
  openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
fi
for n in "$@"; do sign "kubelet-$n" "/O=system:nodes/CN=system:node:$n"; done
chmod 600 ./*.key

# kubeconfig OUT CERT: a kubeconfig with the certificates embedded.
kubeconfig() {
  cat > "$1" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: hostpath-local
  cluster:
    server: https://$API_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 < ca.crt)
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 < "$2.crt")
    client-key-data: $(base64 -w0 < "$2.key")
contexts:
- name: hostpath-local
  context: {cluster: hostpath-local, user: $2}
current-context: hostpath-local
EOK
  chmod 600 "$1"
}
if ! $NODES_ONLY; then
  kubeconfig "$CLUSTER_KUBECONFIG" admin
  for c in kube-controller-manager kube-scheduler kube-proxy; do kubeconfig "$PKI_DIR/$c.kubeconfig" "$c"; done
fi
for n in "$@"; do kubeconfig "$PKI_DIR/kubelet-$n.kubeconfig" "kubelet-$n"; done
