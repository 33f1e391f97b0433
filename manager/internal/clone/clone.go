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
// per directory level of the source (and a few more), so MaxDepth bounds
// both the stack and the descriptors; deeper trees fail with ErrTooDeep.
// It checks its context between entries and between chunks of a file
// (8 MiB) and then returns the context's error wrapped; a single FICLONE
// is not interrupted. On failure the destination holds a partial copy:
// removing it is the caller's job.
package clone

import "errors"

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

// MaxDepth is how deep directories may nest below the source directory
// (its entries are at depth 1); Contents and Size fail with ErrTooDeep
// beyond it.
const MaxDepth = 4096

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
}

var (
	// ErrTooDeep is returned when directories nest deeper than MaxDepth.
	ErrTooDeep = errors.New("directories nest too deep")
	// ErrChanged is returned when an entry of the source changed twice
	// between being looked at and being opened.
	ErrChanged = errors.New("changed while being copied")
	// ErrNotEmpty is returned when the destination is not empty.
	ErrNotEmpty = errors.New("destination directory is not empty")
)
