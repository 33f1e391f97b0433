#!/usr/bin/env bash
# quota-pool.sh: a storage pool on a filesystem that enforces volume sizes,
# on the local cluster's real nodes, for the size tests and for trying
# enforced sizes (docs/volumes.md, "Sizes"). FS is btrfs (simple quotas; the default),
# xfs or ext4 (project quotas: mounted with prjquota, which needs a kernel
# with quota support). On each node: a sparse image file
# .cluster/quota-pools/<node>-FS.img (QUOTA_POOL_SIZE, default 1G), loop-mounted
# on this machine at .cluster/nodes/<node>/hppools/FS (where tests look at
# the disk) and, inside the node's mount namespace, at /var/hppools/FS: the
# pool FS under the manager's --pool-root, which the manager sees through its
# HostToContainer mount. btrfs simple quotas are enabled with
# e2e/cmd/btrfsquota (Debian bookworm's btrfs-progs 6.2 predates `btrfs quota
# enable --simple`). The manager needs CAP_SYS_ADMIN to set quotas: install
# the btrfs variant (manifests/components/btrfs; the e2e suite installs it).
#
#   scripts/quota-pool.sh up [--fs FS] [N...]     mount it on nodes N (numbers or names; default: every real node)
#   scripts/quota-pool.sh down [--fs FS] [N...]   unmount it and remove the images
#   scripts/quota-pool.sh ro|rw [--fs FS] [N...]  remount its filesystem read-only (as after a
#                                                 disk error) or read-write again
#   scripts/quota-pool.sh unplug [--fs FS] [N...] unmount it and remove its directory, keeping the
#                                                 image (a disk gone); up plugs it back, data and all
#   scripts/quota-pool.sh status [--fs FS]
#
# cluster-down.sh removes whatever is left (it unmounts everything under
# .cluster/; the loop devices detach with their last mount).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

SIZE=${QUOTA_POOL_SIZE:-1G}
IMG_DIR=$CLUSTER_DIR/quota-pools
BIN=$CACHE_DIR/bin/btrfsquota

require_root
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"

# in_node N CMD...: run CMD in node N's mount namespace (through its kubelet).
in_node() {
  local n=$1 pid
  shift
  pid_alive "kubelet-$n" || die "node $(node_name "$n") is not running"
  read -r pid _ < "$RUN_DIR/kubelet-$n.pid"
  nsenter --mount="/proc/$pid/ns/mnt" -- "$@"
}

# mkfs_pool IMG: a new filesystem of type $FS in the image file IMG.
mkfs_pool() {
  case $FS in
  btrfs) mkfs.btrfs -q -f "$1" > /dev/null ;;
  xfs) mkfs.xfs -q -f "$1" ;;
  ext4) mkfs.ext4 -q -F -O project,quota "$1" ;;
  esac
}

# mount_options: what the pool is mounted with.
mount_options() {
  case $FS in
  btrfs) echo loop,commit=5 ;; # usage counts at each commit: every 5 s, not 30
  *) echo loop,prjquota ;;
  esac
}

up() {
  local n=$1 name img mp dev
  name=$(node_name "$n")
  img=$IMG_DIR/$name-$FS.img
  mp=$(node_dir "$n")/hppools/$POOL
  mkdir -p "$IMG_DIR" "$mp"
  if ! mountpoint -q "$mp"; then
    # An image left by unplug is mounted again, with its data.
    if [ ! -f "$img" ]; then
      truncate -s "$SIZE" "$img"
      mkfs_pool "$img"
    fi
    mount -o "$(mount_options)" "$img" "$mp" ||
      die "mount -o $(mount_options) of a new $FS failed (a kernel without quota support refuses prjquota)"
  fi
  if [ "$FS" = btrfs ]; then "$BIN" "$mp"; fi
  dev=$(findmnt -n -o SOURCE --mountpoint "$mp")
  # The same block device mounted again shares its superblock: the node
  # and this machine see one filesystem.
  if ! in_node "$n" mountpoint -q "/var/hppools/$POOL"; then
    in_node "$n" mkdir -p "/var/hppools/$POOL"
    in_node "$n" mount "$dev" "/var/hppools/$POOL"
  fi
  log "$FS pool $POOL on $name: $dev ($SIZE, with quotas) at /var/hppools/$POOL, on this machine at $mp"
}

