# shellcheck shell=bash
# Common settings for the scripts in this folder. Source it; do not run it.

# K8S_VERSION pins every Kubernetes component the local cluster runs. The
# modules use k8s.io/client-go v0.37 (its API types no longer register with
# gogo protobuf, which made every binary 4 to 20 MB larger); the cluster stays
# on 1.34, so the suite runs the version skew of users whose clusters are
# older than the client, over APIs that are GA in both.
K8S_VERSION=${K8S_VERSION:-v1.34.4}
# ETCD_VERSION pins etcd, built from go.etcd.io/etcd/server/v3.
ETCD_VERSION=${ETCD_VERSION:-v3.6.4}

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# CACHE_DIR keeps build outputs between runs (git-ignored).
CACHE_DIR=${CACHE_DIR:-$REPO_ROOT/.cache}
# K8S_BIN holds the pinned Kubernetes binaries.
K8S_BIN=$CACHE_DIR/k8s/$K8S_VERSION/bin

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
