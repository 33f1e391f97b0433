// Package clone copies the content of one volume directory into another,
// for volume clones (a claim whose dataSource is another claim). Contents
// copies a tree entry by entry, cloning each file's extents where the
// filesystem can (reflink, FICLONE) and copying its bytes where it cannot;
// Size measures what Contents would copy, for progress totals. A btrfs
// snapshot of a whole volume is made by the quota package (Snapshotter);
// MethodSnapshot names it here.
//
// # What is copied
//
// Everything inside the source directory: directories, regular files,
// symlinks (as links with the same target, never followed), hard links
// (files with more than one link and the same device and inode become hard
// links in the destination), FIFOs and device nodes (recreated with mknod;
// a device node the kernel refuses to create, as in a user namespace, is
// left out), each with its mode (setuid, setgid and sticky bits included),
// owner, access and modification times and extended attributes (user.,
// trusted., security., and ACLs as system.posix_acl_*). The source
// directory itself is not copied, but its mode, owner, times and extended
// attributes are given to the destination directory. Sparse files stay
// sparse: only the data between holes (SEEK_DATA, SEEK_HOLE) is copied.
//
// Left out, each counted and logged once per reason with an example path
// through the logger of the context: sockets (they mean nothing without
// their listener), entries removed while the copy runs, the content of
// mount points inside the source (they are made as empty directories:
// what is mounted there is not the volume's), extended attributes the
// destination refuses (EOPNOTSUPP, or EPERM/EACCES for security. and
// trusted.), and device nodes it may not create (EPERM). Not copied at
// all: inode flags (chattr: immutable, append-only, nocow), btrfs nested
// subvolumes as such (they become directories), change and birth times.
//
// # Safety
//
// The source is a volume a pod may be writing to while it is copied, so
// every entry is reached from an open descriptor of its parent directory,
// one name at a time, with O_NOFOLLOW: the walk starts from descriptors of
// the two os.Roots and never resolves a path of more than one component in
// the source. A symlink swapped in for a directory or a file before it is
// opened is therefore never followed (the open fails: ELOOP, ENOTDIR), and an
// entry opened is checked to be the one lstat saw (same device, inode and
// type) before anything is read from it. An entry that changed is looked
// at again, once, and copied as what it now is (a symlink as a link); if
// it changes again, Contents fails with ErrChanged. So nothing outside the
// source is read and nothing outside the destination is written. Files
// are copied as they are read: a volume written to during the copy gives
// no point-in-time copy (a btrfs snapshot does).
//
// Contents walks the tree with an explicit stack, holding one descriptor
// per directory level of the source (and a few more). Each level keeps
// only its own name and a link to its parent's, never its path: a path is
// built only for a message or a hard link, so what a walk holds grows
// with the depth and the entries, not with the depth times the length of
// the path. The directory entries read and not handled yet are at most
// one small getdents buffer (4 KiB) per level.
//
// # Limits
//
// A volume is written by its pods, so its tree is not trusted to be
// reasonable. Contents and Size refuse a tree beyond the Limits of their
// Options, with a *LimitError that wraps ErrLimit and one of ErrTooDeep,
// ErrTooManyEntries or ErrTooManyLinks, and says which limit and where:
// directories nested deeper than MaxDepth (default DefaultMaxDepth,
// 1024), more than MaxEntries entries (default DefaultMaxEntries, 10
// million), or more than MaxLinks files with several links whose other
// links were not met yet (default DefaultMaxLinks, 100,000: each is
// remembered, with its name, until all its links are copied). With the
// defaults, a walk holds at most some 6 MiB for its levels and some 40
// MiB for its hard links, whatever the tree.
//
// It checks its context between entries and between chunks of a file
// (8 MiB) and then returns the context's error wrapped; a single FICLONE
// is not interrupted. On failure the destination holds a partial copy:
// removing it is the caller's job.
package clone

import (
	"errors"
	"fmt"
)

// Method says how a clone's content was made (reported by the API and in
// events).
type Method string

// Methods of making a clone's content.
const (
	// MethodSnapshot is a btrfs subvolume snapshot (made by the quota
	// package's Snapshotter, named here).
	MethodSnapshot Method = "snapshot"
	// MethodReflink means every regular file with data was cloned with
	// FICLONE: the copy shares its extents with the source.
	MethodReflink Method = "reflink"
	// MethodCopy means the tree was copied entry by entry with the bytes
	// of at least one file copied, or that there was no file data to copy
	// at all (an empty tree, or only empty files): nothing is shared.
	MethodCopy Method = "copy"
)

