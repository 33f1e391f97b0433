#!/usr/bin/env bash
# codegen.sh (make generate): generate, from the HostDefinition types in
# api/hostpath/v1, their deepcopy functions, the typed
# clientset, listers and informers (k8s.io/code-generator's kube_codegen.sh,
# as kubernetes/sample-controller does) and the CRD with its schema
# (controller-gen, sigs.k8s.io/controller-tools). Both tools are built from
# the Go module proxy at pinned versions.
#
# codegen.sh --verify (part of make verify) generates into the tree, fails if
# that changed anything, and puts the committed files back.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CODEGEN_VERSION=${CODEGEN_VERSION:-v0.37.2}
CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.19.0}
MODULE=hostpath.dev/api
MOD_DIR=$REPO_ROOT/api
# GENERATED lists every path the generators write (relative to REPO_ROOT).
GENERATED=(
  api/hostpath/v1/zz_generated.deepcopy.go
  api/generated
  manifests/base/hostdefiner/crd.yaml
)

generate() {
  local codegen_dir
  codegen_dir=$(cd "$MOD_DIR" && go mod download -json "k8s.io/code-generator@$CODEGEN_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -f "$codegen_dir/kube_codegen.sh" ] || die "k8s.io/code-generator@$CODEGEN_VERSION has no kube_codegen.sh"
  # The generators are installed into the cache, not into GOPATH/bin.
  GOBIN=$CACHE_DIR/codegen/$CODEGEN_VERSION
  export GOBIN
  mkdir -p "$GOBIN"
  # shellcheck source=/dev/null
  . "$codegen_dir/kube_codegen.sh"
  (
    cd "$MOD_DIR"
    kube::codegen::gen_helpers --boilerplate "$REPO_ROOT/scripts/boilerplate.go.txt" hostpath
    kube::codegen::gen_client --with-watch \
      --output-dir generated --output-pkg "$MODULE/generated" \
      --boilerplate "$REPO_ROOT/scripts/boilerplate.go.txt" .
    go run "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION" \
      crd paths=./hostpath/... output:crd:stdout > "$REPO_ROOT/manifests/base/hostdefiner/crd.yaml.tmp"
  ) >&2
  mv "$REPO_ROOT/manifests/base/hostdefiner/crd.yaml.tmp" "$REPO_ROOT/manifests/base/hostdefiner/crd.yaml"
}

if [ "${1:-}" != --verify ]; then
  generate
  log "codegen: generated ${GENERATED[*]}"
  exit 0
fi

snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
cd "$REPO_ROOT"
tar -cf "$snapshot/before.tar" "${GENERATED[@]}"
generate
mkdir "$snapshot/before" "$snapshot/after"
tar -xf "$snapshot/before.tar" -C "$snapshot/before"
tar -cf - "${GENERATED[@]}" | tar -xf - -C "$snapshot/after"
if ! diff -r "$snapshot/before" "$snapshot/after" > "$snapshot/diff"; then
  rm -rf "${GENERATED[@]}"
  tar -xf "$snapshot/before.tar"
  head -40 "$snapshot/diff" >&2
  die "generated code is stale: run make generate and commit the result"
fi
log "codegen: generated code is up to date"
