package e2e

import (
	"io/fs"
	"syscall"
)

// fileGroup is the group ID of a file this machine stat-ed; -1 when the
// system says nothing of it.
func fileGroup(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Gid)
	}
	return -1
}