// Default limits of a walk (see Limits).
const (
	// DefaultMaxDepth is how deep directories may nest below the source
	// directory (its entries are at depth 1) unless Limits.MaxDepth says
	// otherwise. A level holds a descriptor and at most some 6 KiB.
	DefaultMaxDepth = 1024
	// DefaultMaxEntries is how many entries (of every type, directories
	// included) a walk handles unless Limits.MaxEntries says otherwise.
	DefaultMaxEntries = 10_000_000
	// DefaultMaxLinks is how many files with several links a walk
	// remembers at once unless Limits.MaxLinks says otherwise: a file is
	// remembered, by name, from its first link met until its last, so a
	// tree whose files are all linked from within it holds few at a time.
	DefaultMaxLinks = 100_000
)

// Limits bound what a walk (Contents, Size) takes on; a zero field means
// its default. Beyond a limit the walk fails with an error wrapping
// ErrLimit and the limit's own error.
type Limits struct {
	// MaxDepth is how deep directories may nest below the source
	// directory (its entries are at depth 1); deeper is ErrTooDeep.
	MaxDepth int
	// MaxEntries is how many entries the walk may meet; more is
	// ErrTooManyEntries.
	MaxEntries int
	// MaxLinks is how many files with several links, met through one
	// link and not through all of them yet, the walk may remember at
	// once; more is ErrTooManyLinks.
	MaxLinks int
}

// withDefaults returns l with its zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxLinks <= 0 {
		l.MaxLinks = DefaultMaxLinks
	}
	return l
}

// Progress is how far a copy is.
type Progress struct {
	// CopiedBytes counts the bytes of regular files copied so far, holes
	// included; a cloned file counts with its whole size.
	CopiedBytes int64
	// TotalBytes is what Size reported, or CopiedBytes if that is more
	// (files grew meanwhile).
	TotalBytes int64
}

// Options tune Contents.
type Options struct {
	// Progress, if set, is called on Contents's goroutine once at least
	// 64 MiB more were copied or at least a second passed since its last
	// call, checked after each file and each chunk of 8 MiB, never per
	// write; and once at the end of a successful copy.
	Progress func(Progress)
	// TotalBytes is the total reported in Progress, as Size returned it.
	// When it is 0 and Progress is set, Contents calls Size first.
	TotalBytes int64
	// NoReflink forces byte copies with read and write: no FICLONE and no
	// copy_file_range, which clones extents itself on btrfs and xfs (for
	// tests and benchmarks).
	NoReflink bool
	// Limits bound the tree Contents copies (and measures, when it calls
	// Size).
	Limits Limits
}

var (
	// ErrLimit is wrapped by the errors of a walk that went beyond one of
	// its Limits: a tree the caller should refuse, not retry.
	ErrLimit = errors.New("beyond the limits of a clone by copy")
	// ErrTooDeep is returned when directories nest deeper than
	// Limits.MaxDepth.
	ErrTooDeep = errors.New("directories nest too deep")
	// ErrTooManyEntries is returned when the tree holds more entries than
	// Limits.MaxEntries.
	ErrTooManyEntries = errors.New("too many entries")
	// ErrTooManyLinks is returned when more files with several links than
	// Limits.MaxLinks are remembered at once.
	ErrTooManyLinks = errors.New("too many files with several links")
	// ErrChanged is returned when an entry of the source changed twice
	// between being looked at and being opened.
	ErrChanged = errors.New("changed while being copied")
	// ErrNotEmpty is returned when the destination is not empty.
	ErrNotEmpty = errors.New("destination directory is not empty")
)

// LimitError is the error of a walk that met a tree beyond one of its
// Limits; it wraps ErrLimit and Which.
type LimitError struct {
	// Path is where the walk was, relative to the source (shortened in
	// the middle if long).
	Path string
	// Which is the limit passed: ErrTooDeep, ErrTooManyEntries or
	// ErrTooManyLinks.
	Which error
	// Detail says the limit, e.g. "more than 1024 levels".
	Detail string
}

// Error says where, which limit, and that it is one.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %v: %s (%v)", show(e.Path), e.Which, e.Detail, ErrLimit)
}

// Unwrap returns Which and ErrLimit.
func (e *LimitError) Unwrap() []error { return []error{e.Which, ErrLimit} }

// show quotes a path for a message, shortened as shorten does.
func show(rel string) string { return fmt.Sprintf("%q", shorten(rel)) }

// shorten shortens a long path in the middle (a path at DefaultMaxDepth
// can be a quarter of a megabyte).
func shorten(rel string) string {
	const keep = 120
	if len(rel) > 2*keep+16 {
		rel = rel[:keep] + "..." + rel[len(rel)-keep:]
	}
	return rel
}
