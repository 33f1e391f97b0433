#!/usr/bin/env bash
# bench-provision.sh: provisioning throughput of hostpath against a no-op
# floor on the running local cluster, at several kube-controller-manager
# client limits.
#
#   scripts/bench-provision.sh [-n COUNT]     (or N=COUNT; default 1000)
#
# For each kube-controller-manager setting in BENCH_KCM (QPS/BURST or
# default; default "1000/2000 200/400 default"), restarted with scripts/kcm.sh:
#   noop@SETTING: tools/cmd/noopprovisioner started on this machine (PV objects
#     only; client limits the sum of the provisioner pods' two clients',
#     workers the sum of theirs; the fair floor: its PVs carry the library's
#     finalizer, as Kubernetes 1.33+ expects of a provisioner, KEP-2644),
#     COUNT claims of class hostpath-bench-noop, then it is stopped by PID;
#   ours@SETTING: the provisioner and manager DaemonSets restarted (so their
#     peak RSS is this run's; the run starts once the kubelets have removed
#     the old pods' containers), COUNT claims of class hostpath-immediate with
#     directory checks, then scripts/footprint.sh.
# Claims are pinned round robin to the real nodes, all created at once in a
# fresh namespace, then deleted (tools/cmd/benchprovision run). With
# BENCH_ROUNDS=R (default 1) each setting runs R rounds, the floor then ours
# in each. At the end: the report of each setting, ours against the floor of
# the same round, with R > 1 each figure's ratio over the rounds (min,
# median, max), and SVG plots.
# Always (also on failure or Ctrl-C): the no-op provisioner stopped, its class
# deleted, kube-controller-manager's original limits restored.
#
# Environment: N, BENCH_KCM, BENCH_ROUNDS, BENCH_PLOTS (folder for the plots and
# results.json; default a new temporary folder), BENCH_TIMEOUT (each wait of
# a run, default 15m), ROLLOUT_TIMEOUT (seconds, default 300), BENCH_SETTLE
# (seconds to wait after restarting kube-controller-manager, default 10),
# BENCH_NOOP_PORT (the no-op provisioner's health port, default 18089),
# BENCH_FLOOR_FINALIZER (1, the default: the fair floor; 0: the old floor,
# no finalizer, noopprovisioner --finalizer=false, for comparison),
# BENCH_PERF (1: perf record -a beside each run, then every process's CPU
# seconds from its first claim to all Bound, both sides of each round in
# the report; the probe slows both sides: compare within a round).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

N=${N:-1000}
while [ $# -gt 0 ]; do
  case $1 in
  -n | --count) N=${2:?-n needs a number}; shift 2 ;;
  *) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[[ $N =~ ^[1-9][0-9]*$ ]] || die "the number of claims must be a positive integer, got '$N'"
read -r -a SETTINGS <<< "${BENCH_KCM:-1000/2000 200/400 default}"
ROUNDS=${BENCH_ROUNDS:-1}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer, got '$ROUNDS'"
[ ${#SETTINGS[@]} -gt 0 ] || die "BENCH_KCM names no kube-controller-manager setting"
for s in "${SETTINGS[@]}"; do
  [[ $s =~ ^([1-9][0-9]*/[1-9][0-9]*|default)$ ]] || die "BENCH_KCM: '$s' is neither QPS/BURST nor default"
done
BENCH_TIMEOUT=${BENCH_TIMEOUT:-15m}
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-300}
BENCH_SETTLE=${BENCH_SETTLE:-10}
[[ $BENCH_SETTLE =~ ^[0-9]+$ ]] || die "BENCH_SETTLE must be a number of seconds, got '$BENCH_SETTLE'"
NOOP_PORT=${BENCH_NOOP_PORT:-18089}
case ${BENCH_PERF:-0} in
1 | true | on) PERF=1 ;;
0 | false | off) PERF=0 ;;
*) die "BENCH_PERF must be 1 (perf beside each run) or 0, got '$BENCH_PERF'" ;;
esac
case ${BENCH_FLOOR_FINALIZER:-1} in
1 | true | on) FLOOR_FINALIZER=true FLOOR_DESC="fair floor (PVs with the library's finalizer)" ;;
0 | false | off) FLOOR_FINALIZER=false FLOOR_DESC="old floor (PVs without a finalizer)" ;;
*) die "BENCH_FLOOR_FINALIZER must be 1 (the fair floor) or 0 (the old floor), got '$BENCH_FLOOR_FINALIZER'" ;;
esac
NS=hostpath-system
PROV_DS=hostpath-provisioner
MGR_DS=hostpath-manager
CONTAINER=provisioner
OURS_CLASS=hostpath-immediate
NOOP_CLASS=hostpath-bench-noop
NOOP_PROVISIONER=hostpath.dev/noop-bench
KCM=$REPO_ROOT/scripts/kcm.sh
BIN=$CACHE_DIR/bin
RUN_ID=$(date +%Y%m%d%H%M%S)-$$
FAKE_NODE_SELECTOR='hostpath.dev/fake-node!=true'

