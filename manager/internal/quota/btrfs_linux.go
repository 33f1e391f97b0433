//go:build linux

package quota

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// btrfs constants of include/uapi/linux/btrfs.h and btrfs_tree.h.
const (
	btrfsIoctlMagic = 0x94
	// btrfsFirstFreeObjectID is BTRFS_FIRST_FREE_OBJECTID, the inode
	// number of a subvolume's top directory.
	btrfsFirstFreeObjectID = 256
	// btrfsQuotaCtlEnableSimple is BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA.
	btrfsQuotaCtlEnableSimple = 4
	// btrfsQgroupLimitMaxRfer is BTRFS_QGROUP_LIMIT_MAX_RFER.
	btrfsQgroupLimitMaxRfer = 1 << 0
	// btrfsQgroupLevelShift is BTRFS_QGROUP_LEVEL_SHIFT: a qgroup ID is
	// level<<48 | id.
	btrfsQgroupLevelShift = 48
	// btrfsQuotaTreeObjectID is BTRFS_QUOTA_TREE_OBJECTID, the tree of
	// qgroups.
	btrfsQuotaTreeObjectID = 8
	// btrfsQgroupRelationKey is BTRFS_QGROUP_RELATION_KEY: an item of the
	// quota tree with key (qgroup, 246, related qgroup), stored both ways.
	btrfsQgroupRelationKey = 246
)

// Sizes of the uapi structs, used in the ioctl numbers.
const (
	sizeofVolArgs          = 4096 // struct btrfs_ioctl_vol_args
	sizeofInoLookupArgs    = 4096 // struct btrfs_ioctl_ino_lookup_args
	sizeofSearchArgs       = 4096 // struct btrfs_ioctl_search_args
	sizeofSearchKey        = 104  // struct btrfs_ioctl_search_key
	sizeofSearchHeader     = 32   // struct btrfs_ioctl_search_header
	sizeofFSInfoArgs       = 1024 // struct btrfs_ioctl_fs_info_args
	sizeofQuotaCtlArgs     = 16   // struct btrfs_ioctl_quota_ctl_args
	sizeofQgroupAssignArgs = 24   // struct btrfs_ioctl_qgroup_assign_args
	sizeofQgroupCreateArgs = 16   // struct btrfs_ioctl_qgroup_create_args
	sizeofQgroupLimitArgs  = 48   // struct btrfs_ioctl_qgroup_limit_args
)

// btrfs ioctl request numbers.
const (
	// BTRFS_IOC_SUBVOL_CREATE = _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	iocSubvolCreate = iocWrite<<iocDirShift | sizeofVolArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 14<<iocNRShift
	// BTRFS_IOC_TREE_SEARCH = _IOWR(0x94, 17, struct btrfs_ioctl_search_args)
	iocTreeSearch = (iocRead|iocWrite)<<iocDirShift | sizeofSearchArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 17<<iocNRShift
	// BTRFS_IOC_INO_LOOKUP = _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args)
	iocInoLookup = (iocRead|iocWrite)<<iocDirShift | sizeofInoLookupArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 18<<iocNRShift
	// BTRFS_IOC_FS_INFO = _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)
	iocFSInfo = iocRead<<iocDirShift | sizeofFSInfoArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 31<<iocNRShift
	// BTRFS_IOC_QUOTA_CTL = _IOWR(0x94, 40, struct btrfs_ioctl_quota_ctl_args)
	iocQuotaCtl = (iocRead|iocWrite)<<iocDirShift | sizeofQuotaCtlArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 40<<iocNRShift
	// BTRFS_IOC_QGROUP_ASSIGN = _IOW(0x94, 41, struct btrfs_ioctl_qgroup_assign_args)
	iocQgroupAssign = iocWrite<<iocDirShift | sizeofQgroupAssignArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 41<<iocNRShift
	// BTRFS_IOC_QGROUP_CREATE = _IOW(0x94, 42, struct btrfs_ioctl_qgroup_create_args)
	iocQgroupCreate = iocWrite<<iocDirShift | sizeofQgroupCreateArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 42<<iocNRShift
	// BTRFS_IOC_QGROUP_LIMIT = _IOR(0x94, 43, struct btrfs_ioctl_qgroup_limit_args)
	iocQgroupLimit = iocRead<<iocDirShift | sizeofQgroupLimitArgs<<iocSizeShift | btrfsIoctlMagic<<iocTypeShift | 43<<iocNRShift
)

