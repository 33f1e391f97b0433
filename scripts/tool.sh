#!/usr/bin/env bash
# tool.sh NAME: build a pinned command-line tool from the Go module proxy
# into .cache/tools/<name>-<version>/ (once; reused after) and print its
# path. The chart's checks and tests, `make release` and the e2e helm tests
# use these; none is installed system-wide.
#
#   helm       helm.sh/helm/v3  (HELM_VERSION)
#   helm4      helm.sh/helm/v4  (HELM4_VERSION): the chart must install with both
#   kustomize  sigs.k8s.io/kustomize/kustomize/v5 (KUSTOMIZE_VERSION)
#   registry   github.com/distribution/distribution/v3 (REGISTRY_VERSION):
#              a local registry, which make test-release pushes to
#
# Each is built in a throwaway module of its own (GOWORK=off, `go install
# MODULE@VERSION`), so its dependencies never meet the project's modules.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

HELM_VERSION=${HELM_VERSION:-v3.22.0}
HELM4_VERSION=${HELM4_VERSION:-v4.3.1}
KUSTOMIZE_VERSION=${KUSTOMIZE_VERSION:-v5.8.2}
REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}

case ${1:-} in
helm) pkg=helm.sh/helm/v3/cmd/helm version=$HELM_VERSION cmd=helm ;;
helm4) pkg=helm.sh/helm/v4/cmd/helm version=$HELM4_VERSION cmd=helm ;;
kustomize) pkg=sigs.k8s.io/kustomize/kustomize/v5 version=$KUSTOMIZE_VERSION cmd=kustomize ;;
registry) pkg=github.com/distribution/distribution/v3/cmd/registry version=$REGISTRY_VERSION cmd=registry ;;
*) die "usage: tool.sh helm | helm4 | kustomize | registry" ;;
esac
dir=$CACHE_DIR/tools/$1-$version
bin=$dir/$cmd
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  # One build per tool at a time (tests may ask in parallel).
  exec 9> "$dir.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    log "Building $pkg@$version into $dir"
    (cd "$dir" && GOWORK=off GOBIN=$dir CGO_ENABLED=0 go install -trimpath "$pkg@$version") ||
      die "could not build $pkg@$version"
  fi
fi
echo "$bin"
