#!/usr/bin/env bash
# bench-fleet.sh: hostpath over many nodes on the running local cluster: a
# fleet of fake nodes, each with its own manager and provisioner process
# (the product's binaries, built here) and their pod objects, made Ready
# through the API with pod-bound service account tokens (tools/internal/fleet
# says how), then tools/cmd/benchfleet run:
#   - N node-mode claims over K provisioner instances (BENCH_INSTANCES,
#     K:N pairs, default "10:1000,100:200"), with API writes per volume;
#   - multihost create->Bound latency over E managers, the real nodes'
#     included (BENCH_ENDPOINTS, default "10,50,100"), 10 claims each;
#   - the backfill of BENCH_BACKFILL (default 1000) multihost volumes onto
#     a node that joins;
#   - first, with BENCH_FOREIGN=N (default 0: off), with a fleet of its own
#     of BENCH_FOREIGN_INSTANCES (default 100) members (benchfleet foreign,
#     tools/internal/fleet/foreign): every provisioner's RSS and CPU time idle,
#     with N claims of another provisioner (annotated by
#     kube-controller-manager) and after their deletion, each memory reading
#     BENCH_FOREIGN_SETTLE seconds (default 30) after its step, and the real
#     nodes' provisioners' RSS before and with the fleet: the per-node and
#     the per-foreign-claim costs of each instance; the API server's
#     Node watch events per Node status update (each fleet Node's once);
#     and, before the fleet starts and again with it up, the API server's
#     claim and PV watch events per hostpath volume: BENCH_FLEET_VOLUMES
#     (default 1000) node-mode volumes pinned to the real nodes and
#     BENCH_FLEET_MULTIHOST (default 20) multihost ones, each made, Bound
#     and deleted (0 and 0: left out). These two count only in the
#     foreign phase, that is with BENCH_FOREIGN above 0. The foreign
#     phase restarts the real nodes' provisioners first and reads them
#     BENCH_FOREIGN_SETTLE seconds later (BENCH_FLEET_RESTART=0: not), so
#     that their growth is a fresh instance's; with BENCH_FLEET_VOLUMES=0
#     and BENCH_FLEET_MULTIHOST=0 nothing comes between that reading and
#     the fleet, which gives the cleanest per-node figure.
#   - before anything else, with BENCH_NODE_COST=STEPS (numbers of fake
#     nodes, comma-separated, increasing, e.g. 1000,5000; default empty:
#     off), what thousands of nodes cost each instance, without processes
#     (benchfleet node-cost, tools/internal/fleet/nodecost): after
#     each step the objects an instance caches of a node (its two pods, a
#     copy of a real node's HostDefinition) exist for that many fake
#     nodes, and the real nodes' provisioners (restarted first, as for the
#     foreign phase) are read BENCH_NODE_COST_READINGS times (default 3),
#     every BENCH_NODE_COST_SETTLE seconds (default 180). The host definer
#     is scaled to zero meanwhile (it would undefine the copies, whose
#     managers do not answer) and scaled back after.
# An empty BENCH_INSTANCES or BENCH_ENDPOINTS, or BENCH_BACKFILL=0, leaves
# that step out; with all three, only the foreign or node-cost phase runs:
#
#   BENCH_FOREIGN=50000 BENCH_INSTANCES= BENCH_ENDPOINTS= BENCH_BACKFILL=0 scripts/bench-fleet.sh
#   BENCH_NODE_COST=1000,5000 BENCH_INSTANCES= BENCH_ENDPOINTS= BENCH_BACKFILL=0 scripts/bench-fleet.sh
#
# kube-controller-manager runs with the client limits BENCH_KCM (QPS/BURST
# or default; default 1000/2000, scripts/kcm.sh) during the run, so that its
# binder (about 4 claims/s at its default limits) does not hide the rest.
# The fleet is stopped and its objects, addresses and folders removed, and
# kube-controller-manager's limits restored, at the end, also on failure or
# Ctrl-C (processes by PID).
#
#   scripts/bench-fleet.sh
#
# Environment: BENCH_KCM, BENCH_INSTANCES, BENCH_ENDPOINTS, BENCH_BACKFILL,
# BENCH_FOREIGN, BENCH_FOREIGN_INSTANCES, BENCH_FOREIGN_SETTLE,
# BENCH_FLEET_VOLUMES, BENCH_FLEET_MULTIHOST, BENCH_FLEET_RESTART (only with
# BENCH_FOREIGN or BENCH_NODE_COST), BENCH_NODE_COST, BENCH_NODE_COST_SETTLE,
# BENCH_NODE_COST_READINGS, BENCH_TIMEOUT (each wait, default 15m),
# BENCH_PLOTS (folder that gets fleet.json and, with BENCH_FOREIGN,
# fleet-foreign.json, with BENCH_NODE_COST, fleet-node-cost.json; default
# none).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

