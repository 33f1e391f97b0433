#!/usr/bin/env bash
# test.sh (make test): everything CI runs, in order: verify (gofmt, vet,
# GOWORK=off builds), unit tests of every module, the Kubernetes build, a
# fresh local cluster, the images, the e2e suite, and the cluster teardown,
# which always runs (also after a failure or Ctrl-C). Prints the wall time of
# every phase; exits non-zero if any phase failed.
# KEEP_CLUSTER=1 leaves the cluster up at the end; the next run reuses it
# when it is healthy and of the same Kubernetes version (cluster-up.sh), as
# .ci/run does for make test, test-storage and test-faults.
#
# Each phase's output also goes to .cache/test-logs/<target>/<phase>.log. The
# summary at the end has, beside each phase's wall time, what its tests
# did: "N passed, N failed, N skipped" (top-level go test -v tests, or the
# Ginkgo specs of the upstream suite) or "N packages ok, N failed" (go test
# without -v). A test phase in which no test passed fails, so that a run
# that executed nothing cannot pass. The summary is also written to
# .cache/test-logs/<target>/summary, which .ci/run prints at its end.
#
# test.sh compat (make test-compat): the compatibility part of the suite
# (make e2e-compat) on a fresh cluster of the oldest supported Kubernetes
# release (K8S_OLDEST in lib.sh), built into its own cache.
#
# test.sh faults (make test-faults): the fault tests (make e2e-faults),
# after the packages and the Kubernetes build: they break things on purpose
# (kill -9, API server outage, node reboot), so they run apart from the rest
# of the suite, last on the cluster .ci/run keeps.
#
# test.sh lifecycle (make test-lifecycle): the tests that replace the
# install itself (make e2e-lifecycle: upgrades from the recorded releases,
# the Helm chart, the uninstall), apart from make test for its time.
#
# test.sh storage (make test-storage): the upstream Kubernetes External
# Storage suite (make e2e-storage, scripts/storage-suite.sh), after the
# packages, the Kubernetes build and the suite's build.
#
# test.sh release (make test-release): a release rehearsed in a throwaway
# clone (scripts/rehearse-release.sh: make release of a new version of
# HEAD), then the tests of e2e/release on its dist/: the files, each image
# per platform (arm64 binaries run under qemu-user), the plugin, the
# SHA256SUMS, hostpath.yaml and the chart (e2e-dist); make push of
# multi-platform images to a registry of its own on 127.0.0.1 (e2e-push);
# and, on a fresh cluster (an earlier one is taken down) whose nodes
# import the release's OCI archives (images.sh --release), `kubectl apply -f
# dist/hostpath.yaml` and a claim of each mode (e2e-install). At the end the
# archives leave the image cache.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
cd "$REPO_ROOT" || exit 1

MAKE=${MAKE:-make}
MODE=${1:-all}
case $MODE in
all) TARGET=test ;;
faults) TARGET=test-faults ;;
lifecycle) TARGET=test-lifecycle ;;
compat)
  TARGET=test-compat
  # The oldest supported release, built into a cache of its own.
  if [ "$K8S_VERSION" != "$K8S_OLDEST" ]; then K8S_VERSION=$K8S_OLDEST ETCD_VERSION='' exec "$0" "$@"; fi
  ;;
storage) TARGET=test-storage ;;
release) TARGET=test-release ;;
*) die "usage: test.sh [faults|lifecycle|compat|storage|release]" ;;
esac
T0=$(now)
results=()
failed=""
TEST_LOGS=$CACHE_DIR/test-logs/$TARGET
rm -rf "$TEST_LOGS"
mkdir -p "$TEST_LOGS" || exit 1

# tally LOG: what the tests in a phase's output did, on one line; empty if
# it ran no go test or Ginkgo suite. Top-level go test -v results ("--- PASS:
# TestX") and Ginkgo's "N Passed | N Failed | N Pending | N Skipped" lines
# count tests (Ginkgo's skipped specs are those its focus left out: not
# counted); without -v, the package lines count packages.
tally() {
  awk '
    /^--- PASS: /          { p++; v = 1 }
    /^--- FAIL: /          { f++; v = 1 }
    /^--- SKIP: /          { s++; v = 1 }
    /^ok  \t/                { po++ }
    /^FAIL\t/                { pf++ }
    /^(SUCCESS|FAIL)! -- [0-9]+ Passed \| [0-9]+ Failed/ {
      g = 1; gp += $3; gf += $6
    }
    END {
      if (v || g) printf "%d passed, %d failed, %d skipped\n", p + gp, f + gf, s + gs
      else if (po || pf) printf "%d packages ok, %d failed\n", po, pf
    }' "$1"
}

