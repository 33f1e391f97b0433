//go:build linux

package clone

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Size returns how many bytes Contents would copy from src: the sum of the
// sizes of its regular files (holes included, each file with several links
// once), walking src as Contents does, without following symlinks or
// entering mount points. Entries removed or replaced meanwhile are not
// counted. It fails with ErrTooDeep as Contents does.
func Size(ctx context.Context, src *os.Root) (int64, error) {
	root, err := rootFrame(src)
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", src.Name(), err)
	}
	s := &sizer{seen: map[fileID]bool{}}
	if err := walk(ctx, root, s); err != nil {
		return 0, fmt.Errorf("measure %s: %w", src.Name(), err)
	}
	return s.total, nil
}

// sizer is the visitor of Size.
type sizer struct {
	total int64
	// seen holds the inodes with several links counted already.
	seen map[fileID]bool
}

// enter counts the entry name of parent if it is a regular file, and
// returns the frame of a directory.
func (s *sizer) enter(parent *frame, name string, depth int) (*frame, error) {
	rel := join(parent.rel, name)
	st, err := statAt(parent.src, name)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: stat: %w", show(rel), err)
	}
	switch st.typ() {
	case unix.S_IFREG:
		if st.nlink > 1 {
			if s.seen[st.id] {
				return nil, nil
			}
			s.seen[st.id] = true
		}
		s.total += st.size
	case unix.S_IFDIR:
		if st.mountRoot {
			return nil, nil
		}
		f, err := openDir(parent, name, rel, st, depth)
		if errors.Is(err, errVanished) || errors.Is(err, ErrChanged) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", show(rel), err)
		}
		return f, nil
	}
	return nil, nil
}

// leave does nothing.
func (s *sizer) leave(*frame, *frame) error { return nil }
