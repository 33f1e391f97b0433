#!/usr/bin/env bash
# push.sh REGISTRY: build the three product images (images.sh --product: OCI
# tarballs in .cache/images/, no Docker) and push them with skopeo to
#
#   REGISTRY/manager:TAG  REGISTRY/provisioner:TAG  REGISTRY/hostdefiner:TAG
#
# REGISTRY is HOST[:PORT][/PATH], e.g. registry.example.com/hostpath or
# 127.0.0.1:5000/hostpath (`make push REGISTRY=...`). TAG is IMAGE_TAG
# (default dev), as images.sh; SOURCE_DIR works as there too.
# REGISTRY_TLS_VERIFY=false pushes to a registry served in plain HTTP or
# with a certificate this machine does not trust. Credentials are skopeo's:
# `skopeo login HOST` first (REGISTRY_AUTH_FILE names another auth file).
# At the end it prints the kustomize `images:` block that points the
# manifests at the pushed images (docs/install.md).
#
# PLATFORMS=linux/amd64,linux/arm64 (images.sh lists the others) builds
# and pushes multi-platform images: each REGISTRY/<program>:TAG is then an
# OCI image index of one image per platform (skopeo copy --all from the OCI
# layout images.sh builds), which nodes of every named platform pull. With
# one platform, that platform's image alone is pushed; without PLATFORMS,
# the linux/amd64 image of the docker-archive tarball.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

REGISTRY=${1:-${REGISTRY:-}}
[ -n "$REGISTRY" ] || die "usage: push.sh REGISTRY (or make push REGISTRY=HOST[:PORT]/PATH)"
REGISTRY=${REGISTRY%/}
[[ $REGISTRY =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
  die "REGISTRY $REGISTRY is not HOST[:PORT][/PATH] (a lower-case path, no scheme)"
IMAGE_TAG=${IMAGE_TAG:-dev}
export IMAGE_TAG
TLS_VERIFY=${REGISTRY_TLS_VERIFY:-true}
case $TLS_VERIFY in true | false) ;; *) die "REGISTRY_TLS_VERIFY is true or false, not $TLS_VERIFY" ;; esac

"$(dirname "$0")/images.sh" --product
images=$CACHE_DIR/images
platforms=()
[ -z "${PLATFORMS:-}" ] || IFS=, read -ra platforms <<< "$PLATFORMS"
auth=()
[ -z "${REGISTRY_AUTH_FILE:-}" ] || auth=(--dest-authfile "$REGISTRY_AUTH_FILE")
for p in "${PRODUCT_PROGRAMS[@]}"; do
  # What images.sh built: the tarball, one platform's image, or the index.
  file=$images/oci/$p-$IMAGE_TAG
  case ${#platforms[@]} in
  0)
    file=$images/$p.tar
    [ "$IMAGE_TAG" = dev ] || file=$images/$p-$IMAGE_TAG.tar
    src=docker-archive:$file what="hostpath.dev/$p:$IMAGE_TAG"
    ;;
  1) src=oci:$file:${platforms[0]//\//-} what="hostpath.dev/$p:$IMAGE_TAG for ${platforms[0]}" ;;
  *) src=oci:$file:$IMAGE_TAG what="hostpath.dev/$p:$IMAGE_TAG for ${PLATFORMS//,/, } (an image index)" ;;
  esac
  [ -e "$file" ] || die "no $file: images.sh --product did not build it"
  log "Pushing $what to $REGISTRY/$p:$IMAGE_TAG"
  skopeo copy --quiet --all --dest-tls-verify="$TLS_VERIFY" "${auth[@]+"${auth[@]}"}" \
    "$src" "docker://$REGISTRY/$p:$IMAGE_TAG" ||
    die "push to $REGISTRY failed (above). A registry in plain HTTP, or with a certificate this machine does not trust: REGISTRY_TLS_VERIFY=false. One that asks for a login: skopeo login ${REGISTRY%%/*}"
done
log "Pushed. In your kustomization (docs/install.md):"
cat <<EOF
images:
- {name: hostpath.dev/manager, newName: $REGISTRY/manager, newTag: $IMAGE_TAG}
- {name: hostpath.dev/provisioner, newName: $REGISTRY/provisioner, newTag: $IMAGE_TAG}
- {name: hostpath.dev/hostdefiner, newName: $REGISTRY/hostdefiner, newTag: $IMAGE_TAG}
EOF
