#!/usr/bin/env bash
# test.sh (make test): everything CI runs, in order: verify (gofmt, vet,
# GOWORK=off builds), unit tests of every module, the Kubernetes build, a
# fresh local cluster, the images, the e2e suite, and the cluster teardown,
# which always runs (also after a failure or Ctrl-C). Prints the wall time of
# every phase; exits non-zero if any phase failed.
# KEEP_CLUSTER=1 leaves the cluster up at the end.
#
# test.sh compat (make test-compat): the compatibility part of the suite
# (make e2e-compat) on a fresh cluster of the oldest supported Kubernetes
# release (K8S_OLDEST in lib.sh), built into its own cache.
#
# test.sh faults (make test-faults): the fault tests (make e2e-faults) on a
# fresh cluster of their own, after the packages and the Kubernetes build:
# they break things on purpose (kill -9, API server outage, node reboot), so
# they run apart from the rest of the suite, which stays under 20 minutes.
#
# test.sh storage (make test-storage): the upstream Kubernetes External
# Storage suite (make e2e-storage, scripts/storage-suite.sh) on a fresh
# cluster of its own, after the packages, the Kubernetes build and the
# suite's build.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
cd "$REPO_ROOT" || exit 1

MAKE=${MAKE:-make}
MODE=${1:-all}
case $MODE in
all) TARGET=test ;;
faults) TARGET=test-faults ;;
compat)
  TARGET=test-compat
  # The oldest supported release, built into a cache of its own.
  if [ "$K8S_VERSION" != "$K8S_OLDEST" ]; then K8S_VERSION=$K8S_OLDEST ETCD_VERSION='' exec "$0" "$@"; fi
  ;;
storage) TARGET=test-storage ;;
*) die "usage: test.sh [faults|compat|storage]" ;;
esac
T0=$(now)
results=()
failed=""

# phase NAME COMMAND...: run one phase unless an earlier one failed.
phase() {
  local name=$1 t rc
  shift
  [ -z "$failed" ] || { results+=("$(printf '%-13s skipped' "$name")"); return 0; }
  log "=== $name: $*"
  t=$(now)
  "$@"
  rc=$?
  results+=("$(printf '%-13s %6ss  %s' "$name" "$(since "$t")" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  [ $rc -eq 0 ] || failed=$name
}

finish() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -z "${KEEP_CLUSTER:-}" ]; then
    local t
    t=$(now)
    log "=== cluster-down"
    "$REPO_ROOT/scripts/cluster-down.sh"
    local drc=$?
    results+=("$(printf '%-13s %6ss  %s' cluster-down "$(since "$t")" "$([ $drc -eq 0 ] && echo ok || echo FAILED)")")
    [ $drc -eq 0 ] || failed=${failed:-cluster-down}
  else
    log "KEEP_CLUSTER is set: the cluster stays up (make cluster-down stops it)"
  fi
  log "=== Summary (wall times)"
  printf '  %s\n' "${results[@]}" >&2
  printf '  %-13s %6ss\n' total "$(since "$T0")" >&2
  if [ -n "$failed" ] || [ "$rc" -ne 0 ]; then
    log "make $TARGET FAILED${failed:+ in phase $failed}"
    exit 1
  fi
  log "make $TARGET passed"
  exit 0
}
trap finish EXIT
trap 'failed=${failed:-interrupted}; exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || die "make $TARGET needs root (it starts a local Kubernetes cluster)"
phase packages "$REPO_ROOT/scripts/ensure-packages.sh"
if [ "$MODE" = all ]; then
  phase verify "$MAKE" --no-print-directory verify
  phase unit "$MAKE" --no-print-directory unit
fi
phase k8s "$REPO_ROOT/scripts/build-k8s.sh"
if [ "$MODE" = storage ]; then
  phase suite-build "$REPO_ROOT/scripts/build-e2e-test.sh"
fi
phase cluster-up "$REPO_ROOT/scripts/cluster-up.sh"
phase images "$REPO_ROOT/scripts/images.sh"
case $MODE in
all) phase e2e env HOSTPATH_E2E_REQUIRED=true "$MAKE" --no-print-directory e2e ;;
faults) phase e2e-faults env HOSTPATH_E2E_REQUIRED=true "$MAKE" --no-print-directory e2e-faults ;;
compat) phase e2e-compat env HOSTPATH_E2E_REQUIRED=true "$MAKE" --no-print-directory e2e-compat ;;
storage) phase e2e-storage "$MAKE" --no-print-directory e2e-storage ;;
esac
