#!/usr/bin/env bash
# apiserver.sh: a kube-apiserver outage on purpose, on the running local
# cluster (the fault tests use it).
#
#   scripts/apiserver.sh outage SECONDS   stop it, wait SECONDS, start it again
#   scripts/apiserver.sh stop             stop it (by its recorded PID)
#   scripts/apiserver.sh start            start it as cluster-up.sh does
#
# start returns once /readyz answers; etcd and the other components keep
# running throughout, as in a control plane whose API server restarts.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (make cluster-up)"
require_root

stop() {
  pid_alive kube-apiserver || die "kube-apiserver is not running"
  STOP_TIMEOUT=5 stop_recorded kube-apiserver
  log "Stopped kube-apiserver"
}

start() {
  local t0
  t0=$(now)
  pid_alive kube-apiserver && die "kube-apiserver is already running"
  start_apiserver
  wait_until 60 "kube-apiserver /readyz" kc get --raw /readyz || {
    tail -20 "$LOG_DIR/kube-apiserver.log" >&2
    die "kube-apiserver did not become ready"
  }
  log "kube-apiserver ready again after $(since "$t0")s"
}

case ${1:-} in
outage)
  secs=${2:?usage: apiserver.sh outage SECONDS}
  [[ $secs =~ ^[0-9]+$ ]] || usage
  stop
  # The outage itself: the API server is down for this long.
  sleep "$secs"
  start
  ;;
stop) stop ;;
start) start ;;
*) usage ;;
esac
