// Package quota makes a claim's size a limit that the pool's filesystem
// enforces. Detect finds out, once per pool, what the filesystem of the
// pool root can enforce; the Enforcer it returns then makes, limits,
// measures and releases volumes, each a directory directly in the pool
// root. Volumes are reached only through the pool's os.Root, so a name
// always stays inside the pool.
//
// # What is enforced where
//
// On btrfs (KindBtrfs) each volume is a subvolume, and its size limit sits
// on a level-1 qgroup 1/ID made for it, with ID the subvolume's ID: Make
// creates the subvolume, the qgroup 1/ID, assigns the subvolume's own
// qgroup 0/ID to 1/ID and limits the referenced bytes of 1/ID. The limit
// is on 1/ID rather than on 0/ID because of nested subvolumes: a pod may
// create a subvolume inside its volume (an unprivileged ioctl), and that
// subvolume has a qgroup of its own. With simple quotas (squota, Linux
// 6.7), the kernel adds a new subvolume to the qgroups its parent
// subvolume belongs to, so the nested subvolume joins 1/ID and its data
// counts against the volume's limit. In full qgroup mode it joins nothing
// and escapes every limit, so Detect reports a pool in full mode as not
// enforcing (KindNone, with a reason saying how to switch to simple quotas).
// Simple quotas account each extent to the subvolume that first wrote it
// and are enforced at write time: a write past the limit fails with EDQUOT.
//
// On xfs (KindXFS) and ext4 (KindExt4) each volume is a plain directory
// with a project ID of its own, inherited by everything created inside it
// (FS_XFLAG_PROJINHERIT), and the project's block hard limit is the
// volume's size. Project IDs are taken from a range reserved for this
// package (ProjectIDBase, ProjectIDCount): Make takes the first ID of the
// range whose project has neither limits nor usage, under a lock so that
// two concurrent Makes never take the same ID. Project quotas are weaker
// than qgroups: in the initial user namespace, the owner of a file may
// change its project ID (FS_IOC_FSSETXATTR) and so take it out of the
// volume's limit, and on ext4 a process with CAP_SYS_RESOURCE ignores
// hard limits; a btrfs subvolume leaves its qgroup only by CAP_SYS_ADMIN.
//
// Everywhere else (tmpfs, overlayfs, nfs, xfs or ext4 without project
// quotas, btrfs without simple quotas, a manager without CAP_SYS_ADMIN)
// sizes are not enforced: the Enforcer's Support says why in a sentence the
// user can act on, and its Make makes a plain directory.
//
// # Why ioctls and sysfs
//
// The package talks to the kernel directly (btrfs ioctls, quotactl_fd(2),
// FS_IOC_FSSETXATTR) and reads btrfs qgroup usage from
// /sys/fs/btrfs/FSID/qgroups, rather than running btrfs-progs or
// xfs_quota: the manager image needs no extra tools, whose versions and
// output formats differ between distributions (btrfs-progs learnt simple
// quotas only in 6.7); every call works on a descriptor obtained through
// the pool's os.Root, never on a path a pod could swap for a symlink; and
// errors come back as errnos that the caller can test (EDQUOT, ENOENT)
// instead of text to parse. Reading sysfs needs no privilege and works on
// the read-only /sys of a container.
//
// # Snapshots
//
// The btrfs enforcer is also a Snapshotter: for a volume clone, it makes
// the new volume a snapshot of the source's subvolume
// (BTRFS_IOC_SNAP_CREATE_V2), then gives it its qgroup 1/ID as Make does.
// With simple quotas, an extent is charged to the subvolume that first
// wrote it: the data the snapshot shares with its source stays charged to
// the source, and the snapshot's limit counts only what is written to it
// afterwards (and the source's only what was written before).
//
// # Removal
//
// The caller removes a volume's directory as it always does, emptying it
// and then removing it with rmdir, which also deletes an empty btrfs
// subvolume (Linux 4.18), nested ones included; then it calls Release to
// free the quota. A nested subvolume is a separate tree: renaming out of
// it fails with EXDEV, so a removal that moves directories around must
// empty each subvolume (inode 256 on btrfs) within itself.
//
// On btrfs, rmdir only marks the subvolume deleted; the kernel cleans it
// up in the background (after the next periodic commit, 30 seconds by
// default) and then drops its qgroup 0/ID by itself, relations included.
// Release does not wait for that: it removes the relations of every
// member of 1/ID (0/ID and the qgroups of nested subvolumes, found in the
// quota tree), then destroys 1/ID, which the kernel refuses (EBUSY) while
// 1/ID has members. Without Release, 1/ID would stay behind, empty, after
// the cleanup: IDs lists it. On xfs and ext4, Release clears the project's
// limits, which makes its ID free again once nothing is charged to it.
//
// A crash between making a volume and recording its ID is recovered with
// ID, which reads the ID from the directory, and SetLimit, which on btrfs
// also creates 1/ID and assigns the subvolume to it if Make did not get
// that far.
package quota

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Kinds of enforcement.
const (
	// KindNone means that sizes are not enforced.
	KindNone = ""
	// KindBtrfs means a subvolume per volume, limited by a level-1 qgroup
	// (btrfs simple quotas).
	KindBtrfs = "btrfs"
	// KindXFS means a project quota per volume directory on xfs.
	KindXFS = "xfs"
	// KindExt4 means a project quota per volume directory on ext4.
	KindExt4 = "ext4"
)

