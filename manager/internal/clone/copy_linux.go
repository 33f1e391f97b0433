//go:build linux

package clone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Contents copies everything inside src into dst, an existing empty
// directory, and gives dst the mode, owner, times and extended attributes
// of src (see the package documentation for what is copied and how). It
// returns MethodReflink when every regular file with data was cloned,
// MethodCopy otherwise. Before it returns, it flushes the filesystem of
// dst (syncfs), so that the copy is on disk before the caller renames it
// into place. On failure, including a cancelled ctx (its error is
// wrapped), dst holds a partial copy, which the caller removes. What is
// left out (sockets, refused attributes, ...) is logged through the logger
// of ctx.
func Contents(ctx context.Context, src, dst *os.Root, opts Options) (Method, error) {
	if opts.Progress != nil && opts.TotalBytes == 0 {
		total, err := Size(ctx, src, opts.Limits)
		if err != nil {
			return "", err
		}
		opts.TotalBytes = total
	}
	opts.Limits = opts.Limits.withDefaults()
	c := &copier{
		ctx:   ctx,
		dst:   dst,
		opts:  opts,
		links: map[fileID]*link{},
		meter: meter{fn: opts.Progress, total: opts.TotalBytes, now: time.Now},
		buf:   make([]byte, 1<<20),
	}
	c.meter.last = c.meter.now()
	if _, err := os.Stat(procFD); err != nil {
		c.noProc = true
	}
	root, err := c.start(src, dst)
	if err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", src.Name(), dst.Name(), err)
	}
	err = walk(ctx, root, c, opts.Limits)
	c.notes.log(ctx, src.Name())
	if err == nil {
		err = syncfs(dst)
	}
	if err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", src.Name(), dst.Name(), err)
	}
	c.meter.report(c.meter.now())
	return c.method(), nil
}

// syncfs writes the filesystem of root to disk.
func syncfs(root *os.Root) error {
	fd, err := openRoot(root)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("flush the copy to disk (syncfs): %w", err)
	}
	return nil
}

// copier is the visitor of Contents.
type copier struct {
	ctx  context.Context
	dst  *os.Root
	opts Options
	// links maps each inode with more than one link that was copied, and
	// whose other links were not all met yet, to its first copy; at most
	// opts.Limits.MaxLinks.
	links map[fileID]*link
	meter meter
	// cloned and copied count the regular files with data cloned and
	// copied.
	cloned, copied int
	// noCopyRange is set once copy_file_range failed as unsupported.
	noCopyRange bool
	// noProc says that /proc/self/fd is missing, so the extended
	// attributes of symlinks and special files cannot be reached.
	noProc bool
	// buf is the buffer of read/write copies; xbuf and vbuf those of
	// extended attribute names and values.
	buf, xbuf, vbuf []byte
	notes           notes
	// dstRoot is the destination directory, never copied into itself.
	dstRoot fileID
}

// start opens the root frame of the copy and checks that dst is empty.
func (c *copier) start(src, dst *os.Root) (*frame, error) {
	root, err := rootFrame(src)
	if err != nil {
		return nil, err
	}
	if root.dst, err = openRoot(dst); err != nil {
		root.close()
		return nil, err
	}
	st, err := statAt(root.dst, "")
	if err == nil {
		err = checkEmpty(root.dst, c.buf)
	}
	if err != nil {
		root.close()
		return nil, err
	}
	root.dstID, c.dstRoot = st.id, st.id
	return root, nil
}

// checkEmpty fails with ErrNotEmpty unless the directory fd is empty.
func checkEmpty(fd int, buf []byte) error {
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the destination directory: %w", err)
		}
		if n == 0 {
			return nil
		}
		if _, _, names := unix.ParseDirent(buf[:n], 1, nil); len(names) > 0 {
			return ErrNotEmpty
		}
	}
}

// link is the first copy of a file with several links: where it is, and
// how many of its other links are still to be met.
type link struct {
	first node
	left  uint32
}

// method says how the copy was made.
func (c *copier) method() Method {
	if c.cloned > 0 && c.copied == 0 {
		return MethodReflink
	}
	return MethodCopy
}

// enter copies the entry at of parent, looking at it once more if it
// changed meanwhile.
func (c *copier) enter(parent *frame, at node, depth int) (*frame, error) {
	child, err := c.entry(parent, at, depth)
	if errors.Is(err, ErrChanged) {
		child, err = c.entry(parent, at, depth)
	}
	if errors.Is(err, errVanished) {
		c.notes.add(noteVanished, at)
		return nil, nil
	}
	if errors.Is(err, ErrLimit) {
		return nil, err // it names the entry already
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at.show(), err)
	}
	return child, nil
}

// entry copies the entry at of parent.
func (c *copier) entry(parent *frame, at node, depth int) (*frame, error) {
	st, err := statAt(parent.src, at.name)
	if errors.Is(err, unix.ENOENT) {
		return nil, errVanished
	}
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	switch st.typ() {
	case unix.S_IFDIR:
		return c.dir(parent, at, st, depth)
	case unix.S_IFSOCK:
		c.notes.add(noteSocket, at)
		return nil, nil
	}
	if st.nlink > 1 {
		if l, ok := c.links[st.id]; ok {
			linked, err := c.link(parent, l.first, at)
			if err != nil {
				return nil, err
			}
			if linked {
				if l.left--; l.left == 0 {
					delete(c.links, st.id)
				}
				return nil, nil
			}
		}
	}
	switch st.typ() {
	case unix.S_IFREG:
		err = c.regular(parent, at, st)
	case unix.S_IFLNK:
		err = c.symlink(parent, at, st)
	default:
		err = c.special(parent, at, st)
	}
	if err == nil && st.nlink > 1 {
		err = c.remember(st, at)
	}
	return nil, err
}

