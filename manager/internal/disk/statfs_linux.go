package disk

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func statfs(f *os.File) (fsStats, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fsStats{}, err
	}
	return statsOf(&st), nil
}

// statsOf reads the figures of a statfs answer: sizes in bytes from blocks
// of st.Bsize, and ReadOnly from the flag ST_RDONLY, which the kernel sets
// for a filesystem mounted read-only and for a read-only mount (a bind
// mount with ro, or a filesystem remounted read-only after errors).
func statsOf(st *unix.Statfs_t) fsStats {
	bs := int64(st.Bsize)
	return fsStats{
		CapacityBytes: int64(st.Blocks) * bs,
		FreeBytes:     int64(st.Bavail) * bs,
		Inodes:        int64(st.Files),
		FreeInodes:    int64(st.Ffree),
		ReadOnly:      st.Flags&unix.ST_RDONLY != 0,
	}
}

// rootIDOf is the device and inode of the directory root is.
func rootIDOf(root *os.Root) (rootID, error) {
	fi, err := root.Stat(".")
	if err != nil {
		return rootID{}, fmt.Errorf("stat the pool's directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return rootID{}, fmt.Errorf("stat the pool's directory: no device and inode in %T", fi.Sys())
	}
	return rootID{dev: uint64(st.Dev), ino: st.Ino}, nil
}
