#!/usr/bin/env bash
# images.sh [--base | --storage-suite | --product | --release DIST]: build the local
# cluster's images as OCI image tarballs (static Go binaries, umoci + skopeo
# from Debian; no Docker engine, no registry), cache them in
# .cache/images/<name>.tar, and import them into the containerd of every
# running node.
#
#   hostpath.dev/manager:dev      runs as root (creates directories in root-owned pools)
#   hostpath.dev/provisioner:dev  runs as 65532
#   hostpath.dev/hostdefiner:dev  runs as 65532
#   hostpath.dev/testtools:dev    busybox + nettool (e2e/cmd/nettool), for test pods
#   registry.k8s.io/pause:<PAUSE_VERSION>  the pod sandbox (e2e/cmd/pause; lib.sh)
#
# With --base only the last two are built (cluster-up.sh uses it) and nothing
# is imported. With --product only the first three are built, and nothing is
# imported: push.sh (make push) sends them to a registry, or users copy the
# tarballs to their nodes (docs/install.md). With --storage-suite only the
# images that the pods of the upstream storage e2e suite run
# (scripts/storage-suite.sh) are built and imported, named as
# e2e/storage/repo-list.yaml maps registry.k8s.io/e2e-test-images, with the
# names and tags of test/utils/image/manifest.go of $K8S_VERSION:
#
#   hostpath.dev/e2e-test-images/busybox:<tag>            busybox
#   hostpath.dev/e2e-test-images/agnhost:<tag>            busybox + /agnhost (build-e2e-test.sh)
#   hostpath.dev/e2e-test-images/nginx:<tag>              busybox: the suite runs only a shell,
#   hostpath.dev/e2e-test-images/glibc-dns-testing:<tag>  dd and sha256sum in these two
#                                                         (jessie-dnsutils before 1.35)
#
# With --release DIST nothing is built: the OCI archives of a release's
# dist/ (make release: DIST/<program>-<version>.oci.tar) are cached as
# .cache/images/<program>-<version>.oci.tar and imported into every running
# node as hostpath.dev/<program>@sha256:<index digest> (and
# hostpath.dev/<program>:<version>): the names DIST/hostpath.yaml pulls when
# the release was made with the default RELEASE_REGISTRY. Nodes started
# later import them too (node-start.sh), until they are removed from the
# cache (make test-release removes them at its end).
#
# An image whose content did not change is not rebuilt.
#
# IMAGE_TAG (default dev) tags the three product images, e.g. IMAGE_TAG=v0.1.0
# for a release; SOURCE_DIR (default this repository) is the checkout their
# programs are built from, e.g. a worktree of an earlier release (the upgrade
# e2e test builds the previous release's images this way). Images of another
# tag are cached as <name>-<tag>.tar next to the dev ones.
#
# PLATFORMS (with --product only; default: unset) builds multi-platform
# images instead: a comma-separated list of OS/ARCH among
# $MULTIARCH_PLATFORMS (below), e.g. PLATFORMS=linux/amd64,linux/arm64.
# Each product image is built once per platform (the program
# cross-compiled with GOOS and GOARCH; the config's architecture and os set
# with umoci) into the OCI layout .cache/images/oci/<name>-<tag>/, one image
# per platform named <os>-<arch> (linux-arm64), and an OCI image index of
# them named <tag> (tools/cmd/ociindex). No docker-archive tarball is built
# then: push.sh pushes the index (skopeo copy --all), release.sh packs it
# into dist/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