// The project IDs this package gives to volumes: ProjectIDCount IDs from
// ProjectIDBase, well above the small IDs administrators write into
// /etc/projects and the IDs from 1048577 up that the kubelet takes for
// emptyDir quotas, and below 2^31 for tools that read IDs as signed.
const (
	// ProjectIDBase is the first project ID given to a volume.
	ProjectIDBase = 2_000_000_000
	// ProjectIDCount is how many project IDs from ProjectIDBase are used.
	ProjectIDCount = 1_000_000
)

// Support says what a pool enforces.
type Support struct {
	// Kind is one of the Kind constants.
	Kind string
	// Reason says, when Kind is KindNone, why sizes are not enforced, in a
	// sentence the user can act on.
	Reason string
}

// Usage is what a volume uses against its limit. A value of -1 means
// unknown (btrfs does not count inodes).
type Usage struct {
	// LimitBytes is the volume's size limit, 0 when it has none.
	LimitBytes int64
	// UsedBytes is the space charged to the volume.
	UsedBytes int64
	// UsedInodes is the number of inodes charged to the volume.
	UsedInodes int64
}

// Enforcer enforces volume limits on one pool (one filesystem). It is safe
// for concurrent use.
type Enforcer interface {
	// Support says what the pool enforces.
	Support() Support
	// Make creates the directory name (mode 0700) directly in the pool
	// root with a limit of limitBytes (>0), and returns the quota ID to
	// record (btrfs: the subvolume ID, whose level-1 qgroup 1/ID carries
	// the limit; project quotas: the project ID). On failure nothing it
	// made is left behind.
	Make(root *os.Root, name string, limitBytes int64) (id uint64, err error)
	// SetLimit changes the limit of the existing volume name with quota
	// ID id. On btrfs it also creates the qgroup 1/id and assigns the
	// subvolume to it if need be, should a crash have interrupted Make.
	SetLimit(root *os.Root, name string, id uint64, limitBytes int64) error
	// Usage reports limit and usage of the volume name with quota ID id.
	Usage(root *os.Root, name string, id uint64) (Usage, error)
	// Release frees what Make allocated besides the directory (btrfs: the
	// level-1 qgroup 1/id and any relation; project quota: the limits of
	// project id), after the directory has been removed. Releasing an
	// already released id is no error.
	Release(root *os.Root, id uint64) error
	// ID returns the quota ID of the existing volume name as the
	// directory itself carries it (btrfs: its subvolume ID; project
	// quotas: its project ID), for a volume whose ID was not recorded, say
	// after a crash during Make. It fails when the directory carries none
	// (a plain directory, a project outside this package's range).
	ID(root *os.Root, name string) (uint64, error)
	// IDs lists the quota IDs this package allocated on the filesystem
	// that still exist (btrfs: level-1 qgroups 1/N; project quotas:
	// project IDs with a limit in this package's ID range), in increasing
	// order.
	IDs(root *os.Root) ([]uint64, error)
}

// Snapshotter is an Enforcer that can make a volume as a snapshot of
// another: the btrfs enforcer (KindBtrfs), whose volumes are subvolumes.
// Find it with a type assertion on the Enforcer Detect returned.
type Snapshotter interface {
	// Snapshot makes dst, which must not exist, a writable snapshot of
	// the volume src, and gives it a quota limiting it to limitBytes (>0)
	// as Make does; it returns the quota ID to record (the snapshot's
	// subvolume ID). src is a volume name of root; dst is a path of
	// root, a volume name or a path inside a directory of root such as
	// ".hostpath/clones/NAME", whose directories are opened without
	// following symlinks. The snapshot keeps the mode, owner, times and
	// extended attributes of src's directory. It fails with
	// ErrNotSubvolume when src is not a subvolume of its own, or holds
	// subvolumes of its own (a snapshot would have empty directories in
	// their place): the caller copies the content instead. On failure
	// nothing it made is left behind.
	Snapshot(root *os.Root, src, dst string, limitBytes int64) (id uint64, err error)
}

