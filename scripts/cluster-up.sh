#!/usr/bin/env bash
# cluster-up.sh: start the local cluster. etcd, kube-apiserver (198.18.0.1:6443),
# kube-controller-manager, kube-scheduler and kube-proxy on this machine, plus
# NODES (default 2) real nodes hostpath-node-N, each a kubelet with its own
# containerd in a private mount namespace. State lives in .cluster/ (the admin
# kubeconfig is .cluster/kubeconfig); cluster-down.sh undoes all of it.
#
# On a healthy running cluster this does nothing and exits 0. Leftovers of a
# cluster that was not torn down (killed processes, a crashed session) are
# cleaned up first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
S=$(cd "$(dirname "$0")" && pwd)

T0=$(now)
phase() { log "[$(since "$T0")s] $*"; }
require_root
refuse_foreign_cluster
# KCM_API_QPS and KCM_API_BURST: kube-controller-manager's client limits
# (both or neither; unset: its defaults, 20/30). scripts/kcm.sh changes them
# on a running cluster.
if [ -n "${KCM_API_QPS:-}${KCM_API_BURST:-}" ]; then
  [ -n "${KCM_API_QPS:-}" ] && [ -n "${KCM_API_BURST:-}" ] || die "set both KCM_API_QPS and KCM_API_BURST, or neither"
  KCM_LIMITS=$KCM_API_QPS/$KCM_API_BURST
  [[ $KCM_LIMITS =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] || die "KCM_API_QPS and KCM_API_BURST must be positive integers, got $KCM_LIMITS"
else
  KCM_LIMITS=default
fi
log "kube-controller-manager client limits: $KCM_LIMITS$([ "$KCM_LIMITS" = default ] && echo ' (qps 20, burst 30)')"
[[ $NODES =~ ^[1-9][0-9]?$ ]] && [ "$NODES" -le "$NODES_MAX" ] || die "NODES must be 1..$NODES_MAX, got $NODES"

# cluster_healthy: every recorded process runs, the API server is ready and
# every real node is Ready.
cluster_healthy() {
  local f n ready name
  [ -f "$RUN_DIR/nodes" ] && [ -f "$CLUSTER_KUBECONFIG" ] || return 1
  for f in "$RUN_DIR"/*.pid; do
    name=$(basename "$f" .pid)
    [ "$name" = fake-nodes ] && continue
    pid_alive "$name" || { log "The cluster is not healthy: $name is not running"; return 1; }
  done
  kc get --raw /readyz > /dev/null 2>&1 || { log "The cluster is not healthy: the API server is not ready"; return 1; }
  for n in $(node_numbers); do
    ready=$(kc get node "$(node_name "$n")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || true
    [ "$ready" = True ] || { log "The cluster is not healthy: $(node_name "$n") is not Ready"; return 1; }
  done
}

# leftovers: anything an earlier cluster may have left on this machine.
leftovers() {
  [ -e "$CLUSTER_DIR" ] && return 0
  ip link show "$API_BRIDGE" > /dev/null 2>&1 && return 0
  [[ "$(ip route show type blackhole)" == *"blackhole $NET_RANGE"* ]] && return 0
  compgen -G "/sys/fs/cgroup/*/$NODE_PREFIX*" > /dev/null && return 0
  return 1
}

if [ -d "$RUN_DIR" ] && [ -x "$KUBECTL" ] && cluster_healthy; then
  running=$(kc get --raw /version 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
  [ "$running" = "$K8S_VERSION" ] || die "A local cluster of Kubernetes ${running:-(unknown)} is up; this run wants $K8S_VERSION: make cluster-down first"
  log "The local cluster is already up ($(node_numbers | wc -w) nodes Ready); nothing to do"
  log "kube-controller-manager runs with client limits $(cat "$RUN_DIR/kcm-limits" 2>/dev/null || echo default) (scripts/kcm.sh set changes them)"
  log "KUBECONFIG=$CLUSTER_KUBECONFIG; stop it with: make cluster-down"
  exit 0
fi
"$S/ensure-packages.sh"
phase "Packages present"
if leftovers; then
  log "Found state of an earlier cluster that is not running (crash or no teardown): cleaning it up first"
  "$S/cluster-down.sh"
  phase "Stale state cleaned"
fi
"$S/build-k8s.sh"
"$S/images.sh" --base
phase "Kubernetes binaries and base images ready"

mkdir -p "$RUN_DIR" "$LOG_DIR" "$NODES_DIR" "$CLUSTER_DIR/etcd"
seq "$NODES" | tr '\n' ' ' > "$RUN_DIR/nodes"
names=()
for n in $(node_numbers); do names+=("$(node_name "$n")"); done
"$S/cluster-pki.sh" "${names[@]}"
phase "Certificates and kubeconfigs written"

# Host state, saved before anything changes it.
for k in "${SAVED_SYSCTLS[@]}"; do
  v=$(sysctl -n "$k" 2>/dev/null) && echo "$k=$v"
done > "$RUN_DIR/sysctl-orig.txt"
iptables -w -t filter -S KUBE-FIREWALL > /dev/null 2>&1 || touch "$RUN_DIR/no-kube-firewall"
# Mount points for the per-node bind mounts: created if absent, removed again
# by cluster-down.sh.
: > "$RUN_DIR/created-paths"
for b in "${NODE_BINDS[@]}"; do
  p=${b%%:*}
  missing=()
  while [ ! -e "$p" ]; do missing=("$p" "${missing[@]}"); p=$(dirname "$p"); done
  for p in "${missing[@]}"; do mkdir "$p" && echo "$p" >> "$RUN_DIR/created-paths"; done
done

# Network: nothing in 198.18.0.0/15 leaves the machine.
ip route add blackhole "$NET_RANGE"
ip link add "$API_BRIDGE" type bridge
ip addr add "$API_IP/32" dev "$API_BRIDGE"
ip link set "$API_BRIDGE" up
sysctl -q -w net.ipv4.ip_forward=1
phase "Network ready: $API_BRIDGE $API_IP, blackhole $NET_RANGE"

# Control plane.
t=$(now)
start_bg etcd "$LOG_DIR/etcd.log" "$K8S_BIN/etcd" --name hostpath --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster hostpath=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
  --quota-backend-bytes 4294967296 --unsafe-no-fsync --log-level warn
wait_until 30 "etcd" curl -fsS http://127.0.0.1:2379/health
start_apiserver
wait_until 60 "kube-apiserver /readyz" kc get --raw /readyz || {
  tail -20 "$LOG_DIR/kube-apiserver.log" >&2
  die "kube-apiserver did not become ready"
}
phase "etcd and kube-apiserver ready ($(since "$t")s)"
start_kcm "$KCM_LIMITS"
start_bg kube-scheduler "$LOG_DIR/kube-scheduler.log" "$K8S_BIN/kube-scheduler" \
  --kubeconfig="$PKI_DIR/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig="$PKI_DIR/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig="$PKI_DIR/kube-scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false

# Real nodes, started in parallel, each in its own mount namespace
# (start_node in cluster-lib.sh; node-add.sh starts a node the same way).
t=$(now)
pids=()
for n in $(node_numbers); do
  start_node "$n" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "a node failed to start (logs: $LOG_DIR)"; done
phase "Nodes registered ($(since "$t")s)"

start_bg kube-proxy "$LOG_DIR/kube-proxy.log" "$K8S_BIN/kube-proxy" \
  --kubeconfig="$PKI_DIR/kube-proxy.kubeconfig" --proxy-mode=iptables \
  --cluster-cidr="$POD_CIDR" --hostname-override="$(node_name 1)" \
  --healthz-bind-address=127.0.0.1:10256 --metrics-bind-address=127.0.0.1:10249 \
  --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 \
  --conntrack-tcp-timeout-close-wait=0 --iptables-localhost-nodeports=false --v=2
wait_until 60 "kube-proxy healthz" curl -fsS http://127.0.0.1:10256/healthz

kc wait --for=condition=Ready node "${names[@]}" --timeout=120s > /dev/null ||
  die "nodes did not become Ready (logs: $LOG_DIR)"
wait_until 60 "ServiceAccount default/default" kc -n default get serviceaccount default
phase "Cluster up: ${names[*]} Ready"
kc get nodes -o wide
log "KUBECONFIG=$CLUSTER_KUBECONFIG  kubectl=$KUBECTL"
log "Stop it with: make cluster-down"
