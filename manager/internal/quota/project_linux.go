//go:build linux

package quota

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Constants of include/uapi/linux/quota.h, dqblk_xfs.h and fs.h.
const (
	prjQuota      = 2        // PRJQUOTA
	qGetQuota     = 0x800007 // Q_GETQUOTA
	qSetQuota     = 0x800008 // Q_SETQUOTA
	qGetNextQuota = 0x800009 // Q_GETNEXTQUOTA
	qXGetQStatV   = 'X'<<8 + 8
	// qifBLimits and qifILimits are QIF_BLIMITS and QIF_ILIMITS, the
	// dqb_valid bits of the block and inode limits.
	qifBLimits = 1
	qifILimits = 4
	// qifBlockSize is QIF_DQBLKSIZE: block limits count 1 KiB blocks.
	qifBlockSize = 1024
	// fsQStatVVersion1 is FS_QSTATV_VERSION1.
	fsQStatVVersion1 = 1
	// fsQuotaPDQAcct and fsQuotaPDQEnfd are FS_QUOTA_PDQ_ACCT and
	// FS_QUOTA_PDQ_ENFD: project quotas are accounted, and enforced.
	fsQuotaPDQAcct = 1 << 4
	fsQuotaPDQEnfd = 1 << 5
	// fsXflagProjInherit is FS_XFLAG_PROJINHERIT: what is created in the
	// directory takes its project ID.
	fsXflagProjInherit = 0x200

	sizeofFsxattr = 28 // struct fsxattr
	// FS_IOC_FSGETXATTR = _IOR('X', 31, struct fsxattr)
	iocFSGetXattr = iocRead<<iocDirShift | sizeofFsxattr<<iocSizeShift | 'X'<<iocTypeShift | 31<<iocNRShift
	// FS_IOC_FSSETXATTR = _IOW('X', 32, struct fsxattr)
	iocFSSetXattr = iocWrite<<iocDirShift | sizeofFsxattr<<iocSizeShift | 'X'<<iocTypeShift | 32<<iocNRShift
)

// qcmd is QCMD(cmd, type), a quotactl command.
func qcmd(cmd, typ uint32) uint32 { return cmd<<8 | typ&0xff }

// ifDqblk is struct if_dqblk.
type ifDqblk struct {
	bhardlimit uint64 // in 1 KiB blocks
	bsoftlimit uint64
	curspace   uint64 // in bytes
	ihardlimit uint64
	isoftlimit uint64
	curinodes  uint64
	btime      uint64
	itime      uint64
	valid      uint32
}

// free reports whether the quota has no limits and nothing charged.
func (d ifDqblk) free() bool {
	return d.bhardlimit == 0 && d.bsoftlimit == 0 && d.ihardlimit == 0 && d.isoftlimit == 0 &&
		d.curspace == 0 && d.curinodes == 0
}

// limited reports whether the quota has a limit.
func (d ifDqblk) limited() bool {
	return d.bhardlimit != 0 || d.bsoftlimit != 0 || d.ihardlimit != 0 || d.isoftlimit != 0
}

// ifNextDqblk is struct if_nextdqblk.
type ifNextDqblk struct {
	bhardlimit uint64
	bsoftlimit uint64
	curspace   uint64
	ihardlimit uint64
	isoftlimit uint64
	curinodes  uint64
	btime      uint64
	itime      uint64
	valid      uint32
	id         uint32
}

// fsQfilestatv is struct fs_qfilestatv.
type fsQfilestatv struct {
	ino      uint64
	nblks    uint64
	nextents uint32
	pad      uint32
}

// fsQuotaStatv is struct fs_quota_statv.
type fsQuotaStatv struct {
	version      int8
	pad1         uint8
	flags        uint16
	incoredqs    uint32
	uquota       fsQfilestatv
	gquota       fsQfilestatv
	pquota       fsQfilestatv
	btimelimit   int32
	itimelimit   int32
	rtbtimelimit int32
	bwarnlimit   uint16
	iwarnlimit   uint16
	rtbwarnlimit uint16
	pad3         uint16
	pad4         uint32
	pad2         [7]uint64
}

// fsxattr is struct fsxattr.
type fsxattr struct {
	xflags     uint32
	extsize    uint32
	nextents   uint32
	projid     uint32
	cowextsize uint32
	pad        [8]byte
}