# unmount N: unmount the pool on node N and on this machine.
unmount() {
  local n=$1 mp
  mp=$(node_dir "$n")/hppools/$POOL
  if pid_alive "kubelet-$n" && in_node "$n" mountpoint -q "/var/hppools/$POOL"; then
    in_node "$n" umount "/var/hppools/$POOL" || in_node "$n" umount -l "/var/hppools/$POOL"
  fi
  if mountpoint -q "$mp"; then umount "$mp" || umount -l "$mp"; fi
}

down() {
  local n=$1 name
  name=$(node_name "$n")
  unmount "$n"
  rm -f "$IMG_DIR/$name-$FS.img"
  log "$FS pool $POOL removed from $name"
}

# unplug N: the pool's disk is gone from node N: unmounted, and its
# directory (the node's /var/hppools/$POOL) removed; the image stays.
unplug() {
  local n=$1 name mp
  name=$(node_name "$n")
  mp=$(node_dir "$n")/hppools/$POOL
  [ -f "$IMG_DIR/$name-$FS.img" ] || die "no $FS pool on $name"
  unmount "$n"
  rmdir "$mp" 2> /dev/null || [ ! -e "$mp" ] || die "$mp is not empty once unmounted"
  log "$FS pool $POOL unplugged from $name (scripts/quota-pool.sh up plugs it back)"
}

# remount N ro|rw: remount the pool's filesystem (its superblock: every
# mount of it, on the node and here) read-only or read-write.
remount() {
  local n=$1 mode=$2 mp
  mp=$(node_dir "$n")/hppools/$POOL
  mountpoint -q "$mp" || die "no $FS pool mounted on $(node_name "$n")"
  mount -o "remount,$mode" "$mp"
  log "$FS pool $POOL on $(node_name "$n") remounted $mode"
}

cmd=${1:-}
shift || true
FS=btrfs
if [ "${1:-}" = --fs ]; then
  FS=${2:?--fs needs btrfs, xfs or ext4}
  shift 2
fi
case $FS in btrfs | xfs | ext4) ;; *) die "--fs $FS: want btrfs, xfs or ext4" ;; esac
POOL=$FS
# Nodes by number (1) or name (hostpath-node-1).
nodes=("${@#"$NODE_PREFIX"}")
[ ${#nodes[@]} -gt 0 ] || read -ra nodes <<< "$(node_numbers)"
for n in "${nodes[@]}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "$n: want a node number or name (${NODE_PREFIX}N)"; done
case $cmd in
up)
  command -v "mkfs.$FS" > /dev/null || die "mkfs.$FS not found: scripts/ensure-packages.sh installs btrfs-progs, xfsprogs and e2fsprogs"
  mkdir -p "$(dirname "$BIN")"
  (cd "$REPO_ROOT/e2e" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/btrfsquota)
  for n in "${nodes[@]}"; do up "$n"; done
  ;;
down)
  for n in "${nodes[@]}"; do down "$n"; done
  rmdir "$IMG_DIR" 2> /dev/null || true
  ;;
ro | rw)
  for n in "${nodes[@]}"; do remount "$n" "$cmd"; done
  ;;
unplug)
  for n in "${nodes[@]}"; do unplug "$n"; done
  ;;
status)
  for n in "${nodes[@]}"; do
    mp=$(node_dir "$n")/hppools/$POOL
    if mountpoint -q "$mp"; then
      echo "$(node_name "$n"): $(findmnt -n -o SOURCE --mountpoint "$mp") at $mp; $(df -h --output=used,size "$mp" | tail -1)"
    else
      echo "$(node_name "$n"): no $FS pool"
    fi
  done
  ;;
*) die "usage: quota-pool.sh up|down|ro|rw|unplug|status [--fs btrfs|xfs|ext4] [N...]" ;;
esac
