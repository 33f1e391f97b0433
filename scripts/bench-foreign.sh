#!/usr/bin/env bash
# bench-foreign.sh: what the claims and PVs of another provisioner cost each
# hostpath provisioner instance, on the running local cluster with the
# product deployed. Each instance caches every claim and PV of the cluster;
# those of other provisioners as stubs (provisioner/internal/app/cachetrim).
#
#   scripts/bench-foreign.sh [-n COUNT]     (or N=COUNT; default 10000)
#
# Steps, with every provisioner's RSS (VmRSS, scripts/footprint.sh) after
# each, once BENCH_SETTLE seconds have passed:
#   1. idle: the provisioner DaemonSet restarted;
#   2. claims: COUNT claims of the StorageClass hostpath-bench-foreign
#      (provisioner foreign.bench.example, which nothing serves; Immediate),
#      created in a fresh namespace, once kube-controller-manager has
#      annotated every one with its provisioner (from then on a stub);
#   3. PVs: COUNT PVs of that provisioner (CSI driver foreign.bench.example,
#      Retain, of a class no claim asks for, so none binds), once every one
#      is Available;
#   4. deleted: claims, PVs and class deleted, once all are gone.
# Then the growth per 1,000 claims (2 - 1), per 1,000 PVs (3 - 2) and per
# 1,000 objects (3 - 1 over 2 x COUNT), per instance, and the peak (VmHWM);
# and the idle memory of each provisioner and manager three ways (VmRSS,
# its anonymous part, the container's working set: see footprint.sh)
# against the targets, 30 and 20 MiB.
# kube-controller-manager runs with the client limits BENCH_KCM (QPS/BURST
# or default; default 1000/2000, scripts/kcm.sh) meanwhile, so that it
# annotates COUNT claims in seconds rather than minutes. Always (also on
# failure or Ctrl-C): the namespace, PVs and class deleted, its limits
# restored.
#
# Environment: N, BENCH_KCM, BENCH_SETTLE (seconds before each reading,
# default 60: the runtime returns the memory of a burst gradually),
# BENCH_TIMEOUT (seconds of each wait, default 900), ROLLOUT_TIMEOUT
# (seconds, default 300).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

N=${N:-10000}
while [ $# -gt 0 ]; do
  case $1 in
  -n | --count) N=${2:?-n needs a number}; shift 2 ;;
  *) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[[ $N =~ ^[1-9][0-9]*$ ]] || die "the number of claims and PVs must be a positive integer, got '$N'"
LIMITS=${BENCH_KCM:-1000/2000}
[[ $LIMITS =~ ^([1-9][0-9]*/[1-9][0-9]*|default)$ ]] || die "BENCH_KCM: '$LIMITS' is neither QPS/BURST nor default"
SETTLE=${BENCH_SETTLE:-60}
[[ $SETTLE =~ ^[0-9]+$ ]] || die "BENCH_SETTLE must be a number of seconds, got '$SETTLE'"
TIMEOUT=${BENCH_TIMEOUT:-900}
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "BENCH_TIMEOUT must be a number of seconds, got '$TIMEOUT'"
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-300}
NS_SYSTEM=hostpath-system
PROV_DS=hostpath-provisioner
# Also the PVs' CSI driver name, which cannot hold a "/".
PROVISIONER=foreign.bench.example
CLASS=hostpath-bench-foreign
# The PVs' class: no claim asks for it, so the PV controller binds none.
PV_CLASS=hostpath-bench-foreign-static
RUN_ID=$(date +%Y%m%d%H%M%S)-$$
NS=hostpath-bench-foreign-$RUN_ID
LABEL=hostpath.dev/bench-run=$RUN_ID
KCM=$REPO_ROOT/scripts/kcm.sh
FOOTPRINT=$REPO_ROOT/scripts/footprint.sh
CHUNK=500

