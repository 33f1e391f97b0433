#!/usr/bin/env bash
# demo.sh (make demo): the whole product on the local cluster, from nothing.
# Brings the cluster up unless it runs, builds and loads the images, installs
# the manifests, then creates in namespace hostpath-demo
#   - a node-mode claim (class hostpath) and a pod that writes into it, and
#   - a multihost claim (class hostpath-shared) and a DaemonSet whose pod on
#     every node writes into it,
# waits until they run, and shows the claims, volumes and host definitions,
# the files the pods wrote as they are on each node's disk, and one
# authenticated call to a manager. The cluster stays up; a second run reuses
# what the first made.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
S=$(cd "$(dirname "$0")" && pwd)

NS=hostpath-demo
SYS=hostpath-system
TIMEOUT=${DEMO_TIMEOUT:-180}
T0=$(now)
STEPS=8
step=0
# step TEXT: announce the next step.
step() {
  step=$((step + 1))
  printf '\n==> [%d/%d] %s  (%ss)\n' "$step" "$STEPS" "$*" "$(since "$T0")"
}
# show CMD...: print a command, then run it.
show() {
  local shown=("$@")
  [ "$1" = kc ] && shown[0]=kubectl
  printf '$ %s\n' "${shown[*]}"
  "$@"
}
# await WHAT CHECK...: run CHECK every second until it succeeds, printing a
# dot for each wait, for at most TIMEOUT seconds.
await() {
  local what=$1 i
  shift
  printf '    waiting for %s ' "$what"
  for ((i = 0; i < TIMEOUT; i++)); do
    if "$@" > /dev/null 2>&1; then
      printf ' ok (%ds)\n' "$i"
      return 0
    fi
    printf '.'
    sleep 1
  done
  printf ' timed out\n'
  kc -n "$NS" get pvc,pods -o wide >&2 || true
  kc -n "$NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -15 >&2 || true
  die "$what: not within ${TIMEOUT}s"
}

step "Local cluster (scripts/cluster-up.sh: a no-op when it already runs)"
"$S/cluster-up.sh"

step "Images (scripts/images.sh: build what changed, import it into every node)"
before=$(cat "$IMAGES_DIR"/{manager,provisioner,hostdefiner}.key 2>/dev/null || true)
"$S/images.sh"
after=$(cat "$IMAGES_DIR"/{manager,provisioner,hostdefiner}.key 2>/dev/null || true)

step "Install hostpath (kubectl apply -k manifests/)"
if [ "$before" != "$after" ] && kc get namespace "$SYS" > /dev/null 2>&1; then
  echo "    new images: restarting the running product"
  kc -n "$SYS" rollout restart daemonset,deployment > /dev/null
fi
"$S/deploy.sh"

step "A node-mode claim and a pod that writes into it"
kc get namespace "$NS" > /dev/null 2>&1 || show kc create namespace "$NS"
show kc -n "$NS" apply -f - <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: notes}
spec:
  storageClassName: hostpath     # mode node, WaitForFirstConsumer
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: hostpath.dev/testtools:dev
    imagePullPolicy: IfNotPresent
    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
    command: [/bin/sh, -c, 'echo "pod $HOSTNAME on $NODE wrote this at $(date -u +%FT%TZ)" >> /data/hello.txt && exec sleep 1000000']
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: notes}}
EOF

