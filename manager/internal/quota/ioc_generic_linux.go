//go:build linux && !(mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc64)

package quota

// The ioctl encoding of include/uapi/asm-generic/ioctl.h.
const (
	iocWrite    = 1
	iocRead     = 2
	iocSizeBits = 14
)
