package disk

import (
	"os"

	"golang.org/x/sys/unix"
)

func statfs(f *os.File) (fsStats, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fsStats{}, err
	}
	bs := int64(st.Bsize)
	return fsStats{
		CapacityBytes: int64(st.Blocks) * bs,
		FreeBytes:     int64(st.Bavail) * bs,
		Inodes:        int64(st.Files),
		FreeInodes:    int64(st.Ffree),
	}, nil
}
