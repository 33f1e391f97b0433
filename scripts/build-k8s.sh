#!/usr/bin/env bash
# build-k8s.sh: build the pinned Kubernetes components and etcd from the Go
# module proxy into .cache/k8s/<version>/bin, reusing binaries already there.
#
# A throwaway module requires k8s.io/kubernetes and replaces every staging
# module (k8s.io/<name>) with its published v0.X release (k8s_module in
# lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# One build of a release at a time: .ci/run builds in the background what
# the targets it runs build in the foreground; the second waits, then finds
# the binaries.
mkdir -p "$K8S_BIN"
exec 9> "$K8S_BIN/../.build.lock"
flock 9

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
missing=()
for b in "${BINARIES[@]}"; do [ -x "$K8S_BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  log "Kubernetes $K8S_VERSION binaries cached in $K8S_BIN"
  exit 0
fi
log "Building ${missing[*]} ($K8S_VERSION) into $K8S_BIN"

src=$CACHE_DIR/k8s/$K8S_VERSION/src
mkdir -p "$src" "$K8S_BIN"
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}

# The cache lives inside the repository: keep the workspace out of this build.
export GOWORK=off
cd "$src"
if [ ! -f .resolved ]; then
  k8s_module . hostpath.dev/k8s-build
  cat > tools.go <<'EOM'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOM
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null
  # -e: a test of a dependency may import a package its published
  # staging module no longer has (1.37: k8s.io/api/autoscaling/v2beta1);
  # the commands built here do not.
  go mod tidy -e
  touch .resolved
fi

ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
pkgs=()
for b in "${missing[@]}"; do
  case $b in
    etcd) ;;
    *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
  esac
done
if [ ${#pkgs[@]} -gt 0 ]; then
  CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$K8S_BIN/" "${pkgs[@]}"
fi
if [[ " ${missing[*]} " == *" etcd "* ]]; then
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$K8S_BIN/etcd" go.etcd.io/etcd/server/v3
fi
log "Built: $(cd "$K8S_BIN" && ls | tr '\n' ' ')"
