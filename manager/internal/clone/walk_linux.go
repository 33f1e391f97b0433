//go:build linux

package clone

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// beforeOpen, when a test sets it, is called with each directory and
// regular file right before it is opened.
var beforeOpen func(at node)

// direntBytes is the size of the buffer of getdents: what a level of the
// walk holds of the names read and not handled yet (a few dozen short
// names, or 15 of 255 bytes).
const direntBytes = 4 << 10

// errVanished says that an entry was removed before it could be copied.
var errVanished = errors.New("removed during the copy")

// fileID identifies an inode.
type fileID struct{ dev, ino uint64 }

// stat is what the copy needs to know of an entry.
type stat struct {
	id           fileID
	mode         uint32 // type and permission bits, as st_mode
	nlink        uint32
	uid, gid     int
	size, blocks int64
	rdev         uint64
	atime, mtime unix.Timespec
	// mountRoot says that the entry is the root of a mount.
	mountRoot bool
}

// typ returns the type bits of the mode (S_IFREG, S_IFDIR, ...).
func (s stat) typ() uint32 { return s.mode & unix.S_IFMT }

// perm returns the permission bits of the mode, setuid, setgid and sticky
// included.
func (s stat) perm() uint32 { return s.mode & 0o7777 }

// statAt looks at the entry name of the directory dirfd without following
// a symlink; with name "", at dirfd itself.
func statAt(dirfd int, name string) (stat, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_SYNC_AS_STAT
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var sx unix.Statx_t
	if err := unix.Statx(dirfd, name, flags, unix.STATX_BASIC_STATS, &sx); err != nil {
		return stat{}, err
	}
	ts := func(t unix.StatxTimestamp) unix.Timespec {
		return unix.Timespec{Sec: t.Sec, Nsec: int64(t.Nsec)}
	}
	return stat{
		id:        fileID{dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), ino: sx.Ino},
		mode:      uint32(sx.Mode),
		nlink:     sx.Nlink,
		uid:       int(sx.Uid),
		gid:       int(sx.Gid),
		size:      int64(sx.Size),
		blocks:    int64(sx.Blocks),
		rdev:      unix.Mkdev(sx.Rdev_major, sx.Rdev_minor),
		atime:     ts(sx.Atime),
		mtime:     ts(sx.Mtime),
		mountRoot: sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0,
	}, nil
}

// openSource opens the entry name of the source directory dirfd with
// flags (O_NOFOLLOW and O_CLOEXEC are added), without updating its access
// time where the kernel lets us (O_NOATIME needs ownership or
// CAP_FOWNER), and checks that it is what want describes: ErrChanged if it
// is not, or if it became a symlink (or, for a directory, anything else).
// It returns the descriptor and what fstat says of it.
func openSource(dirfd int, name string, flags int, want stat) (int, stat, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		fd, err = unix.Openat(dirfd, name, flags, 0)
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, stat{}, ErrChanged
	}
	if errors.Is(err, unix.ENOENT) {
		return -1, stat{}, errVanished
	}
	if err != nil {
		return -1, stat{}, fmt.Errorf("open: %w", err)
	}
	got, err := statAt(fd, "")
	if err != nil {
		unix.Close(fd)
		return -1, stat{}, fmt.Errorf("stat the opened file: %w", err)
	}
	if got.id != want.id || got.typ() != want.typ() {
		unix.Close(fd)
		return -1, stat{}, ErrChanged
	}
	return fd, got, nil
}

// node names an entry of the walk: its name and the directory it is in
// (nil for the source directory itself). A path is built from it only for
// a message or a hard link; a directory's node is shared by the nodes of
// its entries.
type node struct {
	parent *node
	name   string
}

// child returns the node of the entry name of the directory n.
func (n *node) child(name string) node { return node{parent: n, name: name} }

// path returns the path of n relative to the source, "." for the source.
func (n node) path() string {
	if n.parent == nil {
		return "."
	}
	size := 0
	for m := &n; m.parent != nil; m = m.parent {
		size += len(m.name) + 1
	}
	b := make([]byte, size-1)
	end := len(b)
	for m := &n; m.parent != nil; m = m.parent {
		end -= copy(b[end-len(m.name):end], m.name)
		if end > 0 {
			end--
			b[end] = '/'
		}
	}
	return string(b)
}

// show quotes the path of n for a message, shortened in the middle if it
// is long.
func (n node) show() string { return show(n.path()) }

