# shellcheck shell=bash
# Common settings for the scripts in this folder. Source it; do not run it.

# K8S_VERSION pins every Kubernetes component the local cluster runs: the
# newest release the Go module proxy serves. K8S_OLDEST is the oldest of
# the supported minors (docs/install.md, "Supported Kubernetes versions"): `make
# test-compat` runs part of the e2e suite on it. Each release is built into
# its own .cache/k8s/<version>.
K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_OLDEST=v1.35.4
# The etcd and the pause image each minor expects (DefaultEtcdVersion and
# PauseVersion in its cmd/kubeadm/app/constants). etcd is built from
# go.etcd.io/etcd/server/v3; the pause image is e2e/cmd/pause, under the
# name the kubelet's runtime is told (node-start.sh).
case $K8S_VERSION in
v1.34.*) _etcd=v3.6.4 PAUSE_VERSION=3.10 ;;
v1.35.*) _etcd=v3.6.6 PAUSE_VERSION=3.10.1 ;;
v1.36.*) _etcd=v3.6.8 PAUSE_VERSION=3.10.2 ;;
v1.37.*) _etcd=v3.7.0 PAUSE_VERSION=3.10.2 ;;
*) printf 'lib.sh: K8S_VERSION %s: no etcd and pause versions known for it\n' "$K8S_VERSION" >&2; exit 1 ;;
esac
ETCD_VERSION=${ETCD_VERSION:-$_etcd}
PAUSE_IMAGE=registry.k8s.io/pause:$PAUSE_VERSION
unset _etcd

# The product's programs: each the module of its name, with its main
# package in cmd/NAME and an image hostpath.dev/NAME.
PRODUCT_PROGRAMS=(manager provisioner hostdefiner)
# What make release builds (release.sh; precompile.sh compiles the
# same ahead): the three programs' images for each of RELEASE_PLATFORMS
# (comma-separated, images.sh's PLATFORMS) and the kubectl plugin for each
# of PLUGIN_PLATFORMS.
RELEASE_PLATFORMS=${RELEASE_PLATFORMS:-linux/amd64,linux/arm64}
PLUGIN_PLATFORMS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# CACHE_DIR keeps build outputs between runs (git-ignored).
CACHE_DIR=${CACHE_DIR:-$REPO_ROOT/.cache}
# K8S_BIN holds the pinned Kubernetes binaries.
K8S_BIN=$CACHE_DIR/k8s/$K8S_VERSION/bin

# k8s_module DIR NAME: write DIR/go.mod, a throwaway module NAME that requires
# k8s.io/kubernetes $K8S_VERSION and replaces every staging module of that
# release (k8s.io/<name>, read from its own go.mod) with its published v0.X
# release, which is how the main repository's ./staging directory is resolved
# outside of it. Run with GOWORK=off.
k8s_module() {
  local dir=$1 name=$2 modfile m
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$modfile" ] || die "no go.mod of k8s.io/kubernetes@$K8S_VERSION from the module proxy"
  {
    printf 'module %s\n\ngo 1.24\n\nrequire k8s.io/kubernetes %s\n' "$name" "$K8S_VERSION"
    grep -E '=> \./staging/' "$modfile" | awk '{print $1}' | sort -u | while read -r m; do
      echo "replace $m => $m v0.${K8S_VERSION#v1.}"
    done
  } > "$dir/go.mod"
}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Go needs a cache directory; CI may run with a bare environment.
if [ -z "${HOME:-}" ]; then
  HOME=$(getent passwd "$(id -u)" | cut -d: -f6)
  export HOME
fi
# The Go toolchain lives in /usr/local/go on this project's machines.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH=/usr/local/go/bin:$PATH
  export PATH
fi