require_root
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"
kc get --raw /readyz > /dev/null 2>&1 || die "the local cluster does not answer (run make cluster-up)"
kc -n "$NS_SYSTEM" get ds "$PROV_DS" > /dev/null || die "hostpath is not deployed (make deploy)"
ORIG_KCM=$("$KCM" get)
WORK=$(mktemp -d)

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  kc delete ns -l "$LABEL" --wait=false --ignore-not-found > /dev/null 2>&1 || true
  kc delete pv -l "$LABEL" --wait=false --ignore-not-found > /dev/null 2>&1 || true
  kc delete storageclass "$CLASS" --ignore-not-found > /dev/null 2>&1 || true
  if [ "$("$KCM" get 2> /dev/null)" != "$ORIG_KCM" ]; then
    log "Restoring kube-controller-manager's client limits $ORIG_KCM"
    "$KCM" set "$ORIG_KCM" || rc=1
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# reading STEP: after BENCH_SETTLE seconds, every provisioner's line of
# footprint.sh into $WORK/STEP ("NODE PID RSS_MiB PEAK_MiB", by node).
reading() {
  sleep "$SETTLE"
  "$FOOTPRINT" | awk '$1 == "provisioner" {print $2, $3, $4, $5}' | sort > "$WORK/$1"
  [ -s "$WORK/$1" ] || die "no provisioner process found (scripts/footprint.sh)"
  log "RSS after $1: $(awk '{printf "%s %s MiB; ", $1, $3}' "$WORK/$1")"
}

# count_lines COMMAND...: the number of lines COMMAND prints that are not
# empty.
count_lines() { "$@" | grep -c . || true; }

# annotated: how many claims of the namespace kube-controller-manager has
# annotated with their provisioner.
annotated() {
  kc -n "$NS" get pvc -o jsonpath='{range .items[*]}{.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}{"\n"}{end}' |
    grep -cx "$PROVISIONER" || true
}

# available: how many of the run's PVs are Available.
available() {
  kc get pv -l "$LABEL" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -cx Available || true
}

# wait_for DESCRIPTION WANT COMMAND...: wait until COMMAND prints WANT,
# checking every 5 s, for at most BENCH_TIMEOUT seconds.
wait_for() {
  local what=$1 want=$2 t0 got
  shift 2
  t0=$(date +%s)
  while got=$("$@"); [ "$got" != "$want" ]; do
    [ $(($(date +%s) - t0)) -lt "$TIMEOUT" ] || die "timed out after ${TIMEOUT}s waiting for $what ($got of $want)"
    sleep 5
  done
  log "$what: $want after $(($(date +%s) - t0))s"
}

# claim I: the claim I, an item of a List.
claim() {
  local i=$1
  cat << EOF
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data-$i, namespace: $NS, labels: {hostpath.dev/bench-run: "$RUN_ID"}}
  spec:
    storageClassName: $CLASS
    accessModes: [ReadWriteOnce]
    resources: {requests: {storage: 1Gi}}
EOF
}

# volume I: the PV I as a CSI provisioner makes it (not bound), an item of
# a List.
volume() {
  local i=$1
  cat << EOF
- apiVersion: v1
  kind: PersistentVolume
  metadata:
    name: bench-foreign-$RUN_ID-$i
    labels: {hostpath.dev/bench-run: "$RUN_ID"}
    annotations: {pv.kubernetes.io/provisioned-by: $PROVISIONER}
  spec:
    storageClassName: $PV_CLASS
    capacity: {storage: 1Gi}
    accessModes: [ReadWriteOnce]
    persistentVolumeReclaimPolicy: Retain
    volumeMode: Filesystem
    csi: {driver: $PROVISIONER, volumeHandle: vol-$RUN_ID-$i, fsType: ext4}
EOF
}

# create ITEM: the N objects ITEM makes (ITEM I prints the object I, an
# item of a List), created CHUNK at a time.
create() {
  local from to i
  for ((from = 0; from < N; from += CHUNK)); do
    to=$((from + CHUNK < N ? from + CHUNK : N))
    {
      printf 'apiVersion: v1\nkind: List\nitems:\n'
      for ((i = from; i < to; i++)); do "$1" "$i"; done
    } | kc create -f - > /dev/null
  done
}