BASE_ONLY=false
STORAGE_SUITE=false
PRODUCT_ONLY=false
IMAGE_TAG=${IMAGE_TAG:-dev}
PLATFORMS=${PLATFORMS:-}
# The platforms the product images can be built for: static Go binaries
# (CGO_ENABLED=0) on an empty base, so those Go cross-compiles the programs
# to. make test-release runs the arm64 ones under qemu; the other three are
# built, not tested. No 32-bit platform: the manager does not compile for
# linux/arm (docs/releasing.md).
MULTIARCH_PLATFORMS="linux/amd64 linux/arm64 linux/ppc64le linux/s390x linux/riscv64"
SOURCE_DIR=$(cd "${SOURCE_DIR:-$REPO_ROOT}" && pwd)
[[ $IMAGE_TAG =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "IMAGE_TAG $IMAGE_TAG is not a valid image tag"
case ${1:-} in
--base) BASE_ONLY=true ;;
--storage-suite) STORAGE_SUITE=true ;;
--product) PRODUCT_ONLY=true ;;
--release) RELEASE_DIST=${2:?usage: images.sh --release DIST} ;;
"") ;;
*) die "usage: images.sh [--base | --storage-suite | --product | --release DIST]" ;;
esac
platforms=()
if [ -n "$PLATFORMS" ]; then
  $PRODUCT_ONLY || die "PLATFORMS=$PLATFORMS: multi-platform images are built with --product only (make push, make release)"
  IFS=, read -ra platforms <<< "$PLATFORMS"
  for p in "${platforms[@]}"; do
    [[ " $MULTIARCH_PLATFORMS " == *" $p "* ]] || die "PLATFORMS: $p is none of $MULTIARCH_PLATFORMS"
  done
  [ "$(printf '%s\n' "${platforms[@]}" | sort -u | wc -l)" -eq ${#platforms[@]} ] || die "PLATFORMS names a platform twice: $PLATFORMS"
fi
T0=$(now)
if [ -n "${RELEASE_DIST:-}" ]; then
  "$(dirname "$0")/ensure-packages.sh" containerd
elif $PRODUCT_ONLY; then
  "$(dirname "$0")/ensure-packages.sh" skopeo umoci
else
  "$(dirname "$0")/ensure-packages.sh"
fi
mkdir -p "$IMAGES_DIR/bin"
# One image build at a time (several people may run `make images`).
exec 9> "$IMAGES_DIR/.lock"
flock 9

# gobuild SRC DIR PKG NAME [OS/ARCH]: a static binary of SRC/DIR's PKG into
# $IMAGES_DIR/bin/NAME, for OS/ARCH (default: this machine's).
gobuild() {
  local goenv=()
  [ -z "${5:-}" ] || goenv=(GOOS="${5%/*}" GOARCH="${5#*/}")
  (cd "$1/$2" && env CGO_ENABLED=0 "${goenv[@]+"${goenv[@]}"}" go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/bin/$4" "$3")
}

# populate_* ROOTFS: fill an image's root filesystem.
populate_common() {
  mkdir -p "$1/etc" "$1/tmp"
  chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$1/etc/group"
}
populate_program() { # ROOTFS FILE: FILE is PROGRAM or PROGRAM-TAG
  populate_common "$1"
  install -D -m 0755 "$IMAGES_DIR/bin/$2" "$1/usr/local/bin/${2%%-*}"
}
populate_busybox() {
  populate_common "$1"
  mkdir -p "$1/bin"
  install -m 0755 /bin/busybox "$1/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$1/bin/$a"; done
}
populate_testtools() {
  populate_busybox "$1"
  mkdir -p "$1/data"
  install -m 0755 "$IMAGES_DIR/bin/nettool" "$1/bin/nettool"
}
populate_agnhost() {
  populate_busybox "$1"
  install -m 0755 "$K8S_BIN/agnhost" "$1/agnhost"
}
populate_pause() {
  install -m 0755 "$IMAGES_DIR/bin/pause" "$1/pause"
}

# storage_suite_images: the images of the storage e2e suite (--storage-suite):
# agnhost, and busybox under the names of the images of which the suite runs
# only a shell (those of $K8S_VERSION's manifest.go among BusyBox, Nginx and
# the image of its concurrent-access tests, JessieDnsutils or GlibcDnsTesting).
storage_suite_images() {
  local manifest id ref sh
  [ -x "$K8S_BIN/agnhost" ] || die "no $K8S_BIN/agnhost (run scripts/build-e2e-test.sh)"
  manifest=$(GOWORK=off go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/test/utils/image/manifest.go
  [ -f "$manifest" ] || die "no test/utils/image/manifest.go of k8s.io/kubernetes@$K8S_VERSION"
  # e2e_image ID: NAME:TAG of image ID in manifest.go, nothing if it has none.
  e2e_image() {
    sed -n "s/^[[:space:]]*configs\[$1\] = Config{list.PromoterE2eRegistry, \"\([^\"]*\)\", \"\([^\"]*\)\"}.*/\1:\2/p" "$manifest"
  }
  sh=(--config.cmd /bin/sh --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.workingdir /)
  for id in BusyBox Nginx JessieDnsutils GlibcDnsTesting; do
    ref=$(e2e_image "$id")
    [ -z "$ref" ] || image "e2e-${ref%%:*}" "hostpath.dev/e2e-test-images/$ref" populate_busybox /bin/busybox "${sh[@]}"
  done
  ref=$(e2e_image Agnhost)
  [ -n "$ref" ] || die "no Agnhost image in $manifest"
  image e2e-agnhost "hostpath.dev/e2e-test-images/$ref" populate_agnhost "/bin/busybox $K8S_BIN/agnhost" \
    --config.entrypoint /agnhost --config.cmd pause --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.workingdir /
}

# image FILE REF POPULATE INPUTS [umoci config flags...]: build REF into
# $IMAGES_DIR/FILE.tar unless INPUTS (space-separated files that go into the
# image), this script and the flags are unchanged since the last build.
built=()
image() {
  local file=$1 ref=$2 populate=$3 inputs=$4 key work
  shift 4
  # shellcheck disable=SC2086 # INPUTS is a list.
  key=$( {
    for f in $inputs "$0"; do sha256sum < "$f"; done
    echo "$ref $populate $*"
  } | sha256sum | cut -c1-64)
  built+=("$file")
  if [ -f "$IMAGES_DIR/$file.tar" ] && [ "$(cat "$IMAGES_DIR/$file.key" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  work=$(mktemp -d "$IMAGES_DIR/work-$file.XXXXXX")
  umoci init --layout "$work/oci"
  oci_image "$work/oci" img amd64 "$populate" "$file" "$@"
  skopeo copy --quiet "oci:$work/oci:img" "docker-archive:$work/image.tar:$ref"
  mv "$work/image.tar" "$IMAGES_DIR/$file.tar"
  echo "$key" > "$IMAGES_DIR/$file.key"
  rm -rf "$work"
  log "Built $ref ($(du -h "$IMAGES_DIR/$file.tar" | cut -f1))"
}

# oci_image LAYOUT NAME ARCH POPULATE FILE [umoci config flags...]: a new
# image NAME for linux/ARCH in the OCI layout LAYOUT, whose root filesystem
# POPULATE fills (with FILE).
oci_image() {
  local layout=$1 name=$2 arch=$3 populate=$4 file=$5 bundle
  shift 5
  bundle=$layout.bundle-$name
  rm -rf "$bundle"
  umoci new --image "$layout:$name"
  umoci unpack --rootless --image "$layout:$name" "$bundle" > /dev/null
  "$populate" "$bundle/rootfs" "$file"
  umoci repack --image "$layout:$name" "$bundle"
  umoci config --image "$layout:$name" --architecture "$arch" --os linux "$@"
  rm -rf "$bundle"
}

# product_index PROGRAM [umoci config flags...]: PROGRAM for every platform
# of PLATFORMS into the OCI layout $IMAGES_DIR/oci/PROGRAM-IMAGE_TAG: an
# image per platform and their index IMAGE_TAG (see the header), unless
# the binaries, this script and the flags are unchanged since the last
# build.
product_index() {
  local p=$1 layout=$IMAGES_DIR/oci/$1-$IMAGE_TAG plat name key work entries=() bins=()
  shift
  for plat in "${platforms[@]}"; do
    name=${plat//\//-}
    gobuild "$SOURCE_DIR" "$p" "./cmd/$p" "$p-$IMAGE_TAG-$name" "$plat"
    bins+=("$IMAGES_DIR/bin/$p-$IMAGE_TAG-$name")
  done
  key=$( {
    for f in "${bins[@]}" "$0"; do sha256sum < "$f"; done
    echo "$PLATFORMS $*"
  } | sha256sum | cut -c1-64)
  built+=("oci/$p-$IMAGE_TAG")
  if [ -f "$layout/index.json" ] && [ "$(cat "$layout.key" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  work=$(mktemp -d "$IMAGES_DIR/work-$p.XXXXXX")
  umoci init --layout "$work/oci"
  for plat in "${platforms[@]}"; do
    name=${plat//\//-}
    oci_image "$work/oci" "$name" "${plat#*/}" populate_program "$p-$IMAGE_TAG-$name" "$@"
    entries+=("$plat=$name")
  done
  umoci gc --layout "$work/oci"
  "$IMAGES_DIR/bin/ociindex" combine "$work/oci" "$IMAGE_TAG" "${entries[@]}" > "$work/digest"
  rm -rf "$layout"
  mkdir -p "$IMAGES_DIR/oci"
  mv "$work/oci" "$layout"
  echo "$key" > "$layout.key"
  log "Built hostpath.dev/$p:$IMAGE_TAG for ${PLATFORMS//,/, } ($(du -sh "$layout" | cut -f1)): index $(cat "$work/digest") in $layout"
  rm -rf "$work"
}

if [ -n "${RELEASE_DIST:-}" ]; then
  for f in "$RELEASE_DIST"/*-v*.oci.tar; do
    [ -f "$f" ] || die "no <program>-<version>.oci.tar in $RELEASE_DIST (make release makes them)"
    name=$(basename "$f" .tar)
    cp "$f" "$IMAGES_DIR/$name.tar.new"
    mv "$IMAGES_DIR/$name.tar.new" "$IMAGES_DIR/$name.tar"
    sha256sum < "$f" | cut -c1-64 > "$IMAGES_DIR/$name.key"
    built+=("$name")
  done
elif $STORAGE_SUITE; then
  storage_suite_images
else
  if ! $PRODUCT_ONLY; then
    gobuild "$REPO_ROOT" e2e ./cmd/pause pause
    gobuild "$REPO_ROOT" e2e ./cmd/nettool nettool
    image pause "$PAUSE_IMAGE" populate_pause "$IMAGES_DIR/bin/pause" \
      --config.entrypoint /pause --config.user 65535:65535
    image testtools hostpath.dev/testtools:dev populate_testtools "$IMAGES_DIR/bin/nettool /bin/busybox" \
      --config.cmd /bin/sh --config.env PATH=/bin --config.workingdir /
  fi
  if ! $BASE_ONLY; then
    [ "$SOURCE_DIR" = "$REPO_ROOT" ] || log "Building the product images $IMAGE_TAG from $SOURCE_DIR"
    [ ${#platforms[@]} -eq 0 ] || gobuild "$REPO_ROOT" tools ./cmd/ociindex ociindex
    for p in "${PRODUCT_PROGRAMS[@]}"; do
      if [ ! -f "$SOURCE_DIR/$p/cmd/$p/main.go" ]; then
        log "Skipping hostpath.dev/$p:$IMAGE_TAG: $p/cmd/$p/main.go does not exist in $SOURCE_DIR"
        continue
      fi
      user=65532:65532
      [ "$p" = manager ] && user=0:0
      flags=(--config.entrypoint "/usr/local/bin/$p" --config.user "$user" --config.workingdir /)
      if [ ${#platforms[@]} -gt 0 ]; then
        product_index "$p" "${flags[@]}"
        continue
      fi
      file=$p
      [ "$IMAGE_TAG" = dev ] || file=$p-$IMAGE_TAG
      gobuild "$SOURCE_DIR" "$p" "./cmd/$p" "$file"
      image "$file" "hostpath.dev/$p:$IMAGE_TAG" populate_program "$IMAGES_DIR/bin/$file" "${flags[@]}"
    done
  fi
fi
log "Images ready in $IMAGES_DIR after $(since "$T0")s: ${built[*]}"
$BASE_ONLY && exit 0
$PRODUCT_ONLY && exit 0

# Import into every running node, in parallel, what the node does not have
# yet (import_images in cluster-lib.sh: each node keeps the keys of its
# imported images; node-start.sh imports the cached images the same way).
pids=()
for n in $(node_numbers); do
  pid_alive "containerd-$n" || continue
  import_images "$n" "${built[@]}" &
  pids+=($!)
done
for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" || die "import failed"; done
if [ ${#pids[@]} -eq 0 ]; then
  log "No running node: images not imported (cluster-up.sh imports the cached images)"
else
  log "Images up to date in ${#pids[@]} node(s) after $(since "$T0")s"
  log "Running pods keep their old image: restart them (kubectl rollout restart) to use a new one"
fi
