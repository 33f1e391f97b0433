#!/usr/bin/env bash
# node-reboot.sh N: "reboot" real node hostpath-node-N of the running local
# cluster: stop its kubelet, containers, shims and containerd by PID
# (stop_nodes in cluster-lib.sh, as a power-off would: no graceful pod
# shutdown), which ends its mount namespace, then start it again in a new
# one (node-start.sh) with a new boot ID, keeping its address, machine ID,
# folders and Node object: what survives a real reboot. Returns once the node
# is registered and Ready again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

T0=$(now)
N=${1:?usage: node-reboot.sh N}
[[ $N =~ ^[1-9][0-9]*$ ]] || die "usage: node-reboot.sh N; got '$N'"
NAME=$(node_name "$N")
require_root
refuse_foreign_cluster
cluster_running || die "no local cluster is running"
pid_alive "kubelet-$N" || die "$NAME is not running"
old_boot=$(cat "$(node_dir "$N")/boot_id" 2>/dev/null || echo unknown)

stop_nodes "$N"
no_pids() { [ -z "$(node_pids "$N")$(node_cgroup_pids "$N")" ]; }
wait_until 30 "the processes of $NAME to exit" no_pids || die "processes of $NAME still run"
rm -f "$RUN_DIR/mntns-$N"
log "$NAME is down after $(since "$T0")s"

unshare --mount --propagation private -- "$REPO_ROOT/scripts/node-start.sh" "$N"
ready() { [ "$(kc get node "$NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_until 120 "$NAME to be Ready" ready || die "$NAME did not become Ready"
log "$NAME rebooted in $(since "$T0")s: boot ID $old_boot -> $(cat "$(node_dir "$N")/boot_id")"