// volArgs is struct btrfs_ioctl_vol_args.
type volArgs struct {
	fd   int64
	name [4088]byte // BTRFS_PATH_NAME_MAX + 1
}

// inoLookupArgs is struct btrfs_ioctl_ino_lookup_args.
type inoLookupArgs struct {
	treeID   uint64
	objectID uint64
	name     [4080]byte // BTRFS_INO_LOOKUP_PATH_MAX
}

// searchKey is struct btrfs_ioctl_search_key.
type searchKey struct {
	treeID      uint64
	minObjectID uint64
	maxObjectID uint64
	minOffset   uint64
	maxOffset   uint64
	minTransID  uint64
	maxTransID  uint64
	minType     uint32
	maxType     uint32
	nrItems     uint32
	unused      uint32
	unused1     [4]uint64
}

// searchArgs is struct btrfs_ioctl_search_args.
type searchArgs struct {
	key searchKey
	buf [sizeofSearchArgs - sizeofSearchKey]byte
}

// searchHeader is struct btrfs_ioctl_search_header, which precedes each
// item in searchArgs.buf.
type searchHeader struct {
	transID  uint64
	objectID uint64
	offset   uint64
	typ      uint32
	len      uint32
}

// fsInfoArgs is struct btrfs_ioctl_fs_info_args.
type fsInfoArgs struct {
	maxID          uint64
	numDevices     uint64
	fsid           [16]byte
	nodesize       uint32
	sectorsize     uint32
	cloneAlignment uint32
	csumType       uint16
	csumSize       uint16
	flags          uint64
	generation     uint64
	metadataUUID   [16]byte
	reserved       [944]byte
}

// quotaCtlArgs is struct btrfs_ioctl_quota_ctl_args.
type quotaCtlArgs struct {
	cmd    uint64
	status uint64
}

// qgroupAssignArgs is struct btrfs_ioctl_qgroup_assign_args.
type qgroupAssignArgs struct {
	assign uint64
	src    uint64
	dst    uint64
}

// qgroupCreateArgs is struct btrfs_ioctl_qgroup_create_args.
type qgroupCreateArgs struct {
	create   uint64
	qgroupID uint64
}

// qgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args, with struct
// btrfs_qgroup_limit inlined.
type qgroupLimitArgs struct {
	qgroupID uint64
	flags    uint64
	maxRfer  uint64
	maxExcl  uint64
	rsvRfer  uint64
	rsvExcl  uint64
}

// qgroupID returns the ID of the qgroup level/id.
func qgroupID(level, id uint64) uint64 { return level<<btrfsQgroupLevelShift | id }

// EnableSimpleQuotas enables btrfs simple quotas (squota, Linux 6.7) on
// the filesystem of dir, as btrfs quota enable --simple does; it needs
// CAP_SYS_ADMIN. Where they are enabled already, it does nothing. The
// kernel ignores the request where full qgroup accounting is enabled: then
// EnableSimpleQuotas fails, as quotas must be disabled first.
func EnableSimpleQuotas(dir *os.File) error {
	args := quotaCtlArgs{cmd: btrfsQuotaCtlEnableSimple}
	if err := ioctl(dir, iocQuotaCtl, unsafe.Pointer(&args)); err != nil {
		return fmt.Errorf("enable btrfs simple quotas on %s: %w", dir.Name(), err)
	}
	fsid, err := btrfsFSID(dir)
	if err != nil {
		return nil // enabled, as far as the kernel said
	}
	mode, err := btrfsSysfs{dir: filepath.Join(btrfsSysfsRoot, fsid)}.quotaMode()
	if err != nil || mode == btrfsModeSimple {
		return nil
	}
	return fmt.Errorf("enable btrfs simple quotas on %s: quotas are in mode %q already; disable them first (btrfs quota disable)", dir.Name(), mode)
}