# passed LINE: whether a tally line counts at least one test or package.
passed() { [[ $1 =~ ^[1-9][0-9]*\ (passed|packages) ]]; }

# phase NAME COMMAND...: run one phase unless an earlier one failed; its
# output goes to the terminal and to $TEST_LOGS/NAME.log.
phase() {
  local name=$1 t rc counts status
  shift
  [ -z "$failed" ] || { results+=("$(printf '%-13s skipped' "$name")"); return 0; }
  log "=== $name: $*"
  t=$(now)
  "$@" 2>&1 | tee "$TEST_LOGS/$name.log"
  rc=${PIPESTATUS[0]}
  counts=$(tally "$TEST_LOGS/$name.log")
  status=ok
  [ $rc -eq 0 ] || status="FAILED (exit $rc)"
  case $name in
  unit | e2e*)
    if [ $rc -eq 0 ] && ! passed "$counts"; then status="FAILED (no test ran)" rc=1; fi
    ;;
  esac
  results+=("$(printf '%-13s %6ss  %-18s %s' "$name" "$(since "$t")" "$status" "$counts")")
  [ $rc -eq 0 ] || failed=$name
}

finish() {
  local rc=$?
  trap - EXIT INT TERM
  [ "$MODE" != release ] || forget_release
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
  local verdict="make $TARGET passed" code=0
  if [ -n "$failed" ] || [ "$rc" -ne 0 ]; then verdict="make $TARGET FAILED${failed:+ in phase $failed}" code=1; fi
  {
    printf '=== make %s: phases (wall times, tests)\n' "$TARGET"
    printf '  %s\n' "${results[@]}"
    printf '  %-13s %6ss\n' total "$(since "$T0")"
    echo "$verdict"
  } > "$TEST_LOGS/summary"
  log "=== Summary"
  cat "$TEST_LOGS/summary" >&2
  exit $code
}
trap finish EXIT
trap 'failed=${failed:-interrupted}; exit 130' INT TERM

# The release that test.sh release rehearses (rehearse-release.sh).
REHEARSAL=$CACHE_DIR/release-rehearsal
rehearsal_version() { cat "$REHEARSAL/version" 2> /dev/null; }

# release_packages: the cluster's packages, qemu-user and file.
release_packages() {
  "$REPO_ROOT/scripts/ensure-packages.sh" && "$REPO_ROOT/scripts/ensure-packages.sh" qemu-user-static file
}

# release_tests REGEXP: the tests of e2e/release that REGEXP names, on the
# rehearsed release.
release_tests() {
  (cd "$REPO_ROOT/e2e" && HOSTPATH_E2E_REQUIRED=true HOSTPATH_RELEASE_DIST=$REHEARSAL/src/dist \
    HOSTPATH_RELEASE_VERSION=$(rehearsal_version) go test -count=1 -timeout 20m -v -run "$1" ./release)
}

# fresh_cluster: down, then up.
fresh_cluster() { "$REPO_ROOT/scripts/cluster-down.sh" && "$REPO_ROOT/scripts/cluster-up.sh"; }

# forget_release: the rehearsed release's archives leave the image cache.
forget_release() {
  local v
  v=$(rehearsal_version) || return 0
  [ -n "$v" ] && rm -f "$IMAGES_DIR"/*-"$v".oci.tar "$IMAGES_DIR"/*-"$v".oci.key
}

[ "$(id -u)" -eq 0 ] || die "make $TARGET needs root (it starts a local Kubernetes cluster)"
if [ "$MODE" = release ]; then
  phase packages release_packages
  phase k8s "$REPO_ROOT/scripts/build-k8s.sh"
  phase release "$REPO_ROOT/scripts/rehearse-release.sh"
  phase e2e-dist release_tests '^(TestDistFiles|TestImages|TestPlugin|TestHostpathYAML|TestChart)$'
  phase e2e-push release_tests '^TestPushIndex$'
  phase cluster-up fresh_cluster
  phase images "$REPO_ROOT/scripts/images.sh" --release "$REHEARSAL/src/dist"
  phase e2e-install release_tests '^TestInstall$'
  exit 0
fi
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
lifecycle) phase e2e-lifecycle env HOSTPATH_E2E_REQUIRED=true "$MAKE" --no-print-directory e2e-lifecycle ;;
compat) phase e2e-compat env HOSTPATH_E2E_REQUIRED=true "$MAKE" --no-print-directory e2e-compat ;;
storage) phase e2e-storage "$MAKE" --no-print-directory e2e-storage ;;
esac
