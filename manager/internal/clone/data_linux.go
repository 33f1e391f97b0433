//go:build linux

package clone

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// chunkBytes is how much data is copied between two checks of the
// context.
const chunkBytes = 8 << 20

// progressBytes is how many bytes are copied at most between two calls of
// Options.Progress, unless a second passes first.
const progressBytes = 64 << 20

// data copies the size bytes of the open regular file src into dst, new
// and empty: as a clone of its extents where the filesystem can, else byte
// by byte, data only, holes kept.
func (c *copier) data(src, dst int, size int64) error {
	if size == 0 {
		return nil
	}
	if !c.opts.NoReflink {
		err := unix.IoctlFileClone(dst, src)
		if err == nil {
			c.cloned++
			c.meter.add(size)
			return nil
		}
		if !cannotClone(err) {
			return fmt.Errorf("clone the file's extents (FICLONE): %w", err)
		}
	}
	c.copied++
	return c.copySparse(src, dst, size)
}

// cannotClone reports whether FICLONE failed with err because the files
// cannot share extents (another filesystem, one without reflinks, a file
// it refuses), so that a byte copy should be made instead.
func cannotClone(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EXDEV) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY)
}

// copySparse copies the data of the first size bytes of src into dst at
// the same offsets, skipping holes (SEEK_DATA, SEEK_HOLE), and gives dst
// the length size.
func (c *copier) copySparse(src, dst int, size int64) error {
	for off := int64(0); off < size; {
		data, hole, err := nextData(src, off, size)
		if err != nil {
			return err
		}
		c.meter.add(data - off)
		if err := c.copyRange(src, dst, data, hole); err != nil {
			return err
		}
		off = hole
	}
	if err := unix.Ftruncate(dst, size); err != nil {
		return fmt.Errorf("set the length of the copy: %w", err)
	}
	return nil
}

// nextData returns the first range of data in src from off, cut at size;
// data == hole == size when there is none.
func nextData(src int, off, size int64) (data, hole int64, err error) {
	data, err = unix.Seek(src, off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return size, size, nil // a hole up to the end
	}
	if errors.Is(err, unix.EINVAL) {
		return off, size, nil // no SEEK_DATA: all data
	}
	if err != nil {
		return 0, 0, fmt.Errorf("find data (SEEK_DATA): %w", err)
	}
	if data >= size {
		return size, size, nil
	}
	hole, err = unix.Seek(src, data, unix.SEEK_HOLE)
	if err != nil {
		return 0, 0, fmt.Errorf("find a hole (SEEK_HOLE): %w", err)
	}
	if hole <= data || hole > size {
		hole = size
	}
	return data, hole, nil
}

// copyRange copies the bytes from off to end of src into dst at the same
// offsets, in chunks, checking the context between them. It stops early
// where src ends (it shrank).
func (c *copier) copyRange(src, dst int, off, end int64) error {
	for off < end {
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("stopped: %w", err)
		}
		n, err := c.copyChunk(src, dst, off, int(min(end-off, chunkBytes)))
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		off += int64(n)
		c.meter.add(int64(n))
	}
	return nil
}

// copyChunk copies up to n bytes at off from src into dst, with
// copy_file_range (no data through user space) unless it is unsupported
// or reflinks are off, else with read and write, and returns how many.
func (c *copier) copyChunk(src, dst int, off int64, n int) (int, error) {
	if !c.opts.NoReflink && !c.noCopyRange {
		in, out := off, off
		w, err := unix.CopyFileRange(src, &in, dst, &out, n, 0)
		if err == nil {
			return w, nil
		}
		if !cannotCopyRange(err) {
			return 0, fmt.Errorf("copy_file_range: %w", err)
		}
		c.noCopyRange = true
	}
	buf := c.buf[:min(n, len(c.buf))]
	r, err := retry(func() (int, error) { return unix.Pread(src, buf, off) })
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	for w := 0; w < r; {
		k, err := retry(func() (int, error) { return unix.Pwrite(dst, buf[w:r], off+int64(w)) })
		if err != nil {
			return 0, fmt.Errorf("write the copy: %w", err)
		}
		w += k
	}
	return r, nil
}

// cannotCopyRange reports whether copy_file_range failed with err because
// the kernel, the filesystems or a seccomp filter do not support it.
func cannotCopyRange(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM)
}

// retry calls f again while it fails with EINTR.
func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// meter calls Options.Progress now and then.
type meter struct {
	fn                      func(Progress)
	total, copied, reported int64
	last                    time.Time
	now                     func() time.Time
}

// add counts n more bytes copied and reports progress if progressBytes
// were copied or a second passed since the last report.
func (m *meter) add(n int64) {
	m.copied += n
	if m.fn == nil {
		return
	}
	if t := m.now(); m.copied-m.reported >= progressBytes || t.Sub(m.last) >= time.Second {
		m.report(t)
	}
}

// report calls Options.Progress, if set, at time t.
func (m *meter) report(t time.Time) {
	if m.fn == nil {
		return
	}
	m.reported, m.last = m.copied, t
	m.fn(Progress{CopiedBytes: m.copied, TotalBytes: max(m.total, m.copied)})
}
