package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"k8s.io/klog/v2"
)

// Pools named on the fly live in the pool root (Config.PoolRoot): a valid
// pool name that is not configured by path is the directory PoolRoot/NAME.
// PreparePool creates it; from then on it is served like a configured pool,
// also by a new Store (after a restart), since a Store keeps no list of
// them: a name is a pool as long as its directory exists. The pool root is
// opened as an os.Root and the pool directory is opened through it after an
// Lstat, so a symlink or a file with the pool's name is refused (Conflict),
// never followed.

// ValidatePaths checks the paths of a Store's pools: every configured path
// (pools maps names to paths) and the pool root (empty: none) must be
// absolute, clean and not /, and no two of them may be equal or nested.
func ValidatePaths(pools map[string]string, poolRoot string) error {
	if poolRoot != "" {
		if err := checkPath(poolRoot); err != nil {
			return fmt.Errorf("pool root: %w", err)
		}
	}
	names := slices.Sorted(maps.Keys(pools))
	for i, name := range names {
		path := pools[name]
		if err := checkPath(path); err != nil {
			return fmt.Errorf("pool %q: %w", name, err)
		}
		for _, other := range names[:i] {
			if overlap(path, pools[other]) {
				return fmt.Errorf("pools %q (%s) and %q (%s) overlap", name, path, other, pools[other])
			}
		}
		if poolRoot != "" && overlap(path, poolRoot) {
			return fmt.Errorf("pool %q (%s) and the pool root %s overlap: the pool root holds only pools named on the fly", name, path, poolRoot)
		}
	}
	return nil
}

// checkPath fails unless path is absolute, clean and not /.
func checkPath(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return fmt.Errorf("path %q must be absolute, clean and not /", path)
	}
	return nil
}

// overlap reports whether the clean paths a and b are equal or one is
// inside the other.
func overlap(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// dynamicPool returns the pool name (a valid pool name, not configured) of
// the pool root.
func (s *Store) dynamicPool(name string) *pool {
	return &pool{name: name, path: filepath.Join(s.poolRoot, name), parent: s.poolRoot}
}

// dynamicPools returns the pools named on the fly whose directories exist,
// sorted by name: the directories of the pool root with valid pool names
// that are not configured. Without a pool root, or while it does not exist,
// there are none.
func (s *Store) dynamicPools() ([]*pool, error) {
	if s.poolRoot == "" {
		return nil, nil
	}
	parent, err := os.OpenRoot(s.poolRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open pool root %s: %w", s.poolRoot, err)
	}
	defer parent.Close()
	dir, err := parent.Open(".")
	if err != nil {
		return nil, fmt.Errorf("open pool root %s: %w", s.poolRoot, err)
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read pool root %s: %w", s.poolRoot, err)
	}
	var pools []*pool
	for _, e := range entries {
		if _, configured := s.pools[e.Name()]; configured || !e.IsDir() || ValidatePoolName(e.Name()) != nil {
			continue
		}
		pools = append(pools, s.dynamicPool(e.Name()))
	}
	slices.SortFunc(pools, func(a, b *pool) int { return strings.Compare(a.name, b.name) })
	return pools, nil
}

// servedPools returns the configured pools and those named on the fly that
// exist, sorted by name. A pool root that cannot be read is logged and
// leaves out the pools named on the fly.
func (s *Store) servedPools(ctx context.Context) []*pool {
	pools := make([]*pool, 0, len(s.pools))
	for _, n := range s.PoolNames() {
		pools = append(pools, s.pools[n])
	}
	dynamic, err := s.dynamicPools()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list the pools named on the fly", "poolRoot", s.poolRoot)
	}
	pools = append(pools, dynamic...)
	slices.SortFunc(pools, func(a, b *pool) int { return strings.Compare(a.name, b.name) })
	return pools
}

// mkdirAll creates the directory path and its parents (mode 0755) if
// missing: Conflict when path or a parent is not a directory.
func mkdirAll(what, path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return conflictf("%s: %s exists and is not a directory", what, path)
		}
		return fmt.Errorf("create %s directory %s: %w", what, path, err)
	}
	return nil
}

// makeInParent creates the pool root (with its parents) if missing, then
// the directory of the pool named on the fly p in it (mode 0755, as
// mkdirAll), through an os.Root on the pool root. An entry with p's name
// that is not a directory (a file, a symlink, wherever it points) is a
// Conflict and is left alone.
func (p *pool) makeInParent() error {
	if err := mkdirAll("pool root", p.parent); err != nil {
		return err
	}
	parent, err := os.OpenRoot(p.parent)
	if err != nil {
		return fmt.Errorf("open pool root %s: %w", p.parent, err)
	}
	defer parent.Close()
	// Mkdir never follows a symlink with the name: it fails with EEXIST.
	if err := parent.Mkdir(p.name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create pool %q directory %s: %w", p.name, p.path, err)
	}
	fi, err := parent.Lstat(p.name)
	if err != nil {
		return fmt.Errorf("stat pool %q directory %s: %w", p.name, p.path, err)
	}
	if !fi.IsDir() {
		return p.notDirectory(fi)
	}
	return nil
}

// openInParent opens the directory of the pool named on the fly p through
// an os.Root on the pool root: a missing pool root or directory is
// PoolNotFound, an entry that is not a directory (a symlink among them) is
// Conflict, and the directory opened must be the one Lstat saw.
func (p *pool) openInParent() (*os.Root, error) {
	parent, err := os.OpenRoot(p.parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, p.notPrepared()
	}
	if err != nil {
		return nil, fmt.Errorf("open pool root %s: %w", p.parent, err)
	}
	defer parent.Close()
	fi, err := parent.Lstat(p.name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, p.notPrepared()
	}
	if err != nil {
		return nil, fmt.Errorf("stat pool %q directory %s: %w", p.name, p.path, err)
	}
	if !fi.IsDir() {
		return nil, p.notDirectory(fi)
	}
	root, err := parent.OpenRoot(p.name)
	if err != nil {
		return nil, fmt.Errorf("open pool %q at %s: %w", p.name, p.path, err)
	}
	rfi, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("stat pool %q at %s: %w", p.name, p.path, err)
	}
	if !os.SameFile(fi, rfi) {
		root.Close()
		return nil, conflictf("pool %q directory %s changed while it was being opened", p.name, p.path)
	}
	return root, nil
}

// notDirectory is the Conflict of an entry with the name of the pool named
// on the fly p that is not a directory.
func (p *pool) notDirectory(fi fs.FileInfo) error {
	return conflictf("pool %q: %s is %s, not a directory; the manager neither follows nor replaces it (remove it, or use another pool name)", p.name, p.path, kindOf(fi))
}