// projectOps makes the system calls of project quotas: quotactl_fd(2) on
// a file of the filesystem, and the fsxattr ioctls on a directory.
type projectOps interface {
	// stateFlags returns the FS_QUOTA_* flags (Q_XGETQSTATV) of the
	// filesystem of f.
	stateFlags(f *os.File) (uint16, error)
	// getQuota returns the quota of project id (Q_GETQUOTA). xfs fails
	// with ENOENT for a project it has no quota for.
	getQuota(f *os.File, id uint32) (ifDqblk, error)
	// nextQuota returns the quota of the first project from id on that
	// has one, and its ID (Q_GETNEXTQUOTA); ENOENT when there is none.
	nextQuota(f *os.File, id uint32) (uint32, ifDqblk, error)
	// setQuota sets the quota of project id (Q_SETQUOTA): the fields
	// d.valid names.
	setQuota(f *os.File, id uint32, d ifDqblk) error
	// getXattr returns the fsxattr of f (FS_IOC_FSGETXATTR).
	getXattr(f *os.File) (fsxattr, error)
	// setXattr sets the fsxattr of f (FS_IOC_FSSETXATTR).
	setXattr(f *os.File, x fsxattr) error
}

// detectProject returns the enforcer of the xfs or ext4 (kind) pool whose
// directory is pool.
func detectProject(root *os.Root, pool *os.File, kind string, e env) Enforcer {
	flags, err := e.project.stateFlags(pool)
	if errors.Is(err, unix.ENOSYS) {
		return notEnforced("this kernel has no quota support (quotactl_fd: %v): %s project quotas need Linux >= 5.14 built with CONFIG_QUOTA", err, kind)
	}
	if err != nil {
		return notEnforced("cannot read the %s quota state of %s: %v", kind, root.Name(), err)
	}
	if reason := projectStateReason(kind, flags, root.Name()); reason != "" {
		return notEnforced("%s", reason)
	}
	if ok, err := hasCapSysAdmin(e.procStatus); err != nil {
		return notEnforced("cannot read the manager's capabilities: %v", err)
	} else if !ok {
		return notEnforced("setting %s project quotas needs CAP_SYS_ADMIN: run the manager with it", kind)
	}
	return &projectEnforcer{kind: kind, ops: e.project, base: e.projectBase, count: e.projectCount}
}

// projectStateReason says why the xfs or ext4 (kind) filesystem at path
// with the quota state flags does not enforce project quotas, or returns
// "" when it does.
func projectStateReason(kind string, flags uint16, path string) string {
	switch {
	case kind == KindXFS && flags&fsQuotaPDQAcct == 0:
		return fmt.Sprintf("xfs is not mounted with prjquota: mount the filesystem of %s with -o prjquota (xfs turns quota accounting on only at mount, not on remount)", path)
	case kind == KindXFS && flags&fsQuotaPDQEnfd == 0:
		return fmt.Sprintf("xfs project quotas are accounted but not enforced (pqnoenforce): mount with prjquota or run xfs_quota -x -c 'enable -p' %s", path)
	case flags&fsQuotaPDQAcct == 0:
		return fmt.Sprintf("ext4 project quotas are not enabled: the filesystem of %s needs the project and quota features (tune2fs -O project,quota on the unmounted device) and the prjquota mount option", path)
	case flags&fsQuotaPDQEnfd == 0:
		return fmt.Sprintf("ext4 project quotas are accounted but not enforced: mount the filesystem of %s with prjquota, or run quotaon -P on it", path)
	}
	return ""
}

// projectMu serialises the allocation and the release of project IDs in
// the process, across all pools: two pools may share a filesystem.
var projectMu sync.Mutex

// projectEnforcer gives each volume directory a project ID of its own,
// from the range of count IDs from base, with a block hard limit.
type projectEnforcer struct {
	kind        string
	ops         projectOps
	base, count uint32
}

var _ Enforcer = &projectEnforcer{}

// Support reports the kind, KindXFS or KindExt4.
func (p *projectEnforcer) Support() Support { return Support{Kind: p.kind} }

// inRange fails unless id is in the enforcer's range.
func (p *projectEnforcer) inRange(id uint64) (uint32, error) {
	if id < uint64(p.base) || id >= uint64(p.base)+uint64(p.count) {
		return 0, fmt.Errorf("project ID %d is not in the range of volumes, %d to %d", id, p.base, uint64(p.base)+uint64(p.count)-1)
	}
	return uint32(id), nil
}

// blocks converts limitBytes to 1 KiB quota blocks, rounding up.
func blocks(limitBytes int64) uint64 {
	return (uint64(limitBytes) + qifBlockSize - 1) / qifBlockSize
}

// quota returns the quota of project id, all zeros when the filesystem has
// none.
func (p *projectEnforcer) quota(pool *os.File, id uint32) (ifDqblk, error) {
	d, err := p.ops.getQuota(pool, id)
	if errors.Is(err, unix.ENOENT) {
		return ifDqblk{}, nil
	}
	if err != nil {
		return ifDqblk{}, fmt.Errorf("read quota of project %d: %w", id, err)
	}
	return d, nil
}

