#!/usr/bin/env bash
# node-add.sh [N]: add real node hostpath-node-N to the running local cluster,
# started exactly as cluster-up.sh starts its nodes (start_node in
# cluster-lib.sh): its kubelet certificate, its address 198.18.0.(10+N) on the
# API bridge, its folders under .cluster/nodes/<node>/ with a fresh
# machine-id, its cgroups, then containerd (with every image images.sh cached
# in .cache/images/ imported) and kubelet in a private mount namespace
# (node-start.sh). N defaults to one more than the highest existing node.
#
# Waits until the Node is Ready and prints its name as the last line on
# stdout; the log goes to stderr. The node is recorded in .cluster/run/nodes:
# cluster-down.sh stops it with the others, node-remove.sh removes it alone.
# If node N already runs and is Ready, prints its name and exits 0; if
# remains of an earlier node N are there, says so and exits 1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

READY_TIMEOUT=${READY_TIMEOUT:-120s}
T0=$(now)
[ $# -le 1 ] || die "usage: node-add.sh [N]"
N=${1:-}
[ -z "$N" ] || [[ $N =~ ^[1-9][0-9]*$ ]] || die "usage: node-add.sh [N]: N is a node number, got '$N'"
require_root
refuse_foreign_cluster
cluster_running || die "no local cluster is running (start it with make cluster-up)"
[ -f "$IMAGES_DIR/pause.tar" ] || die "no pause image in $IMAGES_DIR (run scripts/images.sh)"

# node_ready NAME: the Node's Ready condition is True.
node_ready() {
  [ "$(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# remains N: what of node N exists on this machine or in the API, one a line.
remains() {
  local n=$1 name
  name=$(node_name "$n")
  [[ " $(tr -s ' \n' ' ' < "$RUN_DIR/nodes" 2>/dev/null) " == *" $n "* ]] && echo "record(run/nodes)"
  [ -e "$(node_dir "$n")" ] && echo "folder($(node_dir "$n"))"
  pid_alive "kubelet-$n" && echo kubelet
  pid_alive "containerd-$n" && echo containerd
  [ -n "$(node_pids "$n")" ] && echo processes
  ip -o addr show to "$(node_ip "$n")/32" 2>/dev/null | grep -q . && echo "address($(node_ip "$n"))"
  ip link show "$(node_bridge "$n")" > /dev/null 2>&1 && echo "bridge($(node_bridge "$n"))"
  compgen -G "/sys/fs/cgroup/*/$name" > /dev/null && echo cgroups
  kc get node "$name" > /dev/null 2>&1 && echo "Node object"
  return 0
}

# Pick the number and record the node under the lock (node-add.sh and
# node-remove.sh may run at the same time). The lock's file descriptor is
# closed before the node starts: its daemons must not inherit it.
exec 8>> "$RUN_DIR/nodes.lock"
flock 8
if [ -z "$N" ]; then
  N=0
  for n in $(node_numbers) $(kc get nodes -o name | sed -n "s|^node/$NODE_PREFIX\([0-9][0-9]*\)$|\1|p"); do
    [ "$n" -gt "$N" ] && N=$n
  done
  N=$((N + 1))
fi
[ "$N" -le "$NODES_MAX" ] || die "node numbers go up to $NODES_MAX, got $N"
NAME=$(node_name "$N")
found=$(remains "$N" | paste -sd, | sed 's/,/, /g')
if [ -n "$found" ]; then
  if pid_alive "kubelet-$N" && pid_alive "containerd-$N" && node_ready "$NAME"; then
    log "$NAME already runs and is Ready: nothing to do"
    echo "$NAME"
    exit 0
  fi
  die "$NAME is not running but remains of it exist: $found. Remove them first with: scripts/node-remove.sh $N"
fi
log "Adding $NAME (kubelet on $(node_ip "$N"), pods in 198.18.$N.0/24)"
nodes_record add "$N"
failed_hint() {
  [ $? -eq 0 ] || log "$NAME did not come up (logs: $LOG_DIR/*-$NAME.log); remove what was started with: scripts/node-remove.sh $N"
}
trap failed_hint EXIT
"$(dirname "$0")/cluster-pki.sh" --nodes "$NAME"
exec 8>&-

# stdout carries only the node's name (the daemons write to .cluster/logs/).
start_node "$N" >&2
t=$(now)
kc wait --for=condition=Ready node "$NAME" --timeout="$READY_TIMEOUT" >&2 ||
  die "$NAME did not become Ready within $READY_TIMEOUT"
log "[$(since "$T0")s] $NAME Ready ($(since "$t")s after registering)"
echo "$NAME"
