#!/usr/bin/env bash
# bench-fleet.sh: hostpath over many nodes on the running local cluster: a
# fleet of fake nodes, each with its own manager and provisioner process
# (the product's binaries, built here) and their pod objects, made Ready
# through the API with pod-bound service account tokens (e2e/internal/fleet
# says how), then e2e/cmd/benchfleet run:
#   - N node-mode claims over K provisioner instances (BENCH_INSTANCES,
#     K:N pairs, default "10:1000,100:200"), with API writes per volume;
#   - multihost create->Bound latency over E managers, the real nodes'
#     included (BENCH_ENDPOINTS, default "10,50,100"), 10 claims each;
#   - the backfill of BENCH_BACKFILL (default 1000) multihost volumes onto
#     a node that joins.
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
# BENCH_TIMEOUT (each wait, default 15m), BENCH_PLOTS (folder that gets
# fleet.json; default none).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

NS=hostpath-system
PROV_DS=hostpath-provisioner
CONTAINER=provisioner
FLEET_DIR=$CLUSTER_DIR/fleet
ADDRESS_PREFIX=198.18.250.
BIN=$CACHE_DIR/bin
FLEET_BIN=$CACHE_DIR/bin/fleet
KCM=$REPO_ROOT/scripts/kcm.sh
LIMITS=${BENCH_KCM:-1000/2000}
[[ $LIMITS =~ ^([1-9][0-9]*/[1-9][0-9]*|default)$ ]] || die "BENCH_KCM: '$LIMITS' is neither QPS/BURST nor default"

require_root
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"
kc get --raw /readyz > /dev/null 2>&1 || die "the local cluster does not answer (run make cluster-up)"
kc -n "$NS" get ds "$PROV_DS" > /dev/null || die "hostpath is not deployed (make deploy)"
ORIG_KCM=$("$KCM" get)
[ ! -e "$FLEET_DIR" ] || die "$FLEET_DIR exists: another fleet runs, or remove what a killed one left ($0 cleans up after itself)"

mkdir -p "$BIN" "$FLEET_BIN"
log "Building benchfleet, and the manager and the provisioner as their images have them"
(cd "$REPO_ROOT/e2e" && CGO_ENABLED=0 go build -o "$BIN/benchfleet" ./cmd/benchfleet)
(cd "$REPO_ROOT/manager" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$FLEET_BIN/manager" ./cmd/manager)
(cd "$REPO_ROOT/provisioner" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$FLEET_BIN/provisioner" ./cmd/provisioner)

# cleanup: what a killed benchfleet left (it undoes its own fleet when it
# can): processes by their PID files, the fleet's objects, fake nodes and
# addresses, the folder.
cleanup() {
  local rc=$? f a
  trap - EXIT INT TERM
  if [ -n "${FLEET_PID:-}" ] && kill -0 "$FLEET_PID" 2> /dev/null; then
    kill -TERM "$FLEET_PID" 2> /dev/null || true
    wait "$FLEET_PID" 2> /dev/null || true
  fi
  for f in "$FLEET_DIR"/*/*/pid; do
    [ -f "$f" ] || continue
    kill -KILL "$(cat "$f")" 2> /dev/null || true
  done
  kc -n "$NS" delete configmap hostpath-bench-fleet --ignore-not-found > /dev/null 2>&1 || true
  kc -n "$NS" delete pods -l hostpath.dev/bench-fleet=true --grace-period=0 --ignore-not-found > /dev/null 2>&1 || true
  kc delete nodes -l hostpath.dev/fake-node=true --ignore-not-found > /dev/null 2>&1 || true
  for a in $(ip -4 -o addr show dev "$API_BRIDGE" | awk '{print $4}' | grep "^${ADDRESS_PREFIX//./\\.}" || true); do
    ip addr del "$a" dev "$API_BRIDGE" || rc=1
  done
  rm -rf "$FLEET_DIR"
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
OUT=()
if [ -n "${BENCH_PLOTS:-}" ]; then
  mkdir -p "$BENCH_PLOTS"
  OUT=(--out "$BENCH_PLOTS/fleet.json")
fi
if [ "$ORIG_KCM" != "$LIMITS" ]; then
  "$KCM" set "$LIMITS"
  # Its caches synced and its first resyncs done before the first claim.
  sleep "${BENCH_SETTLE:-10}"
fi
log "Fleet benchmark: kube-controller-manager client limits $("$KCM" get), instances ${BENCH_INSTANCES:-10:1000,100:200}, multihost endpoints ${BENCH_ENDPOINTS:-10,50,100}, backfill ${BENCH_BACKFILL:-1000}"
echo "hostpath over a fleet of fake nodes, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kube-controller-manager client limits $("$KCM" get)"
"$BIN/benchfleet" run --kubeconfig "$CLUSTER_KUBECONFIG" --dir "$FLEET_DIR" \
  --manager-bin "$FLEET_BIN/manager" --provisioner-bin "$FLEET_BIN/provisioner" --provisioner-args "${ARGS:-[]}" \
  --namespace "$NS" --address-prefix "$ADDRESS_PREFIX" --device "$API_BRIDGE" \
  --instances "${BENCH_INSTANCES:-10:1000,100:200}" --endpoints "${BENCH_ENDPOINTS:-10,50,100}" \
  --backfill "${BENCH_BACKFILL:-1000}" --timeout "${BENCH_TIMEOUT:-15m}" "${OUT[@]}" &
FLEET_PID=$!
wait "$FLEET_PID"