// Make creates the directory name, gives it a free project ID that its
// contents inherit, and limits the project to limitBytes.
func (p *projectEnforcer) Make(root *os.Root, name string, limitBytes int64) (uint64, error) {
	pool, err := openPoolFor(root, name, limitBytes)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	projectMu.Lock()
	defer projectMu.Unlock()
	id, err := p.freeID(pool)
	if err != nil {
		return 0, fmt.Errorf("create volume %q: %w", name, err)
	}
	if err := root.Mkdir(name, 0o700); err != nil {
		return 0, fmt.Errorf("create volume directory %q: %w", name, err)
	}
	if err := p.limitNew(root, pool, name, id, limitBytes); err != nil {
		if rerr := root.Remove(name); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove volume directory %q again: %w", name, rerr))
		}
		return 0, err
	}
	return uint64(id), nil
}

// freeID returns the first project ID of the range with neither limits nor
// usage. It skips the projects Q_GETNEXTQUOTA returns that are not free,
// and confirms a candidate with Q_GETQUOTA.
func (p *projectEnforcer) freeID(pool *os.File) (uint32, error) {
	end := uint64(p.base) + uint64(p.count)
	for id := uint64(p.base); id < end; id++ {
		next, d, err := p.ops.nextQuota(pool, uint32(id))
		switch {
		case errors.Is(err, unix.ENOENT):
			// No quota from id on: id is free (confirmed below).
		case err != nil:
			return 0, fmt.Errorf("read the quota of the next project from %d: %w", id, err)
		case uint64(next) < id:
			return 0, fmt.Errorf("read the quota of the next project from %d: got project %d", id, next)
		case uint64(next) == id && !d.free():
			continue
		}
		d, err = p.quota(pool, uint32(id))
		if err != nil {
			return 0, err
		}
		if d.free() {
			return uint32(id), nil
		}
	}
	return 0, fmt.Errorf("all %d project IDs from %d are in use", p.count, p.base)
}

// limitNew gives the new directory name the project id, inherited by what
// is created in it, and limits the project to limitBytes.
func (p *projectEnforcer) limitNew(root *os.Root, pool *os.File, name string, id uint32, limitBytes int64) error {
	dir, err := openDir(root, name)
	if err != nil {
		return fmt.Errorf("open new volume directory %q: %w", name, err)
	}
	defer dir.Close()
	x, err := p.ops.getXattr(dir)
	if err != nil {
		return fmt.Errorf("read the project of volume directory %q: %w", name, err)
	}
	x.projid = id
	x.xflags |= fsXflagProjInherit
	if err := p.ops.setXattr(dir, x); err != nil {
		return fmt.Errorf("set project %d on volume directory %q: %w", id, name, err)
	}
	if err := p.ops.setQuota(pool, id, ifDqblk{bhardlimit: blocks(limitBytes), valid: qifBLimits}); err != nil {
		return fmt.Errorf("limit project %d of volume %q: %w", id, name, err)
	}
	return nil
}

// project returns the project of the directory name.
func (p *projectEnforcer) project(root *os.Root, name string) (uint32, error) {
	dir, err := openVolume(root, name, "volume directory")
	if err != nil {
		return 0, err
	}
	defer dir.Close()
	x, err := p.ops.getXattr(dir)
	if err != nil {
		return 0, fmt.Errorf("read the project of volume directory %q: %w", name, err)
	}
	return x.projid, nil
}

// ID returns the project of the directory name, if it is in the range.
func (p *projectEnforcer) ID(root *os.Root, name string) (uint64, error) {
	id, err := p.project(root, name)
	if err != nil {
		return 0, err
	}
	if _, err := p.inRange(uint64(id)); err != nil {
		return 0, fmt.Errorf("volume directory %q: %w", name, err)
	}
	return uint64(id), nil
}

// checkVolume fails unless the directory name has the project id.
func (p *projectEnforcer) checkVolume(root *os.Root, name string, id uint32) error {
	got, err := p.project(root, name)
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("volume directory %q has project %d, not %d", name, got, id)
	}
	return nil
}

