#!/usr/bin/env bash
# deploy.sh [DIR]: install the product on the local cluster (kubectl apply -k
# manifests/, with the cluster's kubectl) and wait until every DaemonSet and
# Deployment in hostpath-system is rolled out. DIR, relative to the repository,
# is another kustomization to apply, e.g. e2e/install/ (what the e2e suite
# installs, framework.InstallProduct; scripts/storage-suite.sh uses it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

NS=hostpath-system
TIMEOUT=${DEPLOY_TIMEOUT:-180s}
DIR=${1:-manifests/}
if [ ! -f "$REPO_ROOT/manifests/kustomization.yaml" ]; then
  log "manifests/kustomization.yaml does not exist yet: nothing to deploy"
  exit 0
fi
kc get --raw /readyz > /dev/null 2>&1 || die "no local cluster answers (run make cluster-up)"
t0=$(now)
kc apply -k "$REPO_ROOT/$DIR"
for kind in daemonset deployment; do
  for w in $(kc -n "$NS" get "$kind" -o name 2>/dev/null); do
    kc -n "$NS" rollout status "$w" --timeout="$TIMEOUT" || {
      kc -n "$NS" get pods -o wide >&2
      kc -n "$NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -20 >&2
      die "$w did not roll out within $TIMEOUT"
    }
  done
done
log "Deployed in $(since "$t0")s"
kc -n "$NS" get pods -o wide
