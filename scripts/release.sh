#!/usr/bin/env bash
# release.sh VERSION (make release VERSION=vX.Y.Z): build release VERSION
# into dist/ from the commit RELEASES names for it (docs/releasing.md):
#
#   <program>-VERSION.oci.tar  manager, provisioner, hostdefiner: each an OCI
#                              archive of one image index, an image per
#                              platform of RELEASE_PLATFORMS
#   hostpath.yaml              `kustomize build manifests` of the release's
#                              commit, its three images replaced by
#                              RELEASE_REGISTRY/<program>@sha256:<index digest>
#   hostpath-X.Y.Z.tgz         the Helm chart charts/hostpath of that commit
#                              (version X.Y.Z, appVersion VERSION), its
#                              values pinning the same images by digest
#   kubectl-hostpath-<os>-<arch>  the kubectl plugin, linux and darwin,
#                              amd64 and arm64
#   SHA256SUMS                 sha256sum of each of the above
#
# It refuses a version that RELEASES does not record or CHANGELOG.md has no
# section for (the checks of make check-releases), and a commit without
# charts/hostpath (the releases made before the chart). The commit is
# checked out into a clean git worktree, removed at the end; this
# checkout's scripts build it (images.sh with SOURCE_DIR and PLATFORMS).
# Nothing is pushed: docs/releasing.md says how to publish dist/.
#
# RELEASE_REGISTRY (default hostpath.dev, the names the local cluster
# imports) is where hostpath.yaml and the chart pull the images from: push
# the archives there. RELEASE_PLATFORMS (default linux/amd64,linux/arm64)
# is images.sh's PLATFORMS. DIST_DIR (default dist/) is emptied first.
# helm and kustomize are built once by tool.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"
S=$(cd "$(dirname "$0")" && pwd)

VERSION=${1:-${VERSION:-}}
[[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
  die "usage: release.sh vMAJOR.MINOR.PATCH (make release VERSION=v0.3.0), not '$VERSION'"
RELEASE_REGISTRY=${RELEASE_REGISTRY:-hostpath.dev}
RELEASE_REGISTRY=${RELEASE_REGISTRY%/}
[[ $RELEASE_REGISTRY =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
  die "RELEASE_REGISTRY $RELEASE_REGISTRY is not HOST[:PORT][/PATH] (a lower-case path, no scheme)"
DIST_DIR=${DIST_DIR:-$REPO_ROOT/dist}
T0=$(now)

# The record names the version, and the version's commit has the chart.
commit=$(cd "$REPO_ROOT/tools" && go run ./cmd/releases commit "$VERSION" "$REPO_ROOT") ||
  die "RELEASES and CHANGELOG.md must name $VERSION, and pass make check-releases (above)"
git -C "$REPO_ROOT" cat-file -e "$commit:charts/hostpath/Chart.yaml" 2> /dev/null ||
  die "$VERSION is commit ${commit:0:7}, which has no charts/hostpath: make release builds releases that have the Helm chart (docs/releasing.md)"
log "Release $VERSION from commit ${commit:0:12}, images for $RELEASE_PLATFORMS, pulled from $RELEASE_REGISTRY"
"$S/ensure-packages.sh" skopeo umoci

work=$(mktemp -d "${TMPDIR:-/tmp}/hostpath-release-$VERSION.XXXXXX")
src=$work/src
cleanup() {
  git -C "$REPO_ROOT" worktree remove --force "$src" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$REPO_ROOT" worktree add --quiet --detach "$src" "$commit"
rm -rf "$DIST_DIR"
mkdir -p "$DIST_DIR"

# images: the index of each program, from its layout into an OCI archive
# (the same digests: --preserve-digests).
PLATFORMS=$RELEASE_PLATFORMS IMAGE_TAG=$VERSION SOURCE_DIR=$src "$S/images.sh" --product
declare -A digest
for p in "${PRODUCT_PROGRAMS[@]}"; do
  layout=$IMAGES_DIR/oci/$p-$VERSION
  archive=$DIST_DIR/$p-$VERSION.oci.tar
  digest[$p]=$("$IMAGES_DIR/bin/ociindex" digest "$layout" "$VERSION")
  skopeo copy --quiet --all --preserve-digests "oci:$layout:$VERSION" "oci-archive:$archive:$VERSION"
  got=sha256:$(skopeo inspect --raw "oci-archive:$archive" | sha256sum | cut -c1-64)
  [ "$got" = "${digest[$p]}" ] || die "$archive holds the index $got, not ${digest[$p]} of $layout"
done

# hostpath.yaml: the release's manifests with the images by digest.
mkdir "$work/overlay"
{
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../src/manifests\nimages:\n'
  for p in "${PRODUCT_PROGRAMS[@]}"; do
    printf -- '- {name: hostpath.dev/%s, newName: %s/%s, digest: "%s"}\n' "$p" "$RELEASE_REGISTRY" "$p" "${digest[$p]}"
  done
} > "$work/overlay/kustomization.yaml"
kustomize=$("$S/tool.sh" kustomize)
{
  printf '# hostpath %s (commit %s): kubectl apply -f hostpath.yaml installs it,\n' "$VERSION" "$commit"
  printf '# its images pulled by digest from %s (docs/releasing.md).\n' "$RELEASE_REGISTRY"
  "$kustomize" build "$work/overlay"
} > "$DIST_DIR/hostpath.yaml"

# The chart: a copy whose values pin the same images.
mkdir "$work/chart"
cp -r "$src/charts/hostpath" "$work/chart/hostpath"
settings=("image.registry=$RELEASE_REGISTRY" "image.tag=$VERSION")
for p in "${PRODUCT_PROGRAMS[@]}"; do settings+=("$p.image.digest=${digest[$p]}"); done
(cd "$REPO_ROOT/tools" && go run ./cmd/releases set-values "$work/chart/hostpath/values.yaml" "${settings[@]}") ||
  die "the chart of $VERSION lacks the values image.registry, image.tag or <program>.image.digest (above)"
helm=$("$S/tool.sh" helm)
"$helm" package "$work/chart/hostpath" --version "${VERSION#v}" --app-version "$VERSION" --destination "$DIST_DIR" > /dev/null

# Both install the same three images, each by its index's digest.
want=$(for p in "${PRODUCT_PROGRAMS[@]}"; do echo "$RELEASE_REGISTRY/$p@${digest[$p]}"; done | sort)
for what in hostpath.yaml chart; do
  if [ "$what" = chart ]; then
    rendered=$("$helm" template hostpath "$DIST_DIR/hostpath-${VERSION#v}.tgz" --namespace hostpath-system --kube-version "$K8S_VERSION")
  else
    rendered=$(cat "$DIST_DIR/hostpath.yaml")
  fi
  got=$(sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' <<< "$rendered" | sort -u)
  [ "$got" = "$want" ] || die "the $what of $VERSION installs the images"$'\n'"$got"$'\n'"not"$'\n'"$want"
done

# The kubectl plugin.
for plat in "${PLUGIN_PLATFORMS[@]}"; do
  (cd "$src/hostdefiner" && CGO_ENABLED=0 GOOS=${plat%/*} GOARCH=${plat#*/} go build -trimpath -ldflags "-s -w" \
    -o "$DIST_DIR/kubectl-hostpath-${plat%/*}-${plat#*/}" ./cmd/kubectl-hostpath)
done

(
  cd "$DIST_DIR"
  files=(*)
  sha256sum -- "${files[@]}" > SHA256SUMS
)
log "Release $VERSION in $DIST_DIR after $(since "$T0")s:"
(cd "$DIST_DIR" && ls -l | sed 1d) >&2