// btrfsFSID returns the fsid of the btrfs filesystem of f, which names its
// sysfs directory, in the lower-case form with dashes.
func btrfsFSID(f *os.File) (string, error) {
	var args fsInfoArgs
	if err := ioctl(f, iocFSInfo, unsafe.Pointer(&args)); err != nil {
		return "", fmt.Errorf("BTRFS_IOC_FS_INFO: %w", err)
	}
	u := args.fsid
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// createSubvolume creates the subvolume name in the directory parent.
func createSubvolume(parent *os.File, name string) error {
	var args volArgs
	if len(name) >= len(args.name) {
		return unix.ENAMETOOLONG
	}
	copy(args.name[:], name)
	return ioctl(parent, iocSubvolCreate, unsafe.Pointer(&args))
}

// subvolumeID returns the ID of the subvolume whose top directory is dir,
// and fails unless dir is the top directory of a subvolume.
func subvolumeID(dir *os.File) (uint64, error) {
	var st unix.Stat_t
	if err := statFile(dir, &st); err != nil {
		return 0, err
	}
	if st.Ino != btrfsFirstFreeObjectID {
		return 0, errors.New("not a btrfs subvolume")
	}
	args := inoLookupArgs{objectID: btrfsFirstFreeObjectID}
	if err := ioctl(dir, iocInoLookup, unsafe.Pointer(&args)); err != nil {
		return 0, fmt.Errorf("look up subvolume ID: %w", err)
	}
	return args.treeID, nil
}

// statFile stats the open file f.
func statFile(f *os.File, st *unix.Stat_t) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := conn.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), st) }); err != nil {
		return err
	}
	return serr
}

// createQgroup creates (create true) or destroys the qgroup qgroupid.
func createQgroup(f *os.File, qgroupid uint64, create bool) error {
	args := qgroupCreateArgs{qgroupID: qgroupid}
	if create {
		args.create = 1
	}
	return ioctl(f, iocQgroupCreate, unsafe.Pointer(&args))
}

// assignQgroup makes (assign true) or removes the relation src to its
// parent dst.
func assignQgroup(f *os.File, src, dst uint64, assign bool) error {
	args := qgroupAssignArgs{src: src, dst: dst}
	if assign {
		args.assign = 1
	}
	return ioctl(f, iocQgroupAssign, unsafe.Pointer(&args))
}

// qgroupMembers lists the qgroups of level 0 that are members of the
// qgroup parent, from the relation items of the quota tree.
func qgroupMembers(f *os.File, parent uint64) ([]uint64, error) {
	var members []uint64
	args := searchArgs{key: searchKey{
		treeID:      btrfsQuotaTreeObjectID,
		minObjectID: parent,
		maxObjectID: parent,
		minType:     btrfsQgroupRelationKey,
		maxType:     btrfsQgroupRelationKey,
		minOffset:   0,
		maxOffset:   qgroupID(1, 0) - 1, // level 0 only: not the parents of parent
		maxTransID:  ^uint64(0),
	}}
	for {
		args.key.nrItems = 4096
		if err := ioctl(f, iocTreeSearch, unsafe.Pointer(&args)); err != nil {
			return nil, fmt.Errorf("search the btrfs quota tree: %w", err)
		}
		if args.key.nrItems == 0 {
			return members, nil
		}
		pos := 0
		var last uint64
		for range args.key.nrItems {
			if pos+sizeofSearchHeader > len(args.buf) {
				return nil, errors.New("search the btrfs quota tree: truncated result")
			}
			h := parseSearchHeader(args.buf[pos : pos+sizeofSearchHeader])
			pos += sizeofSearchHeader + int(h.len)
			last = h.offset
			if h.objectID == parent && h.typ == btrfsQgroupRelationKey {
				members = append(members, h.offset)
			}
		}
		if last == args.key.maxOffset {
			return members, nil
		}
		args.key.minOffset = last + 1
	}
}

// parseSearchHeader decodes a struct btrfs_ioctl_search_header, which
// need not be aligned in the buffer.
func parseSearchHeader(b []byte) searchHeader {
	e := binary.NativeEndian
	return searchHeader{
		transID:  e.Uint64(b[0:]),
		objectID: e.Uint64(b[8:]),
		offset:   e.Uint64(b[16:]),
		typ:      e.Uint32(b[24:]),
		len:      e.Uint32(b[28:]),
	}
}

// limitQgroup limits the referenced bytes of the qgroup qgroupid.
func limitQgroup(f *os.File, qgroupid uint64, limitBytes int64) error {
	args := qgroupLimitArgs{qgroupID: qgroupid, flags: btrfsQgroupLimitMaxRfer, maxRfer: uint64(limitBytes)}
	return ioctl(f, iocQgroupLimit, unsafe.Pointer(&args))
}