// frame is a directory being walked: its descriptor in the source, the
// names read from it and not handled yet, and, in Contents, its copy.
type frame struct {
	src int
	// dst is the descriptor of the copy, -1 while a subdirectory is being
	// copied (it is opened again through the subdirectory's "..").
	dst   int
	dstID fileID
	// at names the directory; its path is not kept.
	at      *node
	st      stat
	pending []string
	eof     bool
}

// next returns the next name of the directory, or "" at its end; buf is
// the buffer for getdents.
func (f *frame) next(buf []byte) (string, error) {
	for len(f.pending) == 0 && !f.eof {
		n, err := unix.Getdents(f.src, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read directory %s: %w", f.at.show(), err)
		}
		if n == 0 {
			f.eof = true
			break
		}
		_, _, f.pending = unix.ParseDirent(buf[:n], -1, f.pending[:0])
	}
	if len(f.pending) == 0 {
		return "", nil
	}
	name := f.pending[0]
	f.pending = f.pending[1:]
	return name, nil
}

// close closes the frame's descriptors.
func (f *frame) close() {
	if f.src >= 0 {
		unix.Close(f.src)
		f.src = -1
	}
	if f.dst >= 0 {
		unix.Close(f.dst)
		f.dst = -1
	}
}

// visitor is what walk does with the tree.
type visitor interface {
	// enter handles the entry at of the directory parent, at depth (1 for
	// the entries of the root), and returns the frame of a directory to
	// walk next, or nil.
	enter(parent *frame, at node, depth int) (*frame, error)
	// leave is called once all entries of f are handled, before it is
	// closed; parent is nil for the root.
	leave(f, parent *frame) error
}

// walk walks the tree of the frame root depth first with an explicit
// stack, checking ctx between entries and counting them against
// lim.MaxEntries (lim has its defaults set). It closes every frame, root
// included, also on failure.
func walk(ctx context.Context, root *frame, v visitor, lim Limits) error {
	stack := []*frame{root}
	defer func() {
		for _, f := range stack {
			f.close()
		}
	}()
	buf := make([]byte, direntBytes)
	entries := 0
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped: %w", err)
		}
		top := stack[len(stack)-1]
		name, err := top.next(buf)
		if err != nil {
			return err
		}
		if name != "" {
			at := top.at.child(name)
			if entries++; entries > lim.MaxEntries {
				return limitErr(at, ErrTooManyEntries, "more than %d", lim.MaxEntries)
			}
			child, err := v.enter(top, at, len(stack))
			if err != nil {
				return err
			}
			if child != nil {
				stack = append(stack, child)
			}
			continue
		}
		var parent *frame
		if len(stack) > 1 {
			parent = stack[len(stack)-2]
		}
		if err := v.leave(top, parent); err != nil {
			return err
		}
		top.close()
		stack = stack[:len(stack)-1]
	}
	return nil
}

// limitErr is the *LimitError of a walk that met at, in a tree beyond
// one of its limits: which (ErrTooDeep, ...), and what format says of it.
func limitErr(at node, which error, format string, args ...any) error {
	return &LimitError{Path: shorten(at.path()), Which: which, Detail: fmt.Sprintf(format, args...)}
}

// openDir opens the subdirectory at of parent in the source, once it
// checked its depth against maxDepth.
func openDir(parent *frame, at node, st stat, depth, maxDepth int) (*frame, error) {
	if depth > maxDepth {
		return nil, limitErr(at, ErrTooDeep, "more than %d levels", maxDepth)
	}
	if beforeOpen != nil {
		beforeOpen(at)
	}
	fd, got, err := openSource(parent.src, at.name, unix.O_RDONLY|unix.O_DIRECTORY, st)
	if err != nil {
		return nil, err
	}
	return &frame{src: fd, dst: -1, at: &at, st: got}, nil
}

// rootFrame opens the directory of root as the root frame.
func rootFrame(root *os.Root) (*frame, error) {
	fd, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	st, err := statAt(fd, "")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", root.Name(), err)
	}
	return &frame{src: fd, dst: -1, at: &node{name: "."}, st: st}, nil
}

// openRoot returns a descriptor of its own on the directory of root.
func openRoot(root *os.Root) (int, error) {
	f, err := root.Open(".")
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", root.Name(), err)
	}
	defer f.Close()
	conn, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := conn.Control(func(raw uintptr) {
		fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("duplicate the descriptor of %s: %w", root.Name(), derr)
	}
	return fd, nil
}