NS=hostpath-system
PROV_DS=hostpath-provisioner
HOSTDEFINER=hostpath-hostdefiner
CONTAINER=provisioner
FLEET_DIR=$CLUSTER_DIR/fleet
# The foreign phase's fleet, apart: its members are not those of the run's.
FOREIGN_DIR=$FLEET_DIR/foreign
# Its StorageClass (tools/internal/fleet/foreign.ClassName); its namespace
# and class are labelled hostpath.dev/bench-fleet=true.
FOREIGN_CLASS=hostpath-bench-fleet-foreign
# The classes of its hostpath volumes step (foreign.VolumesClass and
# foreign.MultihostClass), labelled the same, as are their namespaces.
VOLUMES_CLASSES=(hostpath-bench-fleet-volumes hostpath-bench-fleet-multihost)
ADDRESS_PREFIX=198.18.250.
BIN=$CACHE_DIR/bin
FLEET_BIN=$CACHE_DIR/bin/fleet
KCM=$REPO_ROOT/scripts/kcm.sh
LIMITS=${BENCH_KCM:-1000/2000}
[[ $LIMITS =~ ^([1-9][0-9]*/[1-9][0-9]*|default)$ ]] || die "BENCH_KCM: '$LIMITS' is neither QPS/BURST nor default"
INSTANCES=${BENCH_INSTANCES-10:1000,100:200}
ENDPOINTS=${BENCH_ENDPOINTS-10,50,100}
BACKFILL=${BENCH_BACKFILL:-1000}
FOREIGN=${BENCH_FOREIGN:-0}
FOREIGN_INSTANCES=${BENCH_FOREIGN_INSTANCES:-100}
FOREIGN_SETTLE=${BENCH_FOREIGN_SETTLE:-30}
FLEET_VOLUMES=${BENCH_FLEET_VOLUMES:-1000}
FLEET_MULTIHOST=${BENCH_FLEET_MULTIHOST:-20}
FLEET_RESTART=${BENCH_FLEET_RESTART:-1}
NODE_COST=${BENCH_NODE_COST:-}
NODE_COST_SETTLE=${BENCH_NODE_COST_SETTLE:-180}
NODE_COST_READINGS=${BENCH_NODE_COST_READINGS:-3}
[[ $BACKFILL =~ ^[0-9]+$ ]] || die "BENCH_BACKFILL must be a number of volumes, got '$BACKFILL'"
[[ $FOREIGN =~ ^[0-9]+$ ]] || die "BENCH_FOREIGN must be a number of claims, got '$FOREIGN'"
[[ $FOREIGN_INSTANCES =~ ^[1-9][0-9]*$ ]] || die "BENCH_FOREIGN_INSTANCES must be a positive number, got '$FOREIGN_INSTANCES'"
[[ $FOREIGN_SETTLE =~ ^[0-9]+$ ]] || die "BENCH_FOREIGN_SETTLE must be a number of seconds, got '$FOREIGN_SETTLE'"
[[ $FLEET_VOLUMES =~ ^[0-9]+$ ]] || die "BENCH_FLEET_VOLUMES must be a number of volumes, got '$FLEET_VOLUMES'"
[[ $FLEET_MULTIHOST =~ ^[0-9]+$ ]] || die "BENCH_FLEET_MULTIHOST must be a number of volumes, got '$FLEET_MULTIHOST'"
[[ $FLEET_RESTART =~ ^[01]$ ]] || die "BENCH_FLEET_RESTART must be 0 or 1, got '$FLEET_RESTART'"
[[ $NODE_COST =~ ^([1-9][0-9]*(,[1-9][0-9]*)*)?$ ]] || die "BENCH_NODE_COST must be numbers of nodes separated by commas, got '$NODE_COST'"
[[ $NODE_COST_SETTLE =~ ^[0-9]+$ ]] || die "BENCH_NODE_COST_SETTLE must be a number of seconds, got '$NODE_COST_SETTLE'"
[[ $NODE_COST_READINGS =~ ^[1-9][0-9]*$ ]] || die "BENCH_NODE_COST_READINGS must be a positive number, got '$NODE_COST_READINGS'"
RUN_STEPS=1
[ -n "$INSTANCES" ] || [ -n "$ENDPOINTS" ] || [ "$BACKFILL" != 0 ] || RUN_STEPS=0
[ "$RUN_STEPS" = 1 ] || [ "$FOREIGN" != 0 ] || [ -n "$NODE_COST" ] ||
  die "nothing to measure: BENCH_INSTANCES and BENCH_ENDPOINTS empty, BENCH_BACKFILL and BENCH_FOREIGN 0, BENCH_NODE_COST empty"

