#!/usr/bin/env bash
# node-remove.sh NAME|N: remove real node hostpath-node-N (or NAME) from the
# running local cluster, the undo of node-add.sh. Stops its kubelet,
# containers, containerd shims and containerd by PID (stop_nodes in
# cluster-lib.sh, as cluster-down.sh does for every node), which ends the
# node's mount namespace and so its mounts; deletes its Node object, its Lease
# and the pods bound to it; removes its address on the API bridge, its pod
# bridge, its cgroups, any mount below its folder, its kubelet certificate,
# its record in .cluster/run/nodes and .cluster/nodes/<node>/. Its logs stay
# in .cluster/logs/ until cluster-down.sh.
#
# Node 1 runs kube-proxy for the whole cluster and is never removed. A node
# of which nothing exists is "removed" at once (exit 0). Exits 1 if anything
# of the node is still there at the end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

T0=$(now)
usage="usage: node-remove.sh NAME|N (e.g. ${NODE_PREFIX}3 or 3)"
[ $# -eq 1 ] || die "$usage"
case $1 in
"$NODE_PREFIX"*) N=${1#"$NODE_PREFIX"} ;;
*) N=$1 ;;
esac
[[ $N =~ ^[1-9][0-9]*$ ]] || die "$usage; got '$1'"
NAME=$(node_name "$N")
ND=$(node_dir "$N")
IP=$(node_ip "$N")
BRIDGE=$(node_bridge "$N")
[ "$N" != 1 ] || die "$NAME runs kube-proxy for the whole cluster: it cannot be removed (make cluster-down stops everything)"
require_root
refuse_foreign_cluster
cluster_running || die "no local cluster is running (make cluster-down removes what is left of one)"

has_address() { ip -o addr show to "$IP/32" dev "$API_BRIDGE" 2>/dev/null | grep -q .; }
has_bridge() { ip link show "$BRIDGE" > /dev/null 2>&1; }
has_cgroups() { compgen -G "/sys/fs/cgroup/*/$NAME" > /dev/null; }
has_node() { kc get node "$NAME" > /dev/null 2>&1; }
host_mounts() { awk '{print $2}' /proc/mounts | grep -F "$ND/" || true; }
recorded() { [[ " $(tr -s ' \n' ' ' < "$RUN_DIR/nodes" 2>/dev/null) " == *" $N "* ]]; }

exec 8>> "$RUN_DIR/nodes.lock"
flock 8
if ! recorded && [ ! -e "$ND" ] && [ ! -e "$RUN_DIR/mntns-$N" ] && ! pid_alive "kubelet-$N" &&
  ! pid_alive "containerd-$N" && ! has_address && ! has_bridge && ! has_cgroups && ! has_node; then
  log "$NAME does not exist: nothing to remove"
  exit 0
fi
log "Removing $NAME"

# Processes, by PID; once the last one is gone, the node's mount namespace
# and with it every mount of the node is gone too.
stop_nodes "$N"
no_pids() { [ -z "$(node_pids "$N")$(node_cgroup_pids "$N")" ]; }
wait_until 10 "the processes of $NAME to exit" no_pids || true
left_pids=$({ node_pids "$N"; node_cgroup_pids "$N"; } | sort -nu | tr '\n' ' ')
phase_stop=$(since "$T0")

# API objects: the Node (the kubelet is gone, it does not come back), its
# Lease, and its pods (no kubelet is left to confirm their deletion; the
# DaemonSet controller creates none for a node that does not exist).
kc delete node "$NAME" --ignore-not-found >&2
kc -n kube-node-lease delete lease "$NAME" --ignore-not-found >&2
kc delete pods --all-namespaces --field-selector "spec.nodeName=$NAME" \
  --grace-period=0 --force >&2

# Host state.
host_mounts | sort -r | while read -r m; do umount -l "$m"; done
if has_address; then ip addr del "$IP/32" dev "$API_BRIDGE"; fi
if has_bridge; then ip link del "$BRIDGE"; fi
remove_cgroups /sys/fs/cgroup/*/"$NAME"
[ -n "$left_pids" ] || rm -rf --one-file-system "$ND"
rm -f "$RUN_DIR/mntns-$N" "$RUN_DIR/kubelet-$N.pid" "$RUN_DIR/containerd-$N.pid" \
  "$PKI_DIR/kubelet-$NAME.crt" "$PKI_DIR/kubelet-$NAME.key" "$PKI_DIR/kubelet-$NAME.kubeconfig"
nodes_record del "$N"

left=()
[ -z "$left_pids" ] || left+=("processes $left_pids")
[ -z "$(host_mounts)" ] || left+=("mounts $(host_mounts | tr '\n' ' ')")
! has_address || left+=("address $IP")
! has_bridge || left+=("bridge $BRIDGE")
! has_cgroups || left+=("cgroups $(compgen -G "/sys/fs/cgroup/*/$NAME" | tr '\n' ' ')")
[ ! -e "$ND" ] || left+=("folder $ND")
! has_node || left+=("Node object")
[ ${#left[@]} -eq 0 ] || die "$NAME: left behind: $(printf '%s; ' "${left[@]}")"
log "[$(since "$T0")s] Removed $NAME (processes stopped after ${phase_stop}s); nothing of it is left"