// SetLimit sets the block hard limit of project id, once it checked that
// the directory name has it.
func (p *projectEnforcer) SetLimit(root *os.Root, name string, id uint64, limitBytes int64) error {
	pid, err := p.inRange(id)
	if err != nil {
		return err
	}
	if limitBytes <= 0 {
		return fmt.Errorf("limit volume %q: limit %d is not positive", name, limitBytes)
	}
	if err := p.checkVolume(root, name, pid); err != nil {
		return err
	}
	pool, err := openDir(root, ".")
	if err != nil {
		return fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	if err := p.ops.setQuota(pool, pid, ifDqblk{bhardlimit: blocks(limitBytes), valid: qifBLimits}); err != nil {
		return fmt.Errorf("limit project %d of volume %q: %w", id, name, err)
	}
	return nil
}

// Usage reads the quota of project id, once it checked that the directory
// name has it.
func (p *projectEnforcer) Usage(root *os.Root, name string, id uint64) (Usage, error) {
	pid, err := p.inRange(id)
	if err != nil {
		return Usage{}, err
	}
	if err := p.checkVolume(root, name, pid); err != nil {
		return Usage{}, err
	}
	pool, err := openDir(root, ".")
	if err != nil {
		return Usage{}, fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	d, err := p.quota(pool, pid)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of volume %q: %w", name, err)
	}
	return Usage{
		LimitBytes: int64(d.bhardlimit * qifBlockSize),
		UsedBytes:  int64(d.curspace),
		UsedInodes: int64(d.curinodes),
	}, nil
}

// Release clears the limits of project id. It fails while anything is
// still charged to the project (say, a file of the removed directory that
// is still open, or a directory that took the ID after an earlier
// Release): the limit stays until the project is unused.
func (p *projectEnforcer) Release(root *os.Root, id uint64) error {
	pid, err := p.inRange(id)
	if err != nil {
		return err
	}
	pool, err := openDir(root, ".")
	if err != nil {
		return fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	projectMu.Lock()
	defer projectMu.Unlock()
	d, err := p.quota(pool, pid)
	if err != nil {
		return err
	}
	if d.curinodes != 0 || d.curspace != 0 {
		return fmt.Errorf("release project %d: still in use by %d inodes and %d bytes", id, d.curinodes, d.curspace)
	}
	if !d.limited() {
		return nil
	}
	if err := p.ops.setQuota(pool, pid, ifDqblk{valid: qifBLimits | qifILimits}); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("release project %d: %w", id, err)
	}
	return nil
}

// IDs lists the projects of the range that have a limit.
func (p *projectEnforcer) IDs(root *os.Root) ([]uint64, error) {
	pool, err := openDir(root, ".")
	if err != nil {
		return nil, fmt.Errorf("open pool directory: %w", err)
	}
	defer pool.Close()
	var ids []uint64
	end := uint64(p.base) + uint64(p.count)
	for id := uint64(p.base); id < end; id++ {
		next, d, err := p.ops.nextQuota(pool, uint32(id))
		if errors.Is(err, unix.ENOENT) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the quota of the next project from %d: %w", id, err)
		}
		if uint64(next) < id {
			return nil, fmt.Errorf("read the quota of the next project from %d: got project %d", id, next)
		}
		if uint64(next) >= end {
			break
		}
		if d.limited() {
			ids = append(ids, uint64(next))
		}
		id = uint64(next)
	}
	return ids, nil
}

// sysProjectOps makes the real system calls.
type sysProjectOps struct{}

// quotactl calls quotactl_fd(f, cmd, id, addr).
func quotactl(f *os.File, cmd, id uint32, addr unsafe.Pointer) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno unix.Errno
	if err := conn.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_QUOTACTL_FD, fd, uintptr(cmd), uintptr(id), uintptr(addr), 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

func (sysProjectOps) stateFlags(f *os.File) (uint16, error) {
	st := fsQuotaStatv{version: fsQStatVVersion1}
	if err := quotactl(f, qcmd(qXGetQStatV, prjQuota), 0, unsafe.Pointer(&st)); err != nil {
		return 0, err
	}
	return st.flags, nil
}

func (sysProjectOps) getQuota(f *os.File, id uint32) (ifDqblk, error) {
	var d ifDqblk
	err := quotactl(f, qcmd(qGetQuota, prjQuota), id, unsafe.Pointer(&d))
	return d, err
}

func (sysProjectOps) nextQuota(f *os.File, id uint32) (uint32, ifDqblk, error) {
	var n ifNextDqblk
	if err := quotactl(f, qcmd(qGetNextQuota, prjQuota), id, unsafe.Pointer(&n)); err != nil {
		return 0, ifDqblk{}, err
	}
	return n.id, ifDqblk{
		bhardlimit: n.bhardlimit, bsoftlimit: n.bsoftlimit, curspace: n.curspace,
		ihardlimit: n.ihardlimit, isoftlimit: n.isoftlimit, curinodes: n.curinodes,
		btime: n.btime, itime: n.itime, valid: n.valid,
	}, nil
}

func (sysProjectOps) setQuota(f *os.File, id uint32, d ifDqblk) error {
	return quotactl(f, qcmd(qSetQuota, prjQuota), id, unsafe.Pointer(&d))
}

func (sysProjectOps) getXattr(f *os.File) (fsxattr, error) {
	var x fsxattr
	err := ioctl(f, iocFSGetXattr, unsafe.Pointer(&x))
	return x, err
}

func (sysProjectOps) setXattr(f *os.File, x fsxattr) error {
	return ioctl(f, iocFSSetXattr, unsafe.Pointer(&x))
}