log "Foreign objects benchmark $RUN_ID: $N claims and $N PVs of provisioner $PROVISIONER; kube-controller-manager $LIMITS (now $ORIG_KCM)"
if [ "$ORIG_KCM" != "$LIMITS" ]; then
  "$KCM" set "$LIMITS"
fi

t0=$(now)
restart_daemonsets "$NS_SYSTEM" "$ROLLOUT_TIMEOUT" "$PROV_DS"
log "Provisioner pods restarted in $(since "$t0")s"
reading idle
"$FOOTPRINT" | awk '$1 == "provisioner" || $1 == "manager" {print $1, $2, $4, $9, $10}' | sort > "$WORK/idle-detail"

kc apply -f - > /dev/null << EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $NS
  labels: {hostpath.dev/bench-run: "$RUN_ID"}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $CLASS
  labels: {hostpath.dev/bench-run: "$RUN_ID"}
provisioner: $PROVISIONER
volumeBindingMode: Immediate
reclaimPolicy: Delete
EOF
log "Creating $N claims of class $CLASS"
create claim
wait_for "claims annotated with provisioner $PROVISIONER" "$N" annotated
reading claims

log "Creating $N PVs of provisioner $PROVISIONER"
create volume
wait_for "PVs Available" "$N" available
reading pvs

log "Deleting the claims, the PVs and the class"
kc delete ns "$NS" --wait=false > /dev/null
kc delete pv -l "$LABEL" --wait=false > /dev/null
wait_for "claims and PVs gone" 0 count_lines kc get pv,pvc -A -l "$LABEL" -o name
kc delete storageclass "$CLASS" --ignore-not-found > /dev/null
reading deleted

# Every reading must be of the same processes: a restarted provisioner
# would make the differences meaningless.
for step in claims pvs deleted; do
  cmp -s <(awk '{print $1, $2}' "$WORK/idle") <(awk '{print $1, $2}' "$WORK/$step") ||
    die "the provisioner processes changed between the idle reading and the $step one (a restart?)"
done

echo
echo "hostpath provisioner memory with objects of another provisioner, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $N claims and $N PVs"
join "$WORK/idle" "$WORK/claims" | join - "$WORK/pvs" | join - "$WORK/deleted" | awk -v n="$N" '
  BEGIN {
    printf "%-18s %8s %8s %8s %8s %8s %12s %12s %12s\n", "NODE", "IDLE", "+CLAIMS", "+PVS", "DELETED", "PEAK", "MiB/1000pvc", "MiB/1000pv", "MiB/1000obj"
  }
  # Fields: node, then pid rss peak for idle, claims, pvs, deleted.
  {
    idle = $3; claims = $6; pvs = $9; deleted = $12; peak = $13
    c = (claims - idle) * 1000 / n; p = (pvs - claims) * 1000 / n; o = (pvs - idle) * 1000 / (2 * n)
    printf "%-18s %8.1f %8.1f %8.1f %8.1f %8.1f %12.2f %12.2f %12.2f\n", $1, idle, claims, pvs, deleted, peak, c, p, o
    sum += o; k++
  }
  END { if (k) printf "foreign objects: %.2f MiB of RSS per 1,000 per instance (mean of %d; target 0.50)\n", sum / k, k }'
echo
echo "idle, before the objects (MiB): VmRSS, of which anonymous, and the container's working set"
awk '
  BEGIN { target["provisioner"] = 30; target["manager"] = 20; printf "%-12s %-18s %8s %8s %8s %8s\n", "PROGRAM", "NODE", "RSS", "ANON", "POD", "TARGET" }
  { printf "%-12s %-18s %8.1f %8.1f %8s %8d\n", $1, $2, $3, $4, $5, target[$1] }' "$WORK/idle-detail"