// detectBtrfs returns the enforcer of the btrfs pool whose directory is
// pool.
func detectBtrfs(root *os.Root, pool *os.File, e env) Enforcer {
	fsid, err := e.btrfsFSID(pool)
	if err != nil {
		return notEnforced("cannot read the btrfs filesystem ID of %s: %v", root.Name(), err)
	}
	s := btrfsSysfs{dir: filepath.Join(e.sysfs, fsid)}
	mode, err := s.quotaMode()
	if err != nil {
		return notEnforced("cannot read the btrfs quota state of %s from sysfs: %v", root.Name(), err)
	}
	if reason := btrfsModeReason(mode, root.Name()); reason != "" {
		return notEnforced("%s", reason)
	}
	if ok, err := hasCapSysAdmin(e.procStatus); err != nil {
		return notEnforced("cannot read the manager's capabilities: %v", err)
	} else if !ok {
		return notEnforced("setting btrfs qgroups needs CAP_SYS_ADMIN: install the manager's btrfs variant")
	}
	return &btrfsEnforcer{sysfs: s}
}

// btrfsModeReason says why a btrfs filesystem in quota mode mode (as
// btrfsSysfs.quotaMode reports it) at path does not enforce sizes, or
// returns "" when it does.
func btrfsModeReason(mode, path string) string {
	const enable = "btrfs-progs >= 6.7, kernel >= 6.7"
	switch mode {
	case btrfsModeSimple:
		return ""
	case btrfsModeOff:
		return fmt.Sprintf("btrfs quotas are not enabled on this filesystem: btrfs quota enable --simple %s (%s)", path, enable)
	case btrfsModeFull, btrfsModeLegacy:
		return fmt.Sprintf("btrfs quotas are in full qgroup mode, where a subvolume a pod creates inside its volume escapes its limit: switch to simple quotas with btrfs quota disable %s; btrfs quota enable --simple %s (%s)", path, path, enable)
	}
	return fmt.Sprintf("btrfs quotas are in an unknown mode %q; only simple quotas (squota) are supported", mode)
}

// btrfsEnforcer gives each volume a subvolume whose limit is on the
// level-1 qgroup 1/ID, ID being the subvolume's ID.
type btrfsEnforcer struct {
	// sysfs is the filesystem's sysfs directory, read for usage.
	sysfs btrfsSysfs
}

var _ Enforcer = &btrfsEnforcer{}

// Support reports KindBtrfs.
func (b *btrfsEnforcer) Support() Support { return Support{Kind: KindBtrfs} }

// Make creates the subvolume name, owner-only, the qgroup 1/ID carrying
// the limit, and assigns the subvolume's qgroup 0/ID to it. A qgroup 1/ID
// that already exists is taken over: subvolume IDs are only reused after
// the subvolume was deleted, and 1/ID is this package's by convention.
func (b *btrfsEnforcer) Make(root *os.Root, name string, limitBytes int64) (uint64, error) {
	pool, err := openPoolFor(root, name, limitBytes)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if err := createSubvolume(pool, name); err != nil {
		return 0, fmt.Errorf("create btrfs subvolume %q: %w", name, err)
	}
	id, err := b.limitNew(root, pool, name, limitBytes)
	if err != nil {
		if rerr := root.Remove(name); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove btrfs subvolume %q again: %w", name, rerr))
		}
		return 0, err
	}
	return id, nil
}

// limitNew gives the new subvolume name its mode and its limit, and
// returns its ID. On failure, it releases the qgroup it made.
func (b *btrfsEnforcer) limitNew(root *os.Root, pool *os.File, name string, limitBytes int64) (uint64, error) {
	dir, err := openDir(root, name)
	if err != nil {
		return 0, fmt.Errorf("open new btrfs subvolume %q: %w", name, err)
	}
	defer dir.Close()
	if err := dir.Chmod(0o700); err != nil {
		return 0, fmt.Errorf("set mode of btrfs subvolume %q: %w", name, err)
	}
	id, err := subvolumeID(dir)
	if err != nil {
		return 0, fmt.Errorf("btrfs subvolume %q: %w", name, err)
	}
	if err := setUp(pool, name, id, limitBytes); err != nil {
		if rerr := release(pool, id); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return 0, err
	}
	return id, nil
}

