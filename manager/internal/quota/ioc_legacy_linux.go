//go:build linux && (mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc64)

package quota

// The ioctl encoding of mips, powerpc and sparc (their asm/ioctl.h): a
// 13-bit size and 3 direction bits.
const (
	iocWrite    = 4
	iocRead     = 2
	iocSizeBits = 13
)