require_root
if [ "$PERF" = 1 ]; then
  command -v perf > /dev/null || die "BENCH_PERF=1 needs perf (apt install linux-perf)"
fi
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"
kc get --raw /readyz > /dev/null 2>&1 || die "the local cluster does not answer (run make cluster-up)"
[ -x "$KCM" ] || die "$KCM is missing: it restarts kube-controller-manager with other client limits"
kc get storageclass "$OURS_CLASS" > /dev/null || die "no StorageClass $OURS_CLASS: deploy the product first (make deploy)"
if curl -s --max-time 2 "http://127.0.0.1:$NOOP_PORT/healthz" > /dev/null 2>&1; then
  die "something already listens on 127.0.0.1:$NOOP_PORT (set BENCH_NOOP_PORT)"
fi
ORIG_KCM=$("$KCM" get)
mkdir -p "$BIN"
log "Building benchprovision, noopprovisioner and the provisioner (for its flag defaults)"
(cd "$REPO_ROOT/tools" && CGO_ENABLED=0 go build -o "$BIN/benchprovision" ./cmd/benchprovision &&
  CGO_ENABLED=0 go build -o "$BIN/noopprovisioner" ./cmd/noopprovisioner)
(cd "$REPO_ROOT/provisioner" && CGO_ENABLED=0 go build -o "$BIN/provisioner" ./cmd/provisioner)
WORK=$(mktemp -d)
PLOTS=${BENCH_PLOTS:-$(mktemp -d -t hostpath-bench-plots.XXXXXX)}
mkdir -p "$PLOTS"
NOOP_PID=
PERF_PID=

ds_args() { kc -n "$NS" get ds "$PROV_DS" -o jsonpath="{.spec.template.spec.containers[?(@.name==\"$CONTAINER\")].args}"; }
real_nodes() { kc get nodes -l "$FAKE_NODE_SELECTOR" -o jsonpath='{.items[*].metadata.name}'; }

# kcm_desc: kube-controller-manager's client limits now, for the report.
kcm_desc() {
  local l
  l=$("$KCM" get)
  if [ "$l" = default ]; then echo "default (20/30)"; else echo "$l"; fi
}

# stop_child VAR SIGNAL: stop the child process whose PID the variable
# VAR holds, if any, with SIGNAL, wait for it, and empty VAR.
stop_child() {
  local pid=${!1}
  [ -n "$pid" ] || return 0
  kill -"$2" "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  printf -v "$1" '%s' ''
}

# stop_noop: stop the no-op provisioner, by its PID, if it runs.
stop_noop() { stop_child NOOP_PID TERM; }

# perf_start LABEL: with BENCH_PERF=1, perf record every CPU until
# perf_stop, into the run's .perf file (timestamps in wall-clock time).
perf_start() {
  [ "$PERF" = 1 ] || return 0
  perf record -a -F 99 -k realtime -o "$(base "$1").perf" > "$(base "$1").perf.log" 2>&1 < /dev/null &
  PERF_PID=$!
  wait_until 30 "perf record to start" test -s "$(base "$1").perf" || {
    cat "$(base "$1").perf.log" >&2
    die "perf record did not start"
  }
}

