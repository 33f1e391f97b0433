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
		total, err := Size(ctx, src)
		if err != nil {
			return "", err
		}
		opts.TotalBytes = total
	}
	c := &copier{
		ctx:   ctx,
		dst:   dst,
		opts:  opts,
		links: map[fileID]string{},
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
	err = walk(ctx, root, c)
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
	// links maps each inode with more than one link that was copied to
	// the path of its copy.
	links map[fileID]string
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

// method says how the copy was made.
func (c *copier) method() Method {
	if c.cloned > 0 && c.copied == 0 {
		return MethodReflink
	}
	return MethodCopy
}

// enter copies the entry name of parent, looking at it once more if it
// changed meanwhile.
func (c *copier) enter(parent *frame, name string, depth int) (*frame, error) {
	rel := join(parent.rel, name)
	child, err := c.entry(parent, name, rel, depth)
	if errors.Is(err, ErrChanged) {
		child, err = c.entry(parent, name, rel, depth)
	}
	if errors.Is(err, errVanished) {
		c.notes.add(noteVanished, rel)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", show(rel), err)
	}
	return child, nil
}

// entry copies the entry name of parent, whose path is rel.
func (c *copier) entry(parent *frame, name, rel string, depth int) (*frame, error) {
	st, err := statAt(parent.src, name)
	if errors.Is(err, unix.ENOENT) {
		return nil, errVanished
	}
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	switch st.typ() {
	case unix.S_IFDIR:
		return c.dir(parent, name, rel, st, depth)
	case unix.S_IFSOCK:
		c.notes.add(noteSocket, rel)
		return nil, nil
	}
	if st.nlink > 1 {
		if first, ok := c.links[st.id]; ok {
			if linked, err := c.link(first, rel); linked || err != nil {
				return nil, err
			}
		}
	}
	switch st.typ() {
	case unix.S_IFREG:
		err = c.regular(parent, name, rel, st)
	case unix.S_IFLNK:
		err = c.symlink(parent, name, rel, st)
	default:
		err = c.special(parent, name, rel, st)
	}
	if err == nil && st.nlink > 1 {
		c.links[st.id] = rel
	}
	return nil, err
}

// link makes rel in the copy a hard link to first, and reports whether it
// did: not when the destination has as many links to it as it allows.
func (c *copier) link(first, rel string) (bool, error) {
	err := c.dst.Link(first, rel)
	if errors.Is(err, unix.EMLINK) {
		c.notes.add(noteLinkLimit, rel)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hard link to %s: %w", show(first), err)
	}
	return true, nil
}

// dir makes the copy of the directory name of parent and returns its
// frame; a mount point is made as an empty directory.
func (c *copier) dir(parent *frame, name, rel string, st stat, depth int) (*frame, error) {
	if st.id == c.dstRoot {
		c.notes.add(noteDestination, rel)
		return nil, nil
	}
	if st.mountRoot {
		c.notes.add(noteMount, rel)
		if err := mkdir(parent.dst, name); err != nil {
			return nil, err
		}
		return nil, c.metaAt(parent, name, rel, st, true, false)
	}
	f, err := openDir(parent, name, rel, st, depth)
	if err != nil {
		return nil, err
	}
	if err := mkdir(parent.dst, name); err != nil {
		f.close()
		return nil, err
	}
	if f.dst, err = unix.Openat(parent.dst, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
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
	if err := c.metaFD(f.src, f.dst, f.rel, f.st); err != nil {
		return fmt.Errorf("%s: %w", show(f.rel), err)
	}
	if parent == nil {
		return nil
	}
	fd, err := unix.Openat(f.dst, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: open the copy of its parent again: %w", show(f.rel), err)
	}
	st, err := statAt(fd, "")
	if err != nil || st.id != parent.dstID {
		unix.Close(fd)
		return fmt.Errorf("%s: the copy of its parent moved: %w", show(f.rel), errors.Join(ErrChanged, err))
	}
	parent.dst = fd
	return nil
}

// regular copies the regular file name of parent.
func (c *copier) regular(parent *frame, name, rel string, st stat) error {
	if beforeOpen != nil {
		beforeOpen(rel)
	}
	src, fst, err := openSource(parent.src, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, st)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	dst, err := unix.Openat(parent.dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	err = c.data(src, dst, fst.size)
	if err == nil {
		err = c.metaFD(src, dst, rel, fst)
	}
	if cerr := unix.Close(dst); err == nil && cerr != nil {
		err = fmt.Errorf("close the copy: %w", cerr)
	}
	return err
}

// symlink copies the symlink name of parent as a symlink with the same
// target.
func (c *copier) symlink(parent *frame, name, rel string, st stat) error {
	n, err := unix.Readlinkat(parent.src, name, c.buf[:unix.PathMax+1])
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
	if err := unix.Symlinkat(string(c.buf[:n]), parent.dst, name); err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	return c.metaAt(parent, name, rel, st, false, true)
}

// special recreates the FIFO or device node name of parent; a device node
// the kernel does not let us create is left out.
func (c *copier) special(parent *frame, name, rel string, st stat) error {
	err := unix.Mknodat(parent.dst, name, st.typ()|0o600, int(st.rdev))
	if errors.Is(err, unix.EPERM) && st.typ() != unix.S_IFIFO {
		c.notes.add(noteDevice, rel)
		return nil
	}
	if err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	return c.metaAt(parent, name, rel, st, true, true)
}
