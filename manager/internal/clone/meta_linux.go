//go:build linux

package clone

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// procFD is where the kernel shows the process's descriptors: the
// extended attributes of a symlink or a special file, which cannot be
// opened for fgetxattr, are reached as procFD/DIRFD/NAME with the l*xattr
// calls, which do not follow NAME.
const procFD = "/proc/self/fd"

// metaFD gives the open copy dst the owner, mode, extended attributes and
// times st describes, src being the open original. The owner goes first
// (chown clears setuid and setgid bits), the times last.
func (c *copier) metaFD(src, dst int, at node, st stat) error {
	if err := unix.Fchown(dst, st.uid, st.gid); err != nil {
		return fmt.Errorf("set the owner of the copy: %w", err)
	}
	if err := unix.Fchmod(dst, st.perm()); err != nil {
		return fmt.Errorf("set the mode of the copy: %w", err)
	}
	if err := c.copyXattrs(fdXattrs(src), fdXattrs(dst), at); err != nil {
		return err
	}
	ts := [2]unix.Timespec{st.atime, st.mtime}
	// utimensat(fd, NULL, times, 0) is futimens(3).
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(dst), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("set the times of the copy: %w", errno)
	}
	return nil
}

// metaAt gives the copy of the entry at of parent (a symlink, special
// file or mount point, which are not opened) its owner, its mode if
// withMode, its extended attributes if withXattrs, and its times, never
// following it.
func (c *copier) metaAt(parent *frame, at node, st stat, withMode, withXattrs bool) error {
	name := at.name
	if err := unix.Fchownat(parent.dst, name, st.uid, st.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set the owner of the copy: %w", err)
	}
	if withMode {
		// The copy was made by us as a FIFO, a device node or a
		// directory: there is no symlink to follow.
		if err := unix.Fchmodat(parent.dst, name, st.perm(), 0); err != nil {
			return fmt.Errorf("set the mode of the copy: %w", err)
		}
	}
	if withXattrs && c.noProc {
		c.notes.add(noteNoProc, at)
	} else if withXattrs {
		if err := c.copyXattrs(procXattrs(parent.src, name), procXattrs(parent.dst, name), at); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{st.atime, st.mtime}
	if err := unix.UtimesNanoAt(parent.dst, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set the times of the copy: %w", err)
	}
	return nil
}

// xattrs reads and writes the extended attributes of one file.
type xattrs interface {
	list(dest []byte) (int, error)
	get(attr string, dest []byte) (int, error)
	set(attr string, value []byte) error
}

// fdXattrs are those of an open file.
type fdXattrs int

func (fd fdXattrs) list(dest []byte) (int, error) { return unix.Flistxattr(int(fd), dest) }
func (fd fdXattrs) get(attr string, dest []byte) (int, error) {
	return unix.Fgetxattr(int(fd), attr, dest)
}
func (fd fdXattrs) set(attr string, value []byte) error {
	return unix.Fsetxattr(int(fd), attr, value, 0)
}

// pathXattrs are those of a file named by a path whose last component is
// not followed.
type pathXattrs string

// procXattrs returns the extended attributes of the entry name of the
// directory dirfd.
func procXattrs(dirfd int, name string) pathXattrs {
	return pathXattrs(procFD + "/" + strconv.Itoa(dirfd) + "/" + name)
}

func (p pathXattrs) list(dest []byte) (int, error) { return unix.Llistxattr(string(p), dest) }
func (p pathXattrs) get(attr string, dest []byte) (int, error) {
	return unix.Lgetxattr(string(p), attr, dest)
}
func (p pathXattrs) set(attr string, value []byte) error {
	return unix.Lsetxattr(string(p), attr, value, 0)
}

// copyXattrs copies the extended attributes of src to dst. Attributes the
// destination refuses are noted and left out; a source without extended
// attributes (EOPNOTSUPP), or one removed meanwhile, has none to copy.
func (c *copier) copyXattrs(src, dst xattrs, at node) error {
	list, err := readSized(src.list, &c.xbuf)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list extended attributes: %w", err)
	}
	for attr := range strings.SplitSeq(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		if attr == "" {
			continue
		}
		value, err := readSized(func(dest []byte) (int, error) { return src.get(attr, dest) }, &c.vbuf)
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("read extended attribute %s: %w", attr, err)
		}
		if err := dst.set(attr, value); err != nil {
			if refused(attr, err) {
				c.notes.add(noteXattr+attr+" ("+err.Error()+")", at)
				continue
			}
			return fmt.Errorf("set extended attribute %s: %w", attr, err)
		}
	}
	return nil
}

// refused reports whether setting the extended attribute attr failed with
// err because the destination does not take it: its filesystem does not
// support it, or, for security. and trusted. attributes, a security module
// or a missing capability refuses it.
func refused(attr string, err error) bool {
	if errors.Is(err, unix.EOPNOTSUPP) {
		return true
	}
	privileged := strings.HasPrefix(attr, "security.") || strings.HasPrefix(attr, "trusted.")
	return privileged && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL))
}

// readSized calls read with *buf, growing it to the size read asks for
// (it returns the size needed when given an empty buffer) until the value
// fits; it returns the part of *buf that was read.
func readSized(read func(dest []byte) (int, error), buf *[]byte) ([]byte, error) {
	for {
		if len(*buf) > 0 {
			n, err := read(*buf)
			if err == nil {
				return (*buf)[:n], nil
			}
			if !errors.Is(err, unix.ERANGE) {
				return nil, err
			}
		}
		n, err := read(nil)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		*buf = make([]byte, max(n, 2*len(*buf), 256))
	}
}

// Reasons for leaving something out, as notes log them.
const (
	noteSocket      = "socket: not copied"
	noteVanished    = "removed during the copy"
	noteMount       = "mount point: made as an empty directory, what is mounted there is not copied"
	noteDevice      = "device node: the kernel does not let the manager create it (EPERM)"
	noteLinkLimit   = "hard link: the destination has as many links to the file as it allows (EMLINK), copied as a file of its own"
	noteDestination = "the destination directory itself, inside the source: not copied into itself"
	noteNoProc      = "extended attributes of a symlink or special file: not copied, as /proc/self/fd is missing"
	noteXattr       = "extended attribute refused by the destination: "
	noteOther       = "other reasons (too many to tell apart)"
)

// maxNotes bounds the reasons notes tells apart (an attribute name is
// part of a reason); more are counted under noteOther.
const maxNotes = 32

// notes counts what was left out of a copy, by reason, with the first
// path of each: at most maxNotes reasons, so at most as many paths.
type notes struct {
	reasons []string
	count   map[string]int
	example map[string]string
}

// add notes that at was left out for reason; the path of at is built
// only for the first of a reason.
func (n *notes) add(reason string, at node) {
	if n.count == nil {
		n.count, n.example = map[string]int{}, map[string]string{}
	}
	if n.count[reason] == 0 && len(n.reasons) >= maxNotes {
		reason = noteOther
	}
	if n.count[reason] == 0 {
		n.reasons = append(n.reasons, reason)
		n.example[reason] = shorten(at.path())
	}
	n.count[reason]++
}

// log logs one line per reason, through the logger of ctx.
func (n *notes) log(ctx context.Context, src string) {
	logger := klog.FromContext(ctx)
	for _, r := range n.reasons {
		logger.Info("Clone left entries out", "source", src, "reason", r, "count", n.count[r], "example", n.example[r])
	}
}
