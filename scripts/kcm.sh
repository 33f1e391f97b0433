#!/usr/bin/env bash
# kcm.sh: kube-controller-manager's client limits on the running local
# cluster (benchmarks compare provisioners at several of them).
#
#   scripts/kcm.sh get                  prints QPS/BURST, or "default" (20/30)
#   scripts/kcm.sh set QPS BURST        restarts it with --kube-api-qps/--kube-api-burst
#   scripts/kcm.sh set default          restarts it with its own defaults
#   scripts/kcm.sh set QPS/BURST        the same, in the form get prints
#
# set stops the recorded process by its PID, starts it again exactly as
# cluster-up.sh does (start_kcm in cluster-lib.sh, log appended), and returns
# once /healthz answers ok. cluster-up.sh takes the limits at start from
# KCM_API_QPS and KCM_API_BURST.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ -f "$RUN_DIR/kube-controller-manager.pid" ] || die "no local cluster runs (make cluster-up)"
case ${1:-} in
get)
  cat "$RUN_DIR/kcm-limits" 2>/dev/null || echo default
  ;;
set)
  case $# in
  2)
    case $2 in
    default) limits=default ;;
    */*) [[ $2 =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] || usage; limits=$2 ;;
    *) usage ;;
    esac
    ;;
  3) limits=$2/$3 ;;
  *) usage ;;
  esac
  require_root
  t0=$(now)
  stop_recorded kube-controller-manager
  start_kcm "$limits"
  wait_until 60 "kube-controller-manager /healthz" kcm_healthy || {
    tail -20 "$LOG_DIR/kube-controller-manager.log" >&2
    die "kube-controller-manager did not become healthy"
  }
  log "kube-controller-manager restarted with client limits $limits in $(since "$t0")s"
  ;;
*) usage ;;
esac
