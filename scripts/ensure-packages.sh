#!/usr/bin/env bash
# ensure-packages.sh [PACKAGE...]: install the Debian packages the local
# cluster and the image build need (or only those named), running `apt-get
# update` once and only when one is missing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PACKAGES=(containerd runc containernetworking-plugins busybox-static skopeo umoci
  iptables conntrack socat openssl curl util-linux iproute2 ca-certificates btrfs-progs xfsprogs e2fsprogs)
[ $# -eq 0 ] || PACKAGES=("$@")
missing=()
for p in "${PACKAGES[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" -eq 0 ] || die "missing packages ${missing[*]}: run as root (apt-get install)"
log "Installing ${missing[*]} with apt"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "Installed ${missing[*]}"
