//go:build linux

package quota

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// btrfs constants of snapshots, of include/uapi/linux/btrfs.h and
// btrfs_tree.h.
const (
	// sizeofVolArgsV2 is the size of struct btrfs_ioctl_vol_args_v2.
	sizeofVolArgsV2 = 4096
	// btrfsRootTreeObjectID is BTRFS_ROOT_TREE_OBJECTID, the tree of
	// subvolumes.
	btrfsRootTreeObjectID = 1
	// btrfsRootRefKey is BTRFS_ROOT_REF_KEY: an item of the root tree with
	// key (subvolume, 156, subvolume inside it).
	btrfsRootRefKey = 156
	// BTRFS_IOC_SNAP_DESTROY = _IOW(0x94, 15, struct btrfs_ioctl_vol_args)
	iocSnapDestroy = iocWrite<<iocDirShift | sizeofVolArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 15<<iocNRShift
	// BTRFS_IOC_SNAP_CREATE_V2 = _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2)
	iocSnapCreateV2 = iocWrite<<iocDirShift | sizeofVolArgsV2<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 23<<iocNRShift
)

// volArgsV2 is struct btrfs_ioctl_vol_args_v2, with no flags: a writable
// snapshot, no qgroup to inherit.
type volArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64  // union with size and qgroup_inherit
	name    [4040]byte // BTRFS_SUBVOL_NAME_MAX + 1
}

var _ Snapshotter = &btrfsEnforcer{}

// Snapshot snapshots the subvolume src as dst and gives the snapshot the
// qgroup 1/ID limited to limitBytes, ID being its subvolume ID. On failure
// after the snapshot was made, it deletes it again (BTRFS_IOC_SNAP_DESTROY,
// as it holds the source's files).
func (b *btrfsEnforcer) Snapshot(root *os.Root, src, dst string, limitBytes int64) (uint64, error) {
	if limitBytes <= 0 {
		return 0, fmt.Errorf("snapshot %q as %q: limit %d is not positive", src, dst, limitBytes)
	}
	if err := checkName(src); err != nil {
		return 0, err
	}
	parent, name, err := openParent(root, dst)
	if err != nil {
		return 0, err
	}
	defer parent.Close()
	source, err := openSource(root, src)
	if err != nil {
		return 0, err
	}
	defer source.Close()
	if err := snapshotSubvolume(parent, name, source); err != nil {
		return 0, fmt.Errorf("snapshot btrfs subvolume %q as %q: %w", src, dst, err)
	}
	id, err := limitSnapshot(parent, name, dst, limitBytes)
	if err != nil {
		if derr := destroySubvolume(parent, name); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete btrfs snapshot %q again: %w", dst, derr))
		}
		return 0, err
	}
	return id, nil
}

// openSource opens the volume src of root, without following a symlink,
// and checks that it can be snapshotted: a subvolume of its own without
// subvolumes inside (ErrNotSubvolume).
func openSource(root *os.Root, src string) (*os.File, error) {
	pool, err := openDir(root, ".")
	if err != nil {
		return nil, fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	dir, err := openAt(pool, src)
	if err != nil {
		return nil, fmt.Errorf("open btrfs subvolume %q: %w", src, err)
	}
	id, err := subvolumeID(dir)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("%w: %q: %w", ErrNotSubvolume, src, err)
	}
	nested, err := hasSubvolumes(dir, id)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("look for subvolumes inside btrfs subvolume %q: %w", src, err)
	}
	if nested {
		dir.Close()
		return nil, fmt.Errorf("%w: %q holds subvolumes of its own, which a snapshot would leave out", ErrNotSubvolume, src)
	}
	return dir, nil
}

// openParent opens the directory that holds path in root, one component
// at a time without following symlinks, and returns it with the last
// component of path.
func openParent(root *os.Root, path string) (*os.File, string, error) {
	parts := strings.Split(path, "/")
	for _, p := range parts {
		if err := checkName(p); err != nil {
			return nil, "", fmt.Errorf("path %q: %w", path, err)
		}
	}
	dir, err := openDir(root, ".")
	if err != nil {
		return nil, "", fmt.Errorf("open pool directory: %w", err)
	}
	for _, p := range parts[:len(parts)-1] {
		next, err := openAt(dir, p)
		dir.Close()
		if err != nil {
			return nil, "", fmt.Errorf("open directory %q of %q: %w", p, path, err)
		}
		dir = next
	}
	return dir, parts[len(parts)-1], nil
}

// openAt opens the directory name of dir read-only, failing on a symlink
// (ELOOP) and on anything but a directory.
func openAt(dir *os.File, name string) (*os.File, error) {
	conn, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	if err := conn.Control(func(d uintptr) {
		fd, oerr = unix.Openat(int(d), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, oerr
	}
	return os.NewFile(uintptr(fd), dir.Name()+"/"+name), nil
}

// hasSubvolumes reports whether the subvolume dir, ID id, holds
// subvolumes: whether the root tree has a ROOT_REF item of id.
func hasSubvolumes(dir *os.File, id uint64) (bool, error) {
	args := searchArgs{key: searchKey{
		treeID:      btrfsRootTreeObjectID,
		minObjectID: id,
		maxObjectID: id,
		minType:     btrfsRootRefKey,
		maxType:     btrfsRootRefKey,
		maxOffset:   ^uint64(0),
		maxTransID:  ^uint64(0),
		nrItems:     1,
	}}
	if err := ioctl(dir, iocTreeSearch, unsafe.Pointer(&args)); err != nil {
		return false, fmt.Errorf("search the btrfs root tree: %w", err)
	}
	return args.key.nrItems > 0, nil
}

// snapshotSubvolume makes name in the directory parent a writable
// snapshot of the subvolume source.
func snapshotSubvolume(parent *os.File, name string, source *os.File) error {
	var args volArgsV2
	if len(name) >= len(args.name) {
		return unix.ENAMETOOLONG
	}
	copy(args.name[:], name)
	conn, err := source.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := conn.Control(func(fd uintptr) {
		args.fd = int64(fd)
		ierr = ioctl(parent, iocSnapCreateV2, unsafe.Pointer(&args))
	}); err != nil {
		return err
	}
	return ierr
}

// destroySubvolume deletes the subvolume name of the directory parent,
// with what it holds.
func destroySubvolume(parent *os.File, name string) error {
	var args volArgs
	if len(name) >= len(args.name) {
		return unix.ENAMETOOLONG
	}
	copy(args.name[:], name)
	return ioctl(parent, iocSnapDestroy, unsafe.Pointer(&args))
}

// limitSnapshot gives the new snapshot name of parent (dst, for messages)
// the qgroup 1/ID limited to limitBytes and returns its ID. On failure, it
// releases the qgroup it made.
func limitSnapshot(parent *os.File, name, dst string, limitBytes int64) (uint64, error) {
	dir, err := openAt(parent, name)
	if err != nil {
		return 0, fmt.Errorf("open new btrfs snapshot %q: %w", dst, err)
	}
	defer dir.Close()
	id, err := subvolumeID(dir)
	if err != nil {
		return 0, fmt.Errorf("btrfs snapshot %q: %w", dst, err)
	}
	if err := setUp(parent, dst, id, limitBytes); err != nil {
		if rerr := release(parent, id); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return 0, err
	}
	return id, nil
}
