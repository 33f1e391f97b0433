package selinux

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// setContext sets f's security.selinux through its descriptor; the kernel
// expects the context NUL-terminated.
func setContext(f *os.File, context string) error {
	return control(f, func(fd int) error {
		return unix.Fsetxattr(fd, xattrName, []byte(context+"\x00"), 0)
	})
}

// getContext reads f's security.selinux through its descriptor, without
// the trailing NUL.
func getContext(f *os.File) (string, error) {
	buf := make([]byte, 256)
	var n int
	err := control(f, func(fd int) error {
		var err error
		n, err = unix.Fgetxattr(fd, xattrName, buf)
		return err
	})
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(buf[:n]), "\x00"), nil
}

// control runs fn with f's descriptor, keeping f open meanwhile.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// isSELinuxFS reports whether path is a selinuxfs mount.
func isSELinuxFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && uint64(st.Type) == uint64(unix.SELINUX_MAGIC)
}