# perf_stop: stop perf record (SIGINT: it writes its file out), by its
# PID, if it runs.
perf_stop() { stop_child PERF_PID INT; }

# cpu_by_process LABEL: the CPU seconds of each process (perf's samples at
# 99 a second and CPU) from the run's first claim to its last claim Bound,
# the busiest first, into the run's .cpu file.
cpu_by_process() {
  [ "$PERF" = 1 ] || return 0
  local json started bound t0
  json=$(base "$1").json
  started=$(grep -o '"started": *"[^"]*"' "$json" | head -1 | sed 's/.*"\([^"]*\)"$/\1/')
  bound=$(grep -o '"allBoundSeconds": *[0-9.e+-]*' "$json" | head -1 | sed 's/.*: *//')
  [ -n "$started" ] && [ -n "$bound" ] || die "$json has no start or all-Bound time"
  t0=$(date -d "$started" +%s.%N)
  {
    printf '%s, to all Bound (%.1f s):\n' "$(run_key "$1")" "$bound"
    perf report -i "$(base "$1").perf" --time "$(awk -v a="$t0" -v b="$bound" 'BEGIN { printf "%.6f,%.6f", a, a + b }')" \
      --sort comm --stdio -n -g none 2> /dev/null |
      awk '!/^#/ && NF >= 3 {
          n = $2; $1 = ""; $2 = ""; sub(/^ +/, ""); if ($0 == "swapper") $0 = "(idle)"
          if (++i <= 14) printf "  %-18s %7.2f\n", $0, n / 99; else o += n
          t += n
        }
        END { if (o) printf "  %-18s %7.2f\n", "(the others)", o / 99; printf "  %-18s %7.2f\n", "(all)", t / 99 }'
  } > "$(base "$1").cpu"
  rm -f "$(base "$1").perf"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  perf_stop
  stop_noop
  # What a killed run left (a finished run deletes its namespace itself);
  # nothing deletes the no-op PVs once it is stopped: they are objects only,
  # and the fair floor's finalizer, which nothing removes any more, goes too.
  kc delete ns -l "hostpath.dev/bench-run=$RUN_ID" --wait=false --ignore-not-found > /dev/null 2>&1 || true
  kc get pv -o jsonpath="{range .items[?(@.spec.storageClassName==\"$NOOP_CLASS\")]}{.metadata.name}{\"\\n\"}{end}" 2> /dev/null > "$WORK/noop-pvs" || true
  if [ -s "$WORK/noop-pvs" ]; then
    xargs -r "$KUBECTL" --kubeconfig "$CLUSTER_KUBECONFIG" delete pv --wait=false --ignore-not-found < "$WORK/noop-pvs" > /dev/null 2>&1 || true
    xargs -r "$KUBECTL" --kubeconfig "$CLUSTER_KUBECONFIG" patch pv --type=merge -p '{"metadata":{"finalizers":null}}' \
      < "$WORK/noop-pvs" > /dev/null 2>&1 || true
  fi
  kc delete storageclass "$NOOP_CLASS" --ignore-not-found > /dev/null 2>&1 || true
  if [ "$("$KCM" get 2> /dev/null)" != "$ORIG_KCM" ]; then
    log "Restoring kube-controller-manager's client limits $ORIG_KCM"
    "$KCM" set "$ORIG_KCM" || rc=1
  fi
  rm -rf "$WORK"
  # A failed run's default plots folder has nothing worth keeping.
  if [ "$rc" -ne 0 ] && [ -z "${BENCH_PLOTS:-}" ]; then rm -rf "$PLOTS"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The floor's client limits and workers: the sum over the provisioner pods,