step "A multihost claim and a DaemonSet whose pods write into it on every node"
show kc -n "$NS" apply -f - <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared}
spec:
  storageClassName: hostpath-shared   # mode multihost: the same directory on every node
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: everywhere}
spec:
  selector: {matchLabels: {app: everywhere}}
  template:
    metadata: {labels: {app: everywhere}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: writer
        image: hostpath.dev/testtools:dev
        imagePullPolicy: IfNotPresent
        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
        command: [/bin/sh, -c, 'echo "pod $HOSTNAME on $NODE wrote this at $(date -u +%FT%TZ)" >> /shared/$NODE.txt && exec sleep 1000000']
        volumeMounts: [{name: shared, mountPath: /shared}]
      volumes:
      - {name: shared, persistentVolumeClaim: {claimName: shared}}
EOF

step "Wait until the claims are Bound and the pods run"
bound() { [ "$(kc -n "$NS" get pvc "$1" -o jsonpath='{.status.phase}')" = Bound ]; }
ds_ready() {
  local want ready
  want=$(kc -n "$NS" get daemonset everywhere -o jsonpath='{.status.desiredNumberScheduled}')
  ready=$(kc -n "$NS" get daemonset everywhere -o jsonpath='{.status.numberReady}')
  [ -n "$want" ] && [ "$want" -gt 0 ] && [ "$want" = "$ready" ]
}
await "claim notes to be Bound" bound notes
await "pod writer to run" kc -n "$NS" wait --for=condition=Ready pod/writer --timeout=1s
await "claim shared to be Bound" bound shared
await "DaemonSet everywhere to run on every node" ds_ready

step "What Kubernetes shows, and what is on each node's disk"
show kc -n "$NS" get pvc,pods -o wide
echo
show kc get pv,hostdefinitions -o wide
# on_disk PATH NODE: where the node's PATH is on this machine (NODE_BINDS).
on_disk() {
  local b
  for b in "${NODE_BINDS[@]}"; do
    case $1 in "${b%%:*}"/*) echo "$NODES_DIR/$2/${b#*:}/${1#"${b%%:*}"/}"; return 0 ;; esac
  done
  return 1
}
pv=$(kc -n "$NS" get pvc notes -o jsonpath='{.spec.volumeName}')
path=$(kc get pv "$pv" -o jsonpath='{.spec.hostPath.path}')
node=$(kc get pv "$pv" -o jsonpath='{.metadata.annotations.hostpath\.dev/node}')
echo
echo "Claim notes is $path on $node only; on this machine that is $(on_disk "$path" "$node"):"
show cat "$(on_disk "$path" "$node")/hello.txt"
pv=$(kc -n "$NS" get pvc shared -o jsonpath='{.spec.volumeName}')
path=$(kc get pv "$pv" -o jsonpath='{.spec.hostPath.path}')
echo
echo "Claim shared is $path on every node, each node's own directory:"
for node in $(kc get nodes -l '!hostpath.dev/fake-node' -o jsonpath='{.items[*].metadata.name}'); do
  show ls -l "$(on_disk "$path" "$node")"
  cat "$(on_disk "$path" "$node")"/*.txt
done

step "One authenticated call to a manager (GET /v1/pools/default/volumes)"
node=$(kc get pv "$(kc -n "$NS" get pvc notes -o jsonpath='{.spec.volumeName}')" -o jsonpath='{.metadata.annotations.hostpath\.dev/node}')
echo "The manager of $node, which holds both claims' directories:"
ip=$(kc -n "$SYS" get pods -l app.kubernetes.io/name=hostpath-manager \
  --field-selector "spec.nodeName=$node" -o jsonpath='{.items[0].status.podIP}')
ca=$CLUSTER_DIR/demo-manager-ca.crt
kc -n "$SYS" get configmap hostpath-manager-ca -o jsonpath='{.data.ca\.crt}' > "$ca"
token=$(kc -n "$SYS" create token hostpath-orphans --audience hostpath.dev/manager --duration 10m)   # read only (hostpath-manager-reader)
printf '$ TOKEN=$(kubectl -n %s create token hostpath-orphans --audience hostpath.dev/manager)\n' "$SYS"
printf '$ curl --cacert %s --resolve %s.manager.hostpath.dev:8443:%s \\\n    -H "Authorization: Bearer $TOKEN" https://%s.manager.hostpath.dev:8443/v1/pools/default/volumes\n' \
  "${ca#"$REPO_ROOT"/}" "$node" "$ip" "$node"
curl -sS --fail-with-body --cacert "$ca" --resolve "$node.manager.hostpath.dev:8443:$ip" \
  -H "Authorization: Bearer $token" "https://$node.manager.hostpath.dev:8443/v1/pools/default/volumes"
echo

printf '\nDone in %ss. The cluster stays up:\n' "$(since "$T0")"
echo "  export KUBECONFIG=$CLUSTER_KUBECONFIG PATH=$K8S_BIN:\$PATH"
echo "  kubectl -n $NS get pvc,pods   # the demo's claims and pods"
echo "  kubectl delete namespace $NS  # remove the demo (its directories go with the claims)"
echo "  make cluster-down                     # stop the cluster and remove all its state"
