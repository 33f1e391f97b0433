#!/usr/bin/env bash
# storage-suite.sh [DRIVER...] (make e2e-storage): the upstream Kubernetes
# "External Storage" e2e suite (k8s.io/kubernetes/test/e2e/storage/external)
# of $K8S_VERSION against the running local cluster, once per test-driver
# file e2e/storage/<DRIVER>.yaml (default: every one; docs/development.md, "Tests"):
#
# 1. builds the suite (build-e2e-test.sh) and the images its pods run
#    (images.sh --storage-suite), both reused when built already;
# 2. installs the product as the e2e suite does (deploy.sh e2e/install/);
# 3. runs, for each driver, the tests named "External Storage [Driver: X]"
#    but the [Disruptive], [Serial] and [Feature:...] ones and those of SKIP
#    below (each with the reason), in STORAGE_PROCS (default 3) Ginkgo
#    processes, with the images named by e2e/storage/repo-list.yaml; the
#    drivers side by side, STORAGE_DRIVERS_AT_ONCE (default all) at a time;
# 4. prints each driver's wall time and result; exits 1 if any failed.
#
# STORAGE_FOCUS (a regular expression) narrows the tests further;
# HOSTPATH_E2E_SKIP_INSTALL=true skips step 2, as for make e2e. Each driver's
# JUnit report goes to $CLUSTER_DIR/storage-suite/<DRIVER>.xml.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
S=$(cd "$(dirname "$0")" && pwd)

PROCS=${STORAGE_PROCS:-3}
FOCUS=${STORAGE_FOCUS:-}
# SKIP: tests that cannot pass here for reasons no capability of a test-driver
# file can say, each with the reason.
SKIP=(
  # They break the cluster on purpose, need it alone, or need an optional
  # feature (snapshots, VolumeAttributesClasses...). [Slow] ones run.
  '\[Disruptive\]' '\[Serial\]' '\[Feature:'
  # An Immediate node-mode claim must name its node (hostpath.dev/provision-on-node);
  # the provisioner does not pick one from the class's allowedTopologies, as a
  # topology-aware CSI provisioner would (docs/provisioner.md, "Provisioner").
  'immediate binding\)\] topology should provision a volume and schedule a pod with AllowedTopologies'
  # With TopologyKeys, the capacity test finds the driver's nodes in CSINode
  # objects, where only kubelet-registered CSI node plugins appear: hostpath.dev
  # is a CSIDriver object for the scheduler's capacity tracking only. The
  # e2e suite's TestCapacityAwareScheduling covers the objects instead.
  'capacity provides storage capacity information'
  # It lists the kubelet's pod directory through nsenter into PID 1's mount
  # namespace, which on the local cluster is this machine's, not the node's
  # (each node is a mount namespace of its own; the nsenter is refused, too).
  'volumeMode should not mount / map unused volumes in a pod'
)
[ -x "$KUBECTL" ] || die "no $KUBECTL (run make k8s)"
kc get --raw /readyz > /dev/null 2>&1 || die "no local cluster answers (run make cluster-up)"

drivers=("$@")
if [ ${#drivers[@]} -eq 0 ]; then
  for f in "$REPO_ROOT"/e2e/storage/*.yaml; do
    [ "$(basename "$f")" = repo-list.yaml ] || drivers+=("$(basename "$f" .yaml)")
  done
fi
for d in "${drivers[@]}"; do
  [ -f "$REPO_ROOT/e2e/storage/$d.yaml" ] || die "no test-driver file e2e/storage/$d.yaml"
done

T0=$(now)
"$S/build-e2e-test.sh"
"$S/images.sh" --storage-suite
if [ "${HOSTPATH_E2E_SKIP_INSTALL:-}" = true ]; then
  log "HOSTPATH_E2E_SKIP_INSTALL=true: the product is not installed"
else
  "$S/deploy.sh" e2e/install/
fi

reports=$CLUSTER_DIR/storage-suite
mkdir -p "$reports"
skip=$(IFS='|'; echo "${SKIP[*]}")
# ran REPORT: the tests of a JUnit report that ran: status, seconds, name.
ran() {
  grep -o '<testcase [^>]*>' "$1" | grep -v 'status="skipped"' |
    sed -e 's/.*name="\[It\] External Storage \(.*\)" classname=.* status="\([a-z]*\)" time="\([0-9]*\)[^"]*".*/  \2 \3s \1/' \
      -e 's/&#34;/"/g; s/&#39;/'"'"'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g' | sort -k3 >&2
}
results=()
failed=()
# suite DRIVER: run the suite for one test-driver file; its output goes to
# $reports/DRIVER.log, its exit status to $reports/DRIVER.rc, its wall time
# to $reports/DRIVER.time.
suite() {
  local d=$1 t rc=0
  t=$(now)
  rm -f "$reports/$d.xml"
  KUBE_TEST_REPO_LIST=$REPO_ROOT/e2e/storage/repo-list.yaml \
    "$K8S_BIN/ginkgo" --procs="$PROCS" --timeout=60m --silence-skips --no-color \
    --focus="External.Storage${FOCUS:+.*($FOCUS)}" --skip="$skip" \
    --junit-report="$reports/$d.xml" \
    "$K8S_BIN/e2e-storage.test" -- \
    --kubeconfig="$CLUSTER_KUBECONFIG" --repo-root="$REPO_ROOT" \
    --storage.testdriver="$REPO_ROOT/e2e/storage/$d.yaml" > "$reports/$d.log" 2>&1 || rc=$?
  echo "$rc" > "$reports/$d.rc"
  since "$t" > "$reports/$d.time"
}
# The drivers' runs go side by side (STORAGE_DRIVERS_AT_ONCE=1: one after
# the other): each test makes its own namespace and claims of its driver's
# class, and they wait on pods far more than they use the CPU.
pids=()
for d in "${drivers[@]}"; do
  log "=== External Storage with e2e/storage/$d.yaml ($PROCS processes; output in $reports/$d.log)"
  suite "$d" &
  pids+=($!)
  if [ "${STORAGE_DRIVERS_AT_ONCE:-${#drivers[@]}}" -le "${#pids[@]}" ]; then
    wait "${pids[@]}"
    pids=()
  fi
done
wait "${pids[@]}"
for d in "${drivers[@]}"; do
  log "=== External Storage with e2e/storage/$d.yaml: output"
  cat "$reports/$d.log" >&2
  [ ! -f "$reports/$d.xml" ] || ran "$reports/$d.xml"
  rc=$(cat "$reports/$d.rc" 2> /dev/null || echo 1)
  results+=("$(printf '%-10s %7ss  %s' "$d" "$(cat "$reports/$d.time" 2> /dev/null)" "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  [ "$rc" -eq 0 ] || failed+=("$d")
done
log "=== External Storage summary (wall times; reports in $reports)"
printf '  %s\n' "${results[@]}" >&2
printf '  %-10s %7ss\n' total "$(since "$T0")" >&2
[ ${#failed[@]} -eq 0 ] || die "External Storage failed for ${failed[*]}"
