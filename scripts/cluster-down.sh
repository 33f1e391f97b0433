#!/usr/bin/env bash
# cluster-down.sh: stop the local cluster and remove everything cluster-up.sh
# made: the processes it recorded (by PID, each checked against the program
# it started), the containers and containerd shims of every node (by the PID
# files runc and containerd keep), iptables chains, bridges, the blackhole
# route, cgroups, mount points, sysctl changes, and .cluster/ itself.
# It also cleans up after a cluster that crashed or was never torn down.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

T0=$(now)
phase() { log "[$(since "$T0")s] $*"; }
require_root
refuse_foreign_cluster

# Every real node: those recorded in run/nodes (cluster-up.sh, node-add.sh)
# and any other with a folder under nodes/.
nodes=$(node_numbers)

[ -d "$RUN_DIR" ] && stop_recorded fake-nodes kube-proxy
# The nodes (stop_nodes in cluster-lib.sh, which node-remove.sh uses too):
# kubelets, containers, shims, containerd.
# shellcheck disable=SC2086 # one word per node
stop_nodes $nodes
phase "Stopped kube-proxy and the nodes (kubelets, containers, shims, containerd)"

stop_recorded kube-scheduler kube-controller-manager
STOP_TIMEOUT=5 stop_recorded kube-apiserver
stop_recorded etcd
phase "Stopped the control plane"

# Anything still running from the cluster's folders (a crash that lost the
# PID files): listed and stopped by PID.
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = $$ ] && continue
  exe=$(readlink "$p/exe" 2>/dev/null) || continue
  case $exe in "$K8S_BIN"/* | /usr/bin/containerd*) ;; *) continue ;; esac
  if [[ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" == *"$CLUSTER_DIR/"* ]]; then
    log "Leftover process $pid: $(tr '\0' ' ' < "$p/cmdline" | cut -c1-120): SIGKILL"
    kill -KILL "$pid" 2>/dev/null
  fi
done

# iptables: kube-proxy's chains, then KUBE-FIREWALL if it was not there before.
# (grep reads all input: with `grep -q`, pipefail would see iptables-save's SIGPIPE.)
if [ "$(iptables-save 2>/dev/null | grep -c 'KUBE-')" -gt 0 ]; then
  mkdir -p "$LOG_DIR"
  "$K8S_BIN/kube-proxy" --cleanup > "$LOG_DIR/kube-proxy-cleanup.log" 2>&1 ||
    log "kube-proxy --cleanup failed (see $LOG_DIR/kube-proxy-cleanup.log)"
fi
if [ -f "$RUN_DIR/no-kube-firewall" ] || [ ! -d "$RUN_DIR" ]; then
  for c in INPUT OUTPUT; do
    while iptables -w -t filter -D "$c" -j KUBE-FIREWALL 2>/dev/null; do :; done
  done
  iptables -w -t filter -F KUBE-FIREWALL 2>/dev/null && iptables -w -t filter -X KUBE-FIREWALL 2>/dev/null
fi
phase "Removed iptables chains"

# Bridges (the node bridges go with their last veth only if empty: delete).
for b in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
  case $b in "$API_BRIDGE" | hpbr[0-9]*) ip link del "$b" && log "Deleted bridge $b" ;; esac
done
while ip route del blackhole "$NET_RANGE" 2>/dev/null; do log "Deleted blackhole route $NET_RANGE"; done

# Sysctls kubelet, kube-proxy or the bridge plugin changed.
if [ -f "$RUN_DIR/sysctl-orig.txt" ]; then
  while IFS= read -r kv; do
    [ -n "$kv" ] && sysctl -q -w "$kv" > /dev/null 2>&1
  done < "$RUN_DIR/sysctl-orig.txt"
  log "Restored sysctls: $(tr '\n' ' ' < "$RUN_DIR/sysctl-orig.txt")"
fi

# cgroups of the nodes (they empty out once the processes are gone).
remove_cgroups /sys/fs/cgroup/*/"$NODE_PREFIX"*

# Mount points cluster-up.sh created on this machine (empty on the host: the
# bind mounts only ever existed in the nodes' namespaces).
if [ -f "$RUN_DIR/created-paths" ]; then
  tac "$RUN_DIR/created-paths" | while read -r p; do rmdir "$p" 2>/dev/null || log "Kept $p (not empty)"; done
fi
# Nothing of the cluster may stay mounted on the host.
awk '{print $2}' /proc/mounts | grep -F "$CLUSTER_DIR/" | sort -r | while read -r m; do umount -l "$m"; done

# What is left of the cluster on this machine (nothing, normally).
node_ns=$(cat "$RUN_DIR"/mntns-* 2>/dev/null | tr '\n' ' ')
rm -rf --one-file-system "${CLUSTER_DIR:?}"
left_procs=()
for p in /proc/[0-9]*; do
  exe=$(readlink "$p/exe" 2>/dev/null) || continue
  ns=$(readlink "$p/ns/mnt" 2>/dev/null) || continue
  case $exe in
  "$K8S_BIN"/* | /usr/bin/containerd*)
    if [[ " $node_ns " == *" $ns "* ]] || [[ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" == *"$CLUSTER_DIR/"* ]]; then
      left_procs+=("${p#/proc/}")
    fi
    ;;
  esac
done
left_links=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | grep -cE "^($API_BRIDGE|hpbr[0-9]+)(@|$)")
left_routes=$(ip route show 2>/dev/null | grep -c '^198\.1[89]\.')
left_mounts=$(grep -cF "$CLUSTER_DIR" /proc/mounts)
left_cgroups=$(compgen -G "/sys/fs/cgroup/*/$NODE_PREFIX*" | wc -l)
left_chains=$(iptables-save 2>/dev/null | grep -c '^:KUBE-')
log "Left behind: processes=${#left_procs[@]} bridges=$left_links routes=$left_routes mounts=$left_mounts cgroups=$left_cgroups kube-chains=$left_chains"
phase "Cluster down: processes stopped, host state restored, $CLUSTER_DIR removed"
if [ ${#left_procs[@]} -gt 0 ] || [ $((left_links + left_routes + left_mounts + left_cgroups)) -gt 0 ]; then
  log "WARNING: cluster leftovers remain (processes: ${left_procs[*]:-none})"
  exit 1
fi