require_root
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"
kc get --raw /readyz > /dev/null 2>&1 || die "the local cluster does not answer (run make cluster-up)"
kc -n "$NS" get ds "$PROV_DS" > /dev/null || die "hostpath is not deployed (make deploy)"
ORIG_KCM=$("$KCM" get)
ORIG_HOSTDEFINERS=$(kc -n "$NS" get deploy "$HOSTDEFINER" -o jsonpath='{.spec.replicas}')
[ ! -e "$FLEET_DIR" ] || die "$FLEET_DIR exists: another fleet runs, or remove what a killed one left ($0 cleans up after itself)"

mkdir -p "$BIN" "$FLEET_BIN"
log "Building benchfleet, and the manager and the provisioner as their images have them"
(cd "$REPO_ROOT/tools" && CGO_ENABLED=0 go build -o "$BIN/benchfleet" ./cmd/benchfleet)
(cd "$REPO_ROOT/manager" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$FLEET_BIN/manager" ./cmd/manager)
(cd "$REPO_ROOT/provisioner" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$FLEET_BIN/provisioner" ./cmd/provisioner)

# cleanup: what a killed benchfleet left (it undoes its own fleet when it
# can): processes by their PID files, the fleet's objects, fake nodes and
# addresses, the foreign phase's namespaces and classes, the folder.
cleanup() {
  local rc=$? f a
  trap - EXIT INT TERM
  if [ -n "${FLEET_PID:-}" ] && kill -0 "$FLEET_PID" 2> /dev/null; then
    kill -TERM "$FLEET_PID" 2> /dev/null || true
    wait "$FLEET_PID" 2> /dev/null || true
  fi
  for f in "$FLEET_DIR"/*/*/pid "$FOREIGN_DIR"/*/*/pid; do
    [ -f "$f" ] || continue
    kill -KILL "$(cat "$f")" 2> /dev/null || true
  done
  kc delete hostdefinitions -l hostpath.dev/bench-fleet=true --wait=false --ignore-not-found > /dev/null 2>&1 || true
  kc -n "$NS" delete configmap hostpath-bench-fleet --ignore-not-found > /dev/null 2>&1 || true
  kc -n "$NS" delete pods -l hostpath.dev/bench-fleet=true --grace-period=0 --wait=false --ignore-not-found > /dev/null 2>&1 || true
  kc delete nodes -l hostpath.dev/fake-node=true --ignore-not-found > /dev/null 2>&1 || true
  kc delete ns -l hostpath.dev/bench-fleet=true --wait=false --ignore-not-found > /dev/null 2>&1 || true
  kc delete storageclass "$FOREIGN_CLASS" "${VOLUMES_CLASSES[@]}" --ignore-not-found > /dev/null 2>&1 || true
  for a in $(ip -4 -o addr show dev "$API_BRIDGE" | awk '{print $4}' | grep "^${ADDRESS_PREFIX//./\\.}" || true); do
    ip addr del "$a" dev "$API_BRIDGE" || rc=1
  done
  rm -rf "$FLEET_DIR"
  if [ "$(kc -n "$NS" get deploy "$HOSTDEFINER" -o jsonpath='{.spec.replicas}' 2> /dev/null)" != "$ORIG_HOSTDEFINERS" ]; then
    log "Scaling the host definer back to $ORIG_HOSTDEFINERS"
    kc -n "$NS" scale deploy "$HOSTDEFINER" --replicas="$ORIG_HOSTDEFINERS" > /dev/null || rc=1
    kc -n "$NS" rollout status deploy "$HOSTDEFINER" --timeout=300s > /dev/null || rc=1
  fi
  if [ "$("$KCM" get 2> /dev/null)" != "$ORIG_KCM" ]; then
    log "Restoring kube-controller-manager's client limits $ORIG_KCM"
    "$KCM" set "$ORIG_KCM" || rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The pool paths the fleet's managers bind their folders on, in their own
# mount namespaces, as the real nodes do.
mkdir -p "$FLEET_DIR" /var/hpvolumes /var/hppools
ARGS=$(kc -n "$NS" get ds "$PROV_DS" -o jsonpath="{.spec.template.spec.containers[?(@.name==\"$CONTAINER\")].args}")
OUT=() FOREIGN_OUT=() NODE_COST_OUT=()
if [ -n "${BENCH_PLOTS:-}" ]; then
  mkdir -p "$BENCH_PLOTS"
  OUT=(--out "$BENCH_PLOTS/fleet.json")
  FOREIGN_OUT=(--out "$BENCH_PLOTS/fleet-foreign.json")
  NODE_COST_OUT=(--out "$BENCH_PLOTS/fleet-node-cost.json")
fi
if [ "$ORIG_KCM" != "$LIMITS" ]; then
  "$KCM" set "$LIMITS"
  # Its caches synced and its first resyncs done before the first claim.
  sleep "${BENCH_SETTLE:-10}"
fi
FLEET_ARGS=(--kubeconfig "$CLUSTER_KUBECONFIG" --manager-bin "$FLEET_BIN/manager"
  --provisioner-bin "$FLEET_BIN/provisioner" --provisioner-args "${ARGS:-[]}"
  --namespace "$NS" --address-prefix "$ADDRESS_PREFIX" --device "$API_BRIDGE" --timeout "${BENCH_TIMEOUT:-15m}")
log "Fleet benchmark: kube-controller-manager client limits $("$KCM" get), instances '$INSTANCES', multihost endpoints '$ENDPOINTS', backfill $BACKFILL, foreign claims $FOREIGN over $FOREIGN_INSTANCES instances (hostpath volumes $FLEET_VOLUMES node-mode, $FLEET_MULTIHOST multihost), node cost '${NODE_COST:-off}'"
echo "hostpath over a fleet of fake nodes, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kube-controller-manager client limits $("$KCM" get)"
# restart_provisioners SETTLE: fresh processes, so that the real nodes'
# growth with the fake nodes is a new instance's, not that of one that
# served earlier runs or tests; read SETTLE seconds later.
restart_provisioners() {
  [ "$FLEET_RESTART" = 1 ] || return 0
  restart_daemonsets "$NS" 300 "$PROV_DS"
  log "The real nodes' provisioners restarted; reading them ${1}s later"
  sleep "$1"
}
# The node-cost phase, then the foreign phase first: the real nodes'
# provisioners have not yet held the other steps' fleet and claims when
# they are read before.
if [ -n "$NODE_COST" ]; then
  log "Scaling the host definer to zero for the node-cost phase"
  kc -n "$NS" scale deploy "$HOSTDEFINER" --replicas=0 > /dev/null
  kc -n "$NS" wait --for=delete pod -l "app.kubernetes.io/name=$HOSTDEFINER" --timeout=300s > /dev/null
  restart_provisioners "$NODE_COST_SETTLE"
  "$BIN/benchfleet" node-cost --kubeconfig "$CLUSTER_KUBECONFIG" --namespace "$NS" --nodes "$NODE_COST" \
    --settle "${NODE_COST_SETTLE}s" --readings "$NODE_COST_READINGS" "${NODE_COST_OUT[@]}" &
  FLEET_PID=$!
  wait "$FLEET_PID"
  log "Scaling the host definer back to $ORIG_HOSTDEFINERS"
  kc -n "$NS" scale deploy "$HOSTDEFINER" --replicas="$ORIG_HOSTDEFINERS" > /dev/null
  kc -n "$NS" rollout status deploy "$HOSTDEFINER" --timeout=300s > /dev/null
  echo
fi
if [ "$FOREIGN" != 0 ]; then
  restart_provisioners "$FOREIGN_SETTLE"
  "$BIN/benchfleet" foreign "${FLEET_ARGS[@]}" --dir "$FOREIGN_DIR" --foreign "$FOREIGN" \
    --foreign-instances "$FOREIGN_INSTANCES" --foreign-settle "${FOREIGN_SETTLE}s" \
    --volumes "$FLEET_VOLUMES" --multihost-volumes "$FLEET_MULTIHOST" "${FOREIGN_OUT[@]}" &
  FLEET_PID=$!
  wait "$FLEET_PID"
  # Its fleet is closed: no PID file of it may outlive it (PIDs are reused).
  rm -rf "$FOREIGN_DIR"
  echo
fi
if [ "$RUN_STEPS" = 1 ]; then
  "$BIN/benchfleet" run "${FLEET_ARGS[@]}" --dir "$FLEET_DIR" \
    --instances "$INSTANCES" --endpoints "$ENDPOINTS" --backfill "$BACKFILL" "${OUT[@]}" &
  FLEET_PID=$!
  wait "$FLEET_PID"
fi
