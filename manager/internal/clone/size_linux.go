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
// counted. It fails beyond lim (zero fields: the defaults) as Contents
// does.
func Size(ctx context.Context, src *os.Root, lim Limits) (int64, error) {
	lim = lim.withDefaults()
	root, err := rootFrame(src)
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", src.Name(), err)
	}
	s := &sizer{lim: lim, seen: map[fileID]uint32{}}
	if err := walk(ctx, root, s, lim); err != nil {
		return 0, fmt.Errorf("measure %s: %w", src.Name(), err)
	}
	return s.total, nil
}

// sizer is the visitor of Size.
type sizer struct {
	lim   Limits
	total int64
	// seen maps the inodes with several links counted already, and whose
	// other links were not all met yet, to how many are left; at most
	// lim.MaxLinks.
	seen map[fileID]uint32
}

// enter counts the entry at of parent if it is a regular file, and
// returns the frame of a directory.
func (s *sizer) enter(parent *frame, at node, depth int) (*frame, error) {
	st, err := statAt(parent.src, at.name)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: stat: %w", at.show(), err)
	}
	switch st.typ() {
	case unix.S_IFREG:
		if st.nlink > 1 {
			if left, ok := s.seen[st.id]; ok {
				if left <= 1 {
					delete(s.seen, st.id)
				} else {
					s.seen[st.id] = left - 1
				}
				return nil, nil
			}
			if len(s.seen) >= s.lim.MaxLinks {
				return nil, limitErr(at, ErrTooManyLinks, "more than %d whose other links are not copied yet", s.lim.MaxLinks)
			}
			s.seen[st.id] = st.nlink - 1
		}
		s.total += st.size
	case unix.S_IFDIR:
		if st.mountRoot {
			return nil, nil
		}
		f, err := openDir(parent, at, st, depth, s.lim.MaxDepth)
		if errors.Is(err, errVanished) || errors.Is(err, ErrChanged) {
			return nil, nil
		}
		if errors.Is(err, ErrLimit) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at.show(), err)
		}
		return f, nil
	}
	return nil, nil
}

// leave does nothing.
func (s *sizer) leave(*frame, *frame) error { return nil }
