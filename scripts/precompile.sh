#!/usr/bin/env bash
# precompile.sh: compiles into the Go build cache, and writes nothing else,
# what the later targets of .ci/run build from other trees or for other
# platforms, so that they then mostly link:
#
#   - the three programs of each release TestUpgrade upgrades from
#     (`releases supported`: RELEASES), from its commit's tree, for this
#     machine: TestUpgrade builds their images
#     (make test-lifecycle: git archive, then images.sh with SOURCE_DIR),
#     and an old release's dependencies are not those of HEAD;
#   - what make release cross-compiles (make test-release): the three
#     programs for each of RELEASE_PLATFORMS and the kubectl plugin for
#     each of PLUGIN_PLATFORMS (lib.sh).
#
# Compiled as images.sh and release.sh build them: CGO_ENABLED=0,
# -trimpath, in the tree's workspace. -trimpath keeps the tree's directory
# out of the cache's keys, so the throwaway trees of the tests find these
# entries.
#
# .ci/run runs it among its background builds, at the lowest CPU priority:
# on a cold machine these compiles were foreground minutes of make
# test-lifecycle and make test-release (docs/development.md, "Time
# budget"). Run by hand, it only warms the cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
cd "$REPO_ROOT"

T0=$(now)
MAINS=()
for p in "${PRODUCT_PROGRAMS[@]}"; do MAINS+=("hostpath.dev/$p/cmd/$p"); done
PLUGIN=hostpath.dev/hostdefiner/cmd/kubectl-hostpath
# compile DIR OS/ARCH PKG...: compile PKGs (at least two: go build links a
# lone main package into the current directory, and keeps no output of
# several) in the workspace of DIR for OS/ARCH.
compile() {
  local dir=$1 plat=$2
  shift 2
  (cd "$dir" && CGO_ENABLED=0 GOOS=${plat%/*} GOARCH=${plat#*/} go build -trimpath "$@")
}

work=$(mktemp -d "${TMPDIR:-/tmp}/hostpath-precompile.XXXXXX")
trap 'rm -rf "$work"' EXIT
host=$(go env GOOS)/$(go env GOARCH)
supported=$(cd tools && go run ./cmd/releases supported "$REPO_ROOT")
while read -r version commit; do
  [ -n "$version" ] || continue
  mkdir -p "$work/$version"
  git archive "$commit" | tar -x -C "$work/$version"
  log "Compiling the programs of release $version (${commit:0:12}) for $host"
  compile "$work/$version" "$host" "${MAINS[@]}"
done <<< "$supported"

IFS=, read -ra platforms <<< "$RELEASE_PLATFORMS"
for plat in $(printf '%s\n' "${platforms[@]}" "${PLUGIN_PLATFORMS[@]}" | sort -u); do
  pkgs=()
  [[ " ${platforms[*]} " != *" $plat "* ]] || pkgs+=("${MAINS[@]}")
  [[ " ${PLUGIN_PLATFORMS[*]} " != *" $plat "* ]] || pkgs+=("$PLUGIN")
  [ ${#pkgs[@]} -gt 1 ] || pkgs+=(hostpath.dev/api/managerapi)
  log "Compiling what make release builds for $plat"
  compile "$REPO_ROOT" "$plat" "${pkgs[@]}"
done
log "Precompiled in $(since "$T0")s"
