// Package btrfs holds the two btrfs operations the e2e tooling needs that
// Debian bookworm's btrfs-progs (6.2) lacks or that a test makes as a pod
// would: enabling simple quotas (btrfs-progs >= 6.7 has `btrfs quota
// enable --simple`) and creating a subvolume, both single ioctls (the
// manager's own btrfs code is internal to its module; this is the test
// side's independent copy of two ioctl calls, kept as small as possible).
package btrfs

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctl numbers of include/uapi/linux/btrfs.h: _IOWR(0x94, 40, struct
// btrfs_ioctl_quota_ctl_args) and _IOW(0x94, 14, struct
// btrfs_ioctl_vol_args).
const (
	iocQuotaCtl     = 0xC0109428
	iocSubvolCreate = 0x5000940E
	// quotaCtlEnableSimple is BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA.
	quotaCtlEnableSimple = 4
	// volNameMax is BTRFS_PATH_NAME_MAX.
	volNameMax = 4087
)

type quotaCtlArgs struct{ cmd, status uint64 }

type volArgs struct {
	fd   int64
	name [volNameMax + 1]byte
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// EnableSimpleQuotas turns on simple quotas (squota, kernel >= 6.7) on the
// btrfs filesystem mounted at dir. Enabling them again is no error.
func EnableSimpleQuotas(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	args := quotaCtlArgs{cmd: quotaCtlEnableSimple}
	if err := ioctl(f, iocQuotaCtl, unsafe.Pointer(&args)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("enable simple quotas on %s: %w", dir, err)
	}
	return nil
}

// CreateSubvolume creates the subvolume name in the directory parent, as
// `btrfs subvolume create` does (an unprivileged call).
func CreateSubvolume(parent, name string) error {
	f, err := os.Open(parent)
	if err != nil {
		return err
	}
	defer f.Close()
	var args volArgs
	if len(name) > volNameMax || copy(args.name[:], name) != len(name) {
		return fmt.Errorf("subvolume name %q is too long", name)
	}
	if err := ioctl(f, iocSubvolCreate, unsafe.Pointer(&args)); err != nil {
		return fmt.Errorf("create subvolume %s in %s: %w", name, parent, err)
	}
	return nil
}