# one per real node, of what each runs with (its args, else its defaults),
# over both of each one's API clients (volumes, events).
read -r -a NODES <<< "$(real_nodes)"
INSTANCES=${#NODES[@]}
[ "$INSTANCES" -gt 0 ] || die "no real nodes"
OURS_ARGS=$(ds_args)
"$BIN/provisioner" --help > "$WORK/provisioner-help" 2>&1 || true
ONE=$("$BIN/benchprovision" limits "$OURS_ARGS" 1 "$WORK/provisioner-help")
ALL=$("$BIN/benchprovision" limits "$OURS_ARGS" "$INSTANCES" "$WORK/provisioner-help")
read -r Q1 B1 W1 EQ1 EB1 <<< "$ONE"
read -r QPS BURST WORKERS EQ EB <<< "$ALL"
OURS_DESC="$INSTANCES instances, each --kube-api-qps=$Q1 --kube-api-burst=$B1 --workers=$W1"
# Its one client gets the limits of all of ours, the events' clients too.
if [ "$EB1" != 0 ]; then
  OURS_DESC+=" --event-qps=$EQ1 --event-burst=$EB1"
  QPS=$(awk -v a="$QPS" -v b="$EQ" 'BEGIN {print a + b}')
  BURST=$((BURST + EB))
fi
NOOP_DESC="1 process, --kube-api-qps=$QPS --kube-api-burst=$BURST --workers=$WORKERS --finalizer=$FLOOR_FINALIZER"
log "Benchmark $RUN_ID: $N claims on ${NODES[*]}; kube-controller-manager settings ${SETTINGS[*]} (now $ORIG_KCM)"
log "ours: $OURS_DESC; noop, the $FLOOR_DESC: $NOOP_DESC"

kc apply -f - > /dev/null << EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $NOOP_CLASS
  labels:
    hostpath.dev/bench-run: "$RUN_ID"
provisioner: $NOOP_PROVISIONER
volumeBindingMode: Immediate
reclaimPolicy: Delete
EOF

# slug SETTING: the setting as a file name part.
slug() { echo "${1//\//-}"; }

# round_arg: the round of the run, for benchprovision run (0 with one round).
round_arg() { if [ "$ROUNDS" -gt 1 ]; then echo "$ROUND"; else echo 0; fi; }

# run_key LABEL: the run's name for benchprovision report --footprint.
run_key() { if [ "$ROUNDS" -gt 1 ]; then echo "$1#$ROUND"; else echo "$1"; fi; }

# base LABEL: the file name of a run's files in $WORK, without extension.
base() { echo "$WORK/$(slug "$1")-r$(round_arg)"; }

# bench LABEL CLASS SETTINGS [ARGS...]: one benchprovision run.
bench() {
  local label=$1 class=$2 settings=$3
  shift 3
  "$BIN/benchprovision" run --label "$label" --round "$(round_arg)" --kcm "$(kcm_desc)" --settings "$settings" \
    --run-id "$RUN_ID" --count "$N" --storage-class "$class" --timeout "$BENCH_TIMEOUT" \
    --kubeconfig "$CLUSTER_KUBECONFIG" --out "$(base "$label").json" "$@"
}

# run_noop SETTING: the floor's run at SETTING.
run_noop() {
  local label=noop@$1 logf
  logf=$(base "$label").log
  "$BIN/noopprovisioner" --kubeconfig "$CLUSTER_KUBECONFIG" --provisioner-name "$NOOP_PROVISIONER" \
    --kube-api-qps "$QPS" --kube-api-burst "$BURST" --workers "$WORKERS" --finalizer="$FLOOR_FINALIZER" \
    --metrics-address "127.0.0.1:$NOOP_PORT" > "$logf" 2>&1 < /dev/null &
  NOOP_PID=$!
  wait_until 60 "the no-op provisioner's caches" curl -sf --max-time 2 "http://127.0.0.1:$NOOP_PORT/readyz" || {
    tail -20 "$logf" >&2
    die "the no-op provisioner did not become ready"
  }
  perf_start "$label"
  bench "$label" "$NOOP_CLASS" "$NOOP_DESC" || { tail -20 "$logf" >&2; return 1; }
  perf_stop
  cpu_by_process "$label"
  kill -0 "$NOOP_PID" 2> /dev/null || die "the no-op provisioner stopped during the run (log: above)"
  "$REPO_ROOT/scripts/footprint.sh" --pid "$NOOP_PID" noopprovisioner > "$(base "$label").footprint"
  stop_noop
  FOOTPRINTS+=(--footprint "$(run_key "$label")=$(base "$label").footprint")
  RESULTS+=("$(base "$label").json")
}

# stale_containers: the containers (sandboxes included) that the nodes'
# runtimes still hold for pods of $NS that are gone, one ID a line.
stale_containers() {
  local uids n sock u
  uids=$(kc -n "$NS" get pods -o jsonpath='{.items[*].metadata.uid}') || return 1
  for n in $(node_numbers); do
    sock=$(node_sock "$n")
    comm -23 \
      <(ctr --address "$sock" -n k8s.io containers ls -q "labels.\"io.kubernetes.pod.namespace\"==$NS" | sort) \
      <(for u in $uids; do
        ctr --address "$sock" -n k8s.io containers ls -q "labels.\"io.kubernetes.pod.uid\"==$u"
      done | sort) || return 1
  done
}

# no_stale_containers: succeeds once stale_containers finds none.
no_stale_containers() {
  local left
  left=$(stale_containers) && [ -z "$left" ]
}

# restart_ours: restart the manager and provisioner pods, wait until every
# one is Ready again, then until the kubelets have removed the old pods'
# containers and sandboxes (with their networks: the CNI plugins run
# again), which they do up to a minute after the pods are gone: that work
# is the restart's, not the run's, and the floor's run has none.
restart_ours() {
  local t0
  t0=$(now)
  restart_daemonsets "$NS" "$ROLLOUT_TIMEOUT" "$MGR_DS" "$PROV_DS"
  log "Manager and provisioner pods restarted in $(since "$t0")s"
  t0=$(now)
  wait_until "$ROLLOUT_TIMEOUT" "the kubelets to remove the old pods' containers" no_stale_containers ||
    die "the nodes still hold containers of gone pods of $NS: $(stale_containers | tr '\n' ' ')"
  log "The old pods' containers removed after $(since "$t0")s more"
}

# run_ours SETTING: our provisioner's run at SETTING.
run_ours() {
  local label=ours@$1
  restart_ours
  perf_start "$label"
  bench "$label" "$OURS_CLASS" "$OURS_DESC" --nodes-dir "$NODES_DIR"
  perf_stop
  cpu_by_process "$label"
  # Someone else applying manifests/ in between would spoil the comparison.
  [ "$(ds_args)" = "$OURS_ARGS" ] || die "the provisioner's args changed during the $label run (now $(ds_args))"
  "$REPO_ROOT/scripts/footprint.sh" > "$(base "$label").footprint"
  FOOTPRINTS+=(--footprint "$(run_key "$label")=$(base "$label").footprint")
  RESULTS+=("$(base "$label").json")
}

FOOTPRINTS=()
RESULTS=()
for s in "${SETTINGS[@]}"; do
  if [ "$("$KCM" get)" != "$s" ]; then
    "$KCM" set "$s"
    # Its caches synced and its first resyncs done before the floor's run.
    sleep "$BENCH_SETTLE"
  fi
  log "kube-controller-manager client limits: $(kcm_desc)"
  for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    [ "$ROUNDS" -eq 1 ] || log "Round $ROUND of $ROUNDS at $s"
    run_noop "$s"
    run_ours "$s"
  done
done

echo
echo "hostpath provisioning against the no-op floor, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $N claims"
echo "floor: the $FLOOR_DESC, noopprovisioner --finalizer=$FLOOR_FINALIZER (BENCH_FLOOR_FINALIZER=${BENCH_FLOOR_FINALIZER:-1})"
"$BIN/benchprovision" report "${FOOTPRINTS[@]}" --plots "$PLOTS" --json "$PLOTS/results.json" "${RESULTS[@]}"
if [ "$PERF" = 1 ]; then
  echo
  echo "Every process's CPU seconds (perf record -a beside each run; the probe slows both sides):"
  for s in "${SETTINGS[@]}"; do
    for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
      paste "$(base "noop@$s").cpu" "$(base "ours@$s").cpu" | expand -t 44 | sed 's/ *$//'
    done
  done
fi
echo "plots and results.json: $PLOTS"
