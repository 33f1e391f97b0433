#!/usr/bin/env bash
# bench-provision.sh: provisioning throughput of hostpath on the running local
# cluster, the provisioner's own API rate limits against client-go's defaults.
#
#   scripts/bench-provision.sh [-n COUNT]     (or N=COUNT; default 100)
#
# Two runs of e2e/cmd/benchprovision, each creating COUNT claims of class
# hostpath-immediate, pinned round robin to the real nodes, in a fresh
# namespace, then deleting it: first with the provisioner's defaults
# (--kube-api-qps/--kube-api-burst removed from the DaemonSet's args), then
# with --kube-api-qps=5 --kube-api-burst=10 (client-go's defaults, what
# kubevirt's legacy provisioner ran with). Between runs the DaemonSet is
# patched and rolled out (a Ready pod with the new args on every real node).
# The original args are put back at the end, also on failure or Ctrl-C.
# Prints a table of both runs' figures and the ratio defaults/baseline.
#
# Environment: N (claims), BENCH_TIMEOUT (each wait of a run, default 10m),
# ROLLOUT_TIMEOUT (seconds per rollout, default 180).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

N=${N:-100}
while [ $# -gt 0 ]; do
  case $1 in
  -n | --count) N=${2:?-n needs a number}; shift 2 ;;
  *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[[ $N =~ ^[1-9][0-9]*$ ]] || die "the number of claims must be a positive integer, got '$N'"
BENCH_TIMEOUT=${BENCH_TIMEOUT:-10m}
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-180}
BASELINE_QPS=5
BASELINE_BURST=10
NS=hostpath-system
DS=hostpath-provisioner
CONTAINER=provisioner
SELECTOR=app.kubernetes.io/name=hostpath-provisioner
BIN=$CACHE_DIR/bin/benchprovision
RUN_ID=$(date +%Y%m%d%H%M%S)-$$

[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"
kc get --raw /readyz > /dev/null 2>&1 || die "the local cluster does not answer (run make cluster-up)"
mkdir -p "$(dirname "$BIN")"
(cd "$REPO_ROOT/e2e" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/benchprovision)
WORK=$(mktemp -d)

ds_args() { kc -n "$NS" get ds "$DS" -o jsonpath="{.spec.template.spec.containers[?(@.name==\"$CONTAINER\")].args}"; }
real_nodes() { kc get nodes -l 'hostpath.dev/fake-node!=true' -o jsonpath='{.items[*].metadata.name}'; }

# set_args JSON: give the provisioner container these args (null: none).
set_args() {
  kc -n "$NS" patch ds "$DS" --type strategic \
    -p "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"$CONTAINER\",\"args\":$1}]}}}}" > /dev/null
}

# pods_ready_with JSON: on every real node, one provisioner pod that is not
# terminating, is Ready and runs with exactly these args.
pods_ready_with() {
  local want=$1 node pods
  pods=$(kc -n "$NS" get pods -l "$SELECTOR" -o jsonpath="{range .items[*]}{.spec.nodeName}|{.metadata.deletionTimestamp}|{.status.conditions[?(@.type==\"Ready\")].status}|{.spec.containers[?(@.name==\"$CONTAINER\")].args}{\"\\n\"}{end}")
  for node in $(real_nodes); do
    grep -qxF "$node||True|$want" <<< "$pods" || return 1
  done
}

# roll_out JSON: patch the args (when they differ) and wait for the rollout.
roll_out() {
  local want=$1 t0
  [ "$(ds_args)" = "$want" ] && pods_ready_with "$want" && return 0
  t0=$(now)
  set_args "$want"
  kc -n "$NS" rollout status ds "$DS" --timeout="${ROLLOUT_TIMEOUT}s" > /dev/null ||
    die "DaemonSet $DS did not roll out within ${ROLLOUT_TIMEOUT}s"
  wait_until "$ROLLOUT_TIMEOUT" "a Ready $DS pod with args $want on every real node" pods_ready_with "$want" ||
    die "no Ready $DS pod with args $want on every real node"
  log "Provisioner args $want rolled out in $(since "$t0")s"
}

ORIG=$(ds_args)
restore_args=${ORIG:-null}
restore() {
  local rc=$?
  trap - EXIT INT TERM
  # What a killed run left (a finished run deletes its namespace itself).
  kc delete ns -l "hostpath.dev/bench-run=$RUN_ID" --wait=false --ignore-not-found > /dev/null 2>&1 || true
  if [ "$(ds_args)" != "$ORIG" ]; then
    log "Restoring the provisioner args $restore_args"
    if [ -n "$ORIG" ]; then
      (roll_out "$ORIG") || rc=1
    else
      (set_args null && kc -n "$NS" rollout status ds "$DS" --timeout="${ROLLOUT_TIMEOUT}s" > /dev/null) || rc=1
    fi
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap restore EXIT
trap 'exit 130' INT TERM

DEFAULT_ARGS=$("$BIN" args "$ORIG")
BASELINE_ARGS=$("$BIN" args "$ORIG" "$BASELINE_QPS" "$BASELINE_BURST")
log "Benchmark $RUN_ID: $N claims on nodes $(real_nodes); provisioner args now ${ORIG:-none}"

# bench LABEL SETTINGS ARGS: one run with the provisioner on ARGS.
bench() {
  local label=$1 settings=$2 args=$3
  roll_out "$args"
  "$BIN" run --label "$label" --settings "$settings" --run-id "$RUN_ID" --count "$N" \
    --timeout "$BENCH_TIMEOUT" --nodes-dir "$NODES_DIR" --kubeconfig "$CLUSTER_KUBECONFIG" \
    --out "$WORK/$label.json"
  # Someone else applying manifests/ in between would spoil the comparison.
  [ "$(ds_args)" = "$args" ] || die "the DaemonSet's args changed during the $label run (now $(ds_args))"
}

bench defaults "qps 50 burst 100" "$DEFAULT_ARGS"
bench baseline "qps $BASELINE_QPS burst $BASELINE_BURST" "$BASELINE_ARGS"
echo
echo "hostpath provisioning benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs"
"$BIN" compare "$WORK/defaults.json" "$WORK/baseline.json"
