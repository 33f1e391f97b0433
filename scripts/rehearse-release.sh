#!/usr/bin/env bash
# rehearse-release.sh: make release in a throwaway clone, as a maintainer
# would cut one (docs/releasing.md), for make test-release: clone this
# repository's HEAD into .cache/release-rehearsal/src, record there a
# release of that HEAD one minor version after the newest of RELEASES (its
# RELEASES line and CHANGELOG.md section, one commit), and run
# `make release VERSION=...` in the clone. Its dist/ is
# .cache/release-rehearsal/src/dist; the version is written to
# .cache/release-rehearsal/version. The clone is removed and made again at
# every run; nothing of it reaches this repository.
#
# The clone's make release uses this checkout's CACHE_DIR (the tools, the
# image layouts); RELEASE_REGISTRY and RELEASE_PLATFORMS pass through.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

DIR=$CACHE_DIR/release-rehearsal
CLONE=$DIR/src
T0=$(now)
rm -rf "$DIR"
mkdir -p "$DIR"
git clone --quiet "$REPO_ROOT" "$CLONE"
head=$(git -C "$CLONE" rev-parse HEAD)
date=$(TZ=UTC git -C "$CLONE" show -s --date=format-local:%Y-%m-%d --format=%cd HEAD)
newest=$(awk '/^v[0-9]/ {v = $1} END {print v}' "$CLONE/RELEASES")
[[ $newest =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "no release in RELEASES to follow"
version=v${BASH_REMATCH[1]}.$((BASH_REMATCH[2] + 1)).0
log "Rehearsing release $version of ${head:0:12} ($date) in $CLONE"

printf '%-10s %s  %s  supported\n' "$version" "$head" "$date" >> "$CLONE/RELEASES"
awk -v v="$version" -v d="$date" '
  !done && /^## v[0-9]/ { print "## " v " - " d; print ""; print "A rehearsal of make release (make test-release), never published."; print ""; done = 1 }
  { print }' "$CLONE/CHANGELOG.md" > "$CLONE/CHANGELOG.md.new"
mv "$CLONE/CHANGELOG.md.new" "$CLONE/CHANGELOG.md"
git -C "$CLONE" -c user.name=rehearsal -c user.email=rehearsal@hostpath.dev commit --quiet -am "Release $version (rehearsal)"

CACHE_DIR=$CACHE_DIR make -C "$CLONE" --no-print-directory release VERSION="$version"
echo "$version" > "$DIR/version"
log "Rehearsal of $version done in $(since "$T0")s: $CLONE/dist"
