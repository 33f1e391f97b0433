package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"hostpath.dev/api/managerapi"
)

// pool is one storage pool: its name and its directory on the host. A pool
// named on the fly (see Config.PoolRoot) is the entry name of its parent,
// the pool root, and is only ever opened through an os.Root on the parent.
type pool struct {
	name string
	path string
	// parent is the pool root holding a pool named on the fly; "" for a
	// pool configured by path.
	parent string
}

// key is the lock key of a volume.
func (p *pool) key(name string) string { return p.name + "/" + name }

// open opens the pool root. A missing pool directory is PoolNotFound.
func (p *pool) open() (*os.Root, error) {
	if p.parent != "" {
		return p.openInParent()
	}
	root, err := os.OpenRoot(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, p.notPrepared()
	}
	if err != nil {
		return nil, fmt.Errorf("open pool %q at %s: %w", p.name, p.path, err)
	}
	return root, nil
}

// notPrepared is the PoolNotFound of a pool whose directory does not exist.
func (p *pool) notPrepared() error {
	return poolNotFoundf("pool %q directory %s does not exist; prepare it with PUT /v1/pools/%s", p.name, p.path, p.name)
}

// record reads the owner record of volume name (nil: none).
func (p *pool) record(root *os.Root, name string) (*record, error) {
	rec, err := readRecord(root, name)
	if err != nil {
		return nil, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	return rec, nil
}

// poolInfo returns the pool's capacity and size figures, or the reason
// they cannot be read.
func (s *Store) poolInfo(p *pool) managerapi.Pool {
	info := managerapi.Pool{Name: p.name, Path: p.path}
	root, err := p.open()
	if err != nil {
		info.Error = err.Error()
		return info
	}
	defer root.Close()
	st, err := statRoot(root)
	if err != nil {
		info.Error = err.Error()
		return info
	}
	info.CapacityBytes, info.FreeBytes = st.CapacityBytes, st.FreeBytes
	info.Inodes, info.FreeInodes = st.Inodes, st.FreeInodes
	info.ReadOnly = st.ReadOnly
	if err := s.sizes.fill(&info, p, root); err != nil {
		info.Error = err.Error()
	}
	return info
}

// volume describes the directory name with its owner record (nil: none).
func (p *pool) volume(name string, fi fs.FileInfo, rec *record) managerapi.Volume {
	v := managerapi.Volume{Name: name, Pool: p.name, Path: filepath.Join(p.path, name), Mode: managerapi.FormatMode(fi.Mode())}
	if rec != nil {
		since := rec.OwnedSince
		v.Owner, v.OwnedSince, v.Retained = rec.Owner, &since, rec.Retained
		v.ReclaimPolicy, v.ClaimNamespace = rec.ReclaimPolicy, rec.ClaimNamespace
		v.SizeBytes, v.Enforcement = rec.SizeBytes, rec.Enforcement
		v.Multihost = rec.Multihost
		v.CloneOf, v.CloneMethod = rec.CloneOf, rec.CloneMethod
	}
	return v
}

// kindOf names what a non-directory entry is, for messages.
func kindOf(fi fs.FileInfo) string {
	switch t := fi.Mode().Type(); {
	case t == 0:
		return "a file"
	case t&fs.ModeSymlink != 0:
		return "a symlink"
	case t&fs.ModeDir != 0:
		return "a directory"
	default:
		return "a special file"
	}
}

// fsStats are a filesystem's sizes, and whether it can be written.
type fsStats struct {
	CapacityBytes, FreeBytes, Inodes, FreeInodes int64
	// ReadOnly says that the filesystem, or the mount the pool is on, is
	// read-only (statfs's ST_RDONLY).
	ReadOnly bool
}

// statfsOf reads the statistics of the filesystem of an open file: statfs,
// replaced by tests that need a read-only pool.
var statfsOf = statfs

// statRoot reads the statistics of the filesystem of the pool root.
func statRoot(root *os.Root) (fsStats, error) {
	f, err := root.Open(".")
	if err != nil {
		return fsStats{}, fmt.Errorf("open pool root: %w", err)
	}
	defer f.Close()
	st, err := statfsOf(f)
	if err != nil {
		return fsStats{}, fmt.Errorf("statfs %s: %w", root.Name(), err)
	}
	return st, nil
}