// ErrNotSubvolume is returned by Snapshot when its source cannot be
// snapshotted as a whole.
var ErrNotSubvolume = errors.New("not a btrfs subvolume of its own")

// Detect returns the enforcer for the filesystem of the pool root, from
// its type (statfs), its quota state and the manager's capabilities. It
// never fails: on a pool that enforces nothing it returns an Enforcer whose
// Support().Kind is KindNone, with the reason, and whose Make makes a plain
// directory and returns ID 0.
func Detect(root *os.Root) Enforcer {
	return detect(root, defaultEnv())
}

// ErrNotEnforced is returned by the Usage and ID of an Enforcer of
// KindNone.
var ErrNotEnforced = errors.New("volume sizes are not enforced on this pool")

// none is the Enforcer of a pool that enforces nothing.
type none struct {
	reason string
}

var _ Enforcer = none{}

// notEnforced returns the Enforcer of a pool that enforces nothing, for the
// reason given.
func notEnforced(format string, args ...any) Enforcer {
	return none{reason: fmt.Sprintf(format, args...)}
}

// Support reports KindNone and the reason.
func (n none) Support() Support { return Support{Kind: KindNone, Reason: n.reason} }

// Make creates the directory name with mode 0700 and returns ID 0; the
// limit is not enforced.
func (none) Make(root *os.Root, name string, _ int64) (uint64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	if err := root.Mkdir(name, 0o700); err != nil {
		return 0, fmt.Errorf("create volume directory %q: %w", name, err)
	}
	return 0, nil
}

// SetLimit does nothing: there is no limit to change.
func (none) SetLimit(*os.Root, string, uint64, int64) error { return nil }

// Usage fails with ErrNotEnforced.
func (none) Usage(*os.Root, string, uint64) (Usage, error) {
	return Usage{}, ErrNotEnforced
}

// ID fails with ErrNotEnforced.
func (none) ID(*os.Root, string) (uint64, error) { return 0, ErrNotEnforced }

// Release does nothing: Make allocated nothing but the directory.
func (none) Release(*os.Root, uint64) error { return nil }

// IDs returns none.
func (none) IDs(*os.Root) ([]uint64, error) { return nil, nil }

// checkName fails unless name is a single path component other than . and
// ... The callers validate names already; this guards the raw names that
// go to the kernel in ioctl arguments.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("invalid volume name %q: not a single path component", name)
	}
	return nil
}

// openVolume opens the volume name (a single path component, checked) of
// the pool root; what names it in errors ("btrfs subvolume").
func openVolume(root *os.Root, name, what string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir, err := openDir(root, name)
	if err != nil {
		return nil, fmt.Errorf("open %s %q: %w", what, name, err)
	}
	return dir, nil
}

// openPoolFor checks what Make is asked (a single path component, a
// positive limit) and opens the pool directory the volume name goes in.
func openPoolFor(root *os.Root, name string, limitBytes int64) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if limitBytes <= 0 {
		return nil, fmt.Errorf("create volume %q: limit %d is not positive", name, limitBytes)
	}
	pool, err := openDir(root, ".")
	if err != nil {
		return nil, fmt.Errorf("open pool directory: %w", err)
	}
	return pool, nil
}

// openDir opens the directory name of root (. for the pool directory)
// read-only, and fails unless it is a directory.
func openDir(root *os.Root, name string) (*os.File, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a directory")}
	}
	return f, nil
}

// fsNames names the filesystems of common statfs magic numbers.
var fsNames = map[uint32]string{
	0x9123683e: "btrfs",
	0x58465342: "xfs",
	0xef53:     "ext4",
	0x01021994: "tmpfs",
	0x794c7630: "overlayfs",
	0x6969:     "nfs",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse",
	0x2fc12fc1: "zfs",
	0x5346544e: "ntfs",
	0x4d44:     "vfat",
	0x2011bab0: "exfat",
	0xf2f52010: "f2fs",
	0x858458f6: "ramfs",
	0x73717368: "squashfs",
	0xe0f5e1e2: "erofs",
	0x00c36400: "ceph",
	0x52654973: "reiserfs",
	0x3153464a: "jfs",
	0x6e736673: "nsfs",
	0x62656572: "sysfs",
	0x9fa0:     "proc",
}

// fsName names the filesystem of statfs type magic, or gives its number in
// hex.
func fsName(magic uint32) string {
	if name, ok := fsNames[magic]; ok {
		return name
	}
	return fmt.Sprintf("filesystem type %#x", magic)
}
