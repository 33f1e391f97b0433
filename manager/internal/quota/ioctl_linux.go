//go:build linux

package quota

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ioctl request numbers below are written out as the kernel's
// _IOC(dir, type, nr, size) macro computes them:
//
//	dir<<iocDirShift | size<<iocSizeShift | type<<iocTypeShift | nr<<iocNRShift
//
// with _IOW meaning dir = iocWrite, _IOR dir = iocRead and _IOWR both; the
// direction bits and the width of the size field depend on the
// architecture (ioc_generic_linux.go, ioc_legacy_linux.go). The sizes are
// those of the uapi structs, which the Go structs mirror (checked by
// TestStructSizes).
const (
	iocNRShift   = 0
	iocTypeShift = 8
	iocSizeShift = 16
	iocDirShift  = iocSizeShift + iocSizeBits
)

// ioctl issues the ioctl req on f with the argument arg, which points to
// the request's struct. It returns the errno of a failure.
func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno unix.Errno
	if err := conn.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
