package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// topName names the directory that hoisted directories go to, for messages.
func topName(top string) string {
	if top == "." {
		return "the top of the volume"
	}
	return "the top of subvolume " + top
}

// readBatch is how many directory entries are read at a time.
const readBatch = 256

// hoistPrefix starts the names of the directories that removeTree moves up
// to the top of the volume while it removes it.
const hoistPrefix = ".hostpath-rm-"

// removeTree removes the directory name of the pool root and everything in
// it, however deep, with a bounded number of open files.
//
// A pod can nest directories deeper than any file descriptor limit, which
// defeats a recursive removal (os.Root.RemoveAll keeps one descriptor per
// level). removeTree never goes deeper than one level below the volume
// directory: it empties each top-level directory by removing its files and
// renaming its subdirectories up to the top level (under fresh names that
// start with hoistPrefix), where a later pass empties them in turn. So at
// most a handful of descriptors are open and every path it resolves has at
// most two components; every entry is visited a bounded number of times.
//
// All access goes through an os.Root opened on the volume directory, so a
// symlink, even one swapped in during the removal, can never lead outside
// the volume; symlinks are removed as links and never followed. A directory
// the manager may not read or write (mode 0000 without CAP_DAC_OVERRIDE) is
// made 0700 first. ctx is checked before every entry: a cancelled removal
// stops with ctx.Err() wrapped, leaving what is not removed yet.
//
// btrfs subvolumes that a pod makes inside its volume are no mounts, but a
// rename of anything other than a subvolume's root fails across them
// (EXDEV): see hoistWithin. An emptied subvolume is removed like an empty
// directory.
//
// removeTree must not be used on a tree with filesystems mounted inside: a
// rename fails across them but a removal would descend into them. The
// caller checks the mount table first.
func removeTree(ctx context.Context, root *os.Root, name string) error {
	vroot, err := root.OpenRoot(name)
	if errors.Is(err, fs.ErrPermission) {
		if err := root.Chmod(name, 0o700); err != nil {
			return fmt.Errorf("make volume directory accessible: %w", err)
		}
		vroot, err = root.OpenRoot(name)
	}
	if err != nil {
		return fmt.Errorf("open volume directory: %w", err)
	}
	r := &remover{ctx: ctx, root: vroot}
	err = r.emptyDir(".", true)
	if cerr := vroot.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close volume directory: %w", cerr)
	}
	if err != nil {
		return err
	}
	if err := root.Remove(name); err != nil {
		return fmt.Errorf("remove the emptied volume directory: %w", err)
	}
	return nil
}

// remover empties one volume directory, its root.
type remover struct {
	ctx     context.Context
	root    *os.Root
	removed int
}

// emptyDir removes the entries of dir until it has none. At the top
// (dir "."), subdirectories are emptied and removed; below it, they are
// renamed to the top.
func (r *remover) emptyDir(dir string, top bool) error {
	for {
		n, err := r.pass(dir, top)
		if err != nil || n == 0 {
			return err
		}
	}
}

// pass reads dir once to its end, removing (or moving up) what it finds, and
// returns how many entries it saw. Entries created meanwhile may be missed:
// the caller passes again until a pass sees none.
func (r *remover) pass(dir string, top bool) (int, error) {
	f, err := r.openDir(dir)
	if errors.Is(err, errChanged) {
		// Not the directory that was listed: remove whatever took its
		// place as an entry, without following it.
		return 0, r.remove(dir)
	}
	if errors.Is(err, fs.ErrNotExist) && dir != "." {
		return 0, nil // removed meanwhile
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	seen := 0
	for {
		entries, err := f.ReadDir(readBatch)
		for _, e := range entries {
			seen++
			if err := r.ctx.Err(); err != nil {
				return seen, fmt.Errorf("stopped after removing %d entries: %w", r.removed, err)
			}
			p := path.Join(dir, e.Name())
			switch {
			case !e.IsDir():
				err = r.remove(p)
			case top:
				if err = r.emptyDir(p, false); err == nil {
					err = r.remove(p)
				}
			default:
				err = r.hoist(p)
				if errors.Is(err, syscall.EXDEV) {
					err = r.hoistWithin(dir, p)
				}
			}
			if err != nil {
				return seen, err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(entries) == 0) {
			return seen, nil
		}
		if err != nil {
			return seen, fmt.Errorf("read directory %s: %w", dir, err)
		}
	}
}

// errChanged says that a path no longer names the directory listed.
var errChanged = errors.New("changed while being removed")

// openDir opens the directory dir of the volume for reading, making it
// accessible first if need be.
func (r *remover) openDir(dir string) (*os.File, error) {
	f, err := r.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if errors.Is(err, fs.ErrPermission) {
		if err := r.root.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("make directory %s accessible: %w", dir, err)
		}
		f, err = r.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, errChanged
	}
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", dir, err)
	}
	if dir == "." {
		return f, nil
	}
	// OpenFile follows a symlink (within the volume) that replaced the
	// directory after it was listed; such a path is removed as a link.
	fi, err := f.Stat()
	if err == nil {
		var li fs.FileInfo
		if li, err = r.root.Lstat(dir); err == nil && !os.SameFile(fi, li) {
			err = errChanged
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// remove removes one file, symlink or empty directory of the volume.
func (r *remover) remove(p string) error {
	err := r.root.Remove(p)
	if errors.Is(err, fs.ErrPermission) {
		if err := r.root.Chmod(path.Dir(p), 0o700); err != nil {
			return fmt.Errorf("make directory %s writable: %w", path.Dir(p), err)
		}
		err = r.root.Remove(p)
	}
	switch {
	case err == nil:
		r.removed++
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("remove %s: %w", p, err)
	}
}

// hoistWithin handles the directory p of dir that hoist could not move to
// the top of the volume because it lies in another btrfs subvolume (EXDEV):
// one a pod made inside its volume. Subvolume roots move anywhere, so hoist
// brings every nested subvolume to the top, and a subvolume is only ever
// emptied from there. So dir is either such a subvolume at the top (one
// path component), whose directories are then emptied and removed in place
// as the top's are, or a directory of one (two components), whose
// directories are moved to that subvolume's top instead. Paths stay at
// most three components long.
func (r *remover) hoistWithin(dir, p string) error {
	if sub, _, nested := strings.Cut(dir, "/"); nested {
		return r.hoistTo(sub, p)
	}
	if err := r.emptyDir(p, false); err != nil {
		return err
	}
	return r.remove(p)
}

// hoist renames the directory p to a fresh name at the top of the volume.
func (r *remover) hoist(p string) error {
	return r.hoistTo(".", p)
}

// hoistTo renames the directory p to a fresh name in the directory top.
func (r *remover) hoistTo(top, p string) error {
	madeWritable := false
	for try := 0; ; try++ {
		err := r.root.Rename(p, path.Join(top, hoistPrefix+randomHex()))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fs.ErrExist) && try < 3:
			// The name is taken (by chance or by a pod): draw another.
		case errors.Is(err, fs.ErrPermission) && !madeWritable:
			// Moving a directory writes its parent and its "..".
			for _, d := range []string{path.Dir(p), p} {
				if err := r.root.Chmod(d, 0o700); err != nil {
					return fmt.Errorf("make directory %s writable: %w", d, err)
				}
			}
			madeWritable = true
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case errors.Is(err, syscall.EXDEV):
			return err // another subvolume: the caller knows what to do
		default:
			return fmt.Errorf("move directory %s to %s: %w", p, topName(top), err)
		}
	}
}