// setUp creates the qgroup 1/id unless it exists, assigns the subvolume
// name, id, to it unless it is, and limits it to limitBytes.
func setUp(pool *os.File, name string, id uint64, limitBytes int64) error {
	parent := qgroupID(1, id)
	if err := createQgroup(pool, parent, true); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create btrfs qgroup 1/%d for subvolume %q: %w", id, name, err)
	}
	if err := assignQgroup(pool, qgroupID(0, id), parent, true); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("assign btrfs subvolume %q to qgroup 1/%d: %w", name, id, err)
	}
	if err := limitQgroup(pool, parent, limitBytes); err != nil {
		return fmt.Errorf("limit btrfs qgroup 1/%d of subvolume %q: %w", id, name, err)
	}
	return nil
}

// checkVolume fails unless the volume name is the subvolume with ID id.
func checkVolume(root *os.Root, name string, id uint64) error {
	dir, err := openVolume(root, name, "btrfs subvolume")
	if err != nil {
		return err
	}
	defer dir.Close()
	got, err := subvolumeID(dir)
	if err != nil {
		return fmt.Errorf("btrfs subvolume %q: %w", name, err)
	}
	if got != id {
		return fmt.Errorf("btrfs subvolume %q has ID %d, not %d", name, got, id)
	}
	return nil
}

// ID returns the ID of the subvolume name.
func (b *btrfsEnforcer) ID(root *os.Root, name string) (uint64, error) {
	dir, err := openVolume(root, name, "btrfs subvolume")
	if err != nil {
		return 0, err
	}
	defer dir.Close()
	id, err := subvolumeID(dir)
	if err != nil {
		return 0, fmt.Errorf("btrfs subvolume %q: %w", name, err)
	}
	return id, nil
}

// SetLimit sets the limit of qgroup 1/id, once it checked that name is the
// subvolume id, creating 1/id and assigning the subvolume to it if need
// be.
func (b *btrfsEnforcer) SetLimit(root *os.Root, name string, id uint64, limitBytes int64) error {
	if limitBytes <= 0 {
		return fmt.Errorf("limit btrfs subvolume %q: limit %d is not positive", name, limitBytes)
	}
	if err := checkVolume(root, name, id); err != nil {
		return err
	}
	pool, err := openDir(root, ".")
	if err != nil {
		return fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	return setUp(pool, name, id, limitBytes)
}

// Usage reads the limit and the referenced bytes of qgroup 1/id from
// sysfs, once it checked that name is the subvolume id. The kernel updates
// them when it commits a transaction (every 30 seconds by default, or on
// sync). Inodes are not counted: UsedInodes is -1.
func (b *btrfsEnforcer) Usage(root *os.Root, name string, id uint64) (Usage, error) {
	if err := checkVolume(root, name, id); err != nil {
		return Usage{}, err
	}
	u, err := b.sysfs.qgroupUsage(1, id)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of btrfs subvolume %q: %w", name, err)
	}
	return u, nil
}

// Release removes the relation 0/id to 1/id and destroys 1/id.
func (b *btrfsEnforcer) Release(root *os.Root, id uint64) error {
	pool, err := openDir(root, ".")
	if err != nil {
		return fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	return release(pool, id)
}

// release removes the relations of the qgroups in 1/id (0/id and those of
// the subvolumes made inside the volume) and destroys 1/id if it is there,
// through f, a file of the filesystem. With quotas disabled, there is no
// quota tree and no qgroup left to release.
func release(f *os.File, id uint64) error {
	parent := qgroupID(1, id)
	members, err := qgroupMembers(f, parent)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the members of btrfs qgroup 1/%d: %w", id, err)
	}
	for _, m := range members {
		err := assignQgroup(f, m, parent, false)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove btrfs qgroup relation 0/%d to 1/%d: %w", m, id, err)
		}
	}
	err = createQgroup(f, parent, false)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("destroy btrfs qgroup 1/%d: %w", id, err)
	}
	return nil
}

// IDs lists the level-1 qgroups 1/N from sysfs.
func (b *btrfsEnforcer) IDs(*os.Root) ([]uint64, error) {
	return b.sysfs.qgroupIDs(1)
}