// remember keeps at as the first copy of the file st describes, which
// has other links, until they are all met; more than MaxLinks such files
// at once is ErrTooManyLinks.
func (c *copier) remember(st stat, at node) error {
	if l, ok := c.links[st.id]; ok {
		// The destination took no more links to the first copy
		// (EMLINK): the next ones link to this one.
		l.first = at
		if l.left--; l.left == 0 {
			delete(c.links, st.id)
		}
		return nil
	}
	if len(c.links) >= c.opts.Limits.MaxLinks {
		return limitErr(at, ErrTooManyLinks, "more than %d whose other links are not copied yet", c.opts.Limits.MaxLinks)
	}
	c.links[st.id] = &link{first: at, left: st.nlink - 1}
	return nil
}

// link makes at in the copy a hard link to first, and reports whether it
// did: not when the destination has as many links to it as it allows.
func (c *copier) link(parent *frame, first, at node) (bool, error) {
	var err error
	if first.parent == at.parent {
		// In the same directory, whose copy is open.
		err = unix.Linkat(parent.dst, first.name, parent.dst, at.name, 0)
	} else {
		err = c.dst.Link(first.path(), at.path())
	}
	if errors.Is(err, unix.EMLINK) {
		c.notes.add(noteLinkLimit, at)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hard link to %s: %w", first.show(), err)
	}
	return true, nil
}

// dir makes the copy of the directory at of parent and returns its
// frame; a mount point is made as an empty directory.
func (c *copier) dir(parent *frame, at node, st stat, depth int) (*frame, error) {
	if st.id == c.dstRoot {
		c.notes.add(noteDestination, at)
		return nil, nil
	}
	if st.mountRoot {
		c.notes.add(noteMount, at)
		if err := mkdir(parent.dst, at.name); err != nil {
			return nil, err
		}
		return nil, c.metaAt(parent, at, st, true, false)
	}
	f, err := openDir(parent, at, st, depth, c.opts.Limits.MaxDepth)
	if err != nil {
		return nil, err
	}
	if err := mkdir(parent.dst, at.name); err != nil {
		f.close()
		return nil, err
	}
	if f.dst, err = unix.Openat(parent.dst, at.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		f.close()
		return nil, fmt.Errorf("open the copy: %w", err)
	}
	dst, err := statAt(f.dst, "")
	if err != nil {
		f.close()
		return nil, fmt.Errorf("stat the copy: %w", err)
	}
	f.dstID = dst.id
	// The parent's copy is opened again through the copy's "..": one
	// descriptor per level, not two.
	unix.Close(parent.dst)
	parent.dst = -1
	return f, nil
}

// mkdir makes the directory name in dirfd, owner-only until leave gives it
// its mode.
func mkdir(dirfd int, name string) error {
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	return nil
}

// leave gives the copy of the directory f its metadata, once its entries
// are copied (their creation changed its times; a default ACL would have
// changed theirs), and opens the copy of parent again.
func (c *copier) leave(f, parent *frame) error {
	if err := c.metaFD(f.src, f.dst, *f.at, f.st); err != nil {
		return fmt.Errorf("%s: %w", f.at.show(), err)
	}
	if parent == nil {
		return nil
	}
	fd, err := unix.Openat(f.dst, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: open the copy of its parent again: %w", f.at.show(), err)
	}
	st, err := statAt(fd, "")
	if err != nil || st.id != parent.dstID {
		unix.Close(fd)
		return fmt.Errorf("%s: the copy of its parent moved: %w", f.at.show(), errors.Join(ErrChanged, err))
	}
	parent.dst = fd
	return nil
}

// regular copies the regular file at of parent.
func (c *copier) regular(parent *frame, at node, st stat) error {
	if beforeOpen != nil {
		beforeOpen(at)
	}
	src, fst, err := openSource(parent.src, at.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, st)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	dst, err := unix.Openat(parent.dst, at.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	err = c.data(src, dst, fst.size)
	if err == nil {
		err = c.metaFD(src, dst, at, fst)
	}
	if cerr := unix.Close(dst); err == nil && cerr != nil {
		err = fmt.Errorf("close the copy: %w", cerr)
	}
	return err
}

// symlink copies the symlink at of parent as a symlink with the same
// target.
func (c *copier) symlink(parent *frame, at node, st stat) error {
	n, err := unix.Readlinkat(parent.src, at.name, c.buf[:unix.PathMax+1])
	if errors.Is(err, unix.EINVAL) {
		return ErrChanged // no longer a symlink
	}
	if errors.Is(err, unix.ENOENT) {
		return errVanished
	}
	if err != nil {
		return fmt.Errorf("read the symlink: %w", err)
	}
	if n > unix.PathMax {
		return fmt.Errorf("read the symlink: %w", unix.ENAMETOOLONG)
	}
	if err := unix.Symlinkat(string(c.buf[:n]), parent.dst, at.name); err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	return c.metaAt(parent, at, st, false, true)
}

// special recreates the FIFO or device node at of parent; a device node
// the kernel does not let us create is left out.
func (c *copier) special(parent *frame, at node, st stat) error {
	err := unix.Mknodat(parent.dst, at.name, st.typ()|0o600, int(st.rdev))
	if errors.Is(err, unix.EPERM) && st.typ() != unix.S_IFIFO {
		c.notes.add(noteDevice, at)
		return nil
	}
	if err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	return c.metaAt(parent, at, st, true, true)
}
