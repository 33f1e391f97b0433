// Package disk is the only code of the manager that touches host disks.
//
// A Store serves volume directories in configured storage pools. Every
// access below a pool's path goes through an os.Root opened on that path, so
// the kernel-checked confinement of os.Root holds even against symlinks that
// pods plant inside the pool: nothing outside the pool root is ever created,
// changed or removed. Names are validated first (ValidateVolumeName,
// ValidatePoolName) so that a volume is always exactly one directory entry
// directly under its pool root.
//
// The Store also owns the host identity kept in the state directory (see
// Identity).
package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/client"
)

// Config says where the pools and the host identity live.
type Config struct {
	// NodeName is reported by Host.
	NodeName string
	// Pools maps pool names to absolute, clean paths on the host.
	Pools map[string]string
	// Identity locates the host identity files.
	Identity IdentityConfig
}

// Store creates, lists and removes volume directories confined to their
// pool roots. It is safe for concurrent use; calls on the same volume are
// serialised.
type Store struct {
	nodeName string
	pools    map[string]*pool
	identity *Identity
	locks    keyedMutex
}

type pool struct {
	name string
	path string
}

// New validates cfg, loads (or creates, once) the host ID and returns a
// Store. Pool directories need not exist yet: PreparePool creates them.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Pools) == 0 {
		return nil, errors.New("no storage pool configured")
	}
	s := &Store{nodeName: cfg.NodeName, pools: map[string]*pool{}}
	for name, path := range cfg.Pools {
		if err := ValidatePoolName(name); err != nil {
			return nil, err
		}
		if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
			return nil, fmt.Errorf("pool %q: path %q must be absolute, clean and not /", name, path)
		}
		for other, p := range s.pools {
			if p.path == path || strings.HasPrefix(path, p.path+"/") || strings.HasPrefix(p.path, path+"/") {
				return nil, fmt.Errorf("pools %q (%s) and %q (%s) overlap", name, path, other, p.path)
			}
		}
		s.pools[name] = &pool{name: name, path: path}
	}
	id, err := LoadIdentity(ctx, cfg.Identity)
	if err != nil {
		return nil, err
	}
	s.identity = id
	return s, nil
}

// Host reports the node, its identity and the state of every pool.
func (s *Store) Host(ctx context.Context) (*client.Host, error) {
	bootID, err := s.identity.BootID()
	if err != nil {
		return nil, err
	}
	h := &client.Host{
		NodeName:  s.nodeName,
		HostID:    s.identity.HostID(),
		BootID:    bootID,
		MachineID: s.identity.MachineID(ctx),
		Pools:     []client.Pool{},
	}
	names := make([]string, 0, len(s.pools))
	for n := range s.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h.Pools = append(h.Pools, s.pools[n].info())
	}
	return h, nil
}

// PoolNames returns the configured pool names, sorted.
func (s *Store) PoolNames() []string {
	names := make([]string, 0, len(s.pools))
	for n := range s.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PreparePool creates the pool's directory (and its parents, mode 0755) if
// it is missing and returns the pool's state.
func (s *Store) PreparePool(ctx context.Context, name string) (*client.Pool, error) {
	p, err := s.pool(name)
	if err != nil {
		return nil, err
	}
	unlock := s.locks.lock(p.name)
	defer unlock()
	if err := os.MkdirAll(p.path, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return nil, kindf(ErrConflict, "pool %q: %s exists and is not a directory", name, p.path)
		}
		return nil, fmt.Errorf("create pool %q directory %s: %w", name, p.path, err)
	}
	info := p.info()
	if info.Error != "" {
		return nil, fmt.Errorf("pool %q: %s", name, info.Error)
	}
	klog.FromContext(ctx).V(4).Info("Prepared pool", "pool", name, "path", p.path)
	return &info, nil
}

// ListVolumes returns the volume directories of a pool, sorted by name.
// Entries that are not directories or whose names are not valid volume
// names are not volumes and are left out.
func (s *Store) ListVolumes(ctx context.Context, poolName string) (*client.VolumeList, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return nil, err
	}
	root, err := p.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	dir, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("open pool %q: %w", p.name, err)
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read pool %q: %w", p.name, err)
	}
	list := &client.VolumeList{Items: []client.Volume{}}
	for _, e := range entries {
		if !e.IsDir() || ValidateVolumeName(e.Name()) != nil {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			return nil, fmt.Errorf("stat volume %q in pool %q: %w", e.Name(), p.name, err)
		}
		list.Items = append(list.Items, p.volume(e.Name(), fi))
	}
	slices.SortFunc(list.Items, func(a, b client.Volume) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// GetVolume returns one volume directory.
func (s *Store) GetVolume(ctx context.Context, poolName, name string) (*client.Volume, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return nil, err
	}
	if err := ValidateVolumeName(name); err != nil {
		return nil, err
	}
	root, err := p.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, kindf(ErrNotFound, "volume %q not found in pool %q", name, p.name)
	}
	if err != nil {
		return nil, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	if !fi.IsDir() {
		return nil, notVolume(p, name, fi)
	}
	v := p.volume(name, fi)
	return &v, nil
}

// CreateVolume makes the directory name in the pool with exactly mode
// (whatever the umask) and reports whether it was created. An existing
// directory is kept and gets mode; anything else with that name (a file, a
// symlink) is a conflict. When requiredBytes is positive and the directory
// does not exist yet, the pool must have at least that much free space.
func (s *Store) CreateVolume(ctx context.Context, poolName, name string, mode fs.FileMode, requiredBytes int64) (*client.Volume, bool, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return nil, false, err
	}
	if err := ValidateVolumeName(name); err != nil {
		return nil, false, err
	}
	if mode&^(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return nil, false, invalidf("mode %v has bits other than permissions, setuid, setgid and sticky", mode)
	}
	unlock := s.locks.lock(p.name + "/" + name)
	defer unlock()
	root, err := p.open()
	if err != nil {
		return nil, false, err
	}
	defer root.Close()

	created := false
	fi, err := root.Lstat(name)
	switch {
	case err == nil:
		if !fi.IsDir() {
			return nil, false, notVolume(p, name, fi)
		}
	case errors.Is(err, fs.ErrNotExist):
		if requiredBytes > 0 {
			st, err := statRoot(root)
			if err != nil {
				return nil, false, fmt.Errorf("pool %q: %w", p.name, err)
			}
			if st.FreeBytes < requiredBytes {
				return nil, false, kindf(ErrInsufficientStorage, "pool %q has %d bytes free, %d requested", p.name, st.FreeBytes, requiredBytes)
			}
		}
		// Owner-only until the chmod below sets the exact mode.
		if err := root.Mkdir(name, 0o700); err != nil {
			return nil, false, fmt.Errorf("create volume %q in pool %q: %w", name, p.name, err)
		}
		created = true
		if fi, err = root.Lstat(name); err != nil {
			return nil, false, fmt.Errorf("stat new volume %q in pool %q: %w", name, p.name, err)
		}
	default:
		return nil, false, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}

	// Set the mode through a descriptor of the very directory that Lstat saw,
	// so a directory swapped for a symlink meanwhile is never chmod-ed.
	f, err := root.Open(name)
	if err != nil {
		return nil, false, fmt.Errorf("open volume %q in pool %q: %w", name, p.name, err)
	}
	defer f.Close()
	ffi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	if !os.SameFile(fi, ffi) {
		return nil, false, kindf(ErrConflict, "volume %q in pool %q changed while it was being created", name, p.name)
	}
	if err := f.Chmod(mode); err != nil {
		return nil, false, fmt.Errorf("set mode %s on volume %q in pool %q: %w", FormatMode(mode), name, p.name, err)
	}
	if ffi, err = f.Stat(); err != nil {
		return nil, false, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	v := p.volume(name, ffi)
	return &v, created, nil
}

// DeleteVolume removes the directory name and everything in it from the
// pool and reports whether there was anything to remove. A missing volume
// (or pool directory) is not an error. Symlinks inside the tree are removed,
// never followed. A name held by something that is not a directory is a
// conflict and is left alone.
func (s *Store) DeleteVolume(ctx context.Context, poolName, name string) (bool, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return false, err
	}
	if err := ValidateVolumeName(name); err != nil {
		return false, err
	}
	unlock := s.locks.lock(p.name + "/" + name)
	defer unlock()
	root, err := p.open()
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	if !fi.IsDir() {
		return false, notVolume(p, name, fi)
	}
	if err := root.RemoveAll(name); err != nil {
		return false, fmt.Errorf("remove volume %q from pool %q: %w", name, p.name, err)
	}
	if _, err := root.Lstat(name); err == nil {
		return false, fmt.Errorf("volume %q in pool %q still exists after removal", name, p.name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("check removal of volume %q in pool %q: %w", name, p.name, err)
	}
	return true, nil
}

func (s *Store) pool(name string) (*pool, error) {
	if err := ValidatePoolName(name); err != nil {
		return nil, err
	}
	p, ok := s.pools[name]
	if !ok {
		return nil, kindf(ErrNotFound, "pool %q is not configured on node %q (pools: %s)", name, s.nodeName, strings.Join(s.PoolNames(), ", "))
	}
	return p, nil
}

// open opens the pool root. A missing pool directory is ErrNotFound.
func (p *pool) open() (*os.Root, error) {
	root, err := os.OpenRoot(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, kindf(ErrNotFound, "pool %q directory %s does not exist; prepare it with PUT /v1/pools/%s", p.name, p.path, p.name)
	}
	if err != nil {
		return nil, fmt.Errorf("open pool %q at %s: %w", p.name, p.path, err)
	}
	return root, nil
}

// info returns the pool's capacity, or the reason it cannot be read.
func (p *pool) info() client.Pool {
	info := client.Pool{Name: p.name, Path: p.path}
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
	return info
}

func (p *pool) volume(name string, fi fs.FileInfo) client.Volume {
	return client.Volume{Name: name, Pool: p.name, Path: filepath.Join(p.path, name), Mode: FormatMode(fi.Mode())}
}

func notVolume(p *pool, name string, fi fs.FileInfo) error {
	what := "a file"
	switch t := fi.Mode().Type(); {
	case t&fs.ModeSymlink != 0:
		what = "a symlink"
	case t != 0:
		what = "a special file"
	}
	return kindf(ErrConflict, "%q in pool %q is %s, not a volume directory", name, p.name, what)
}

// fsStats are a filesystem's sizes.
type fsStats struct {
	CapacityBytes, FreeBytes, Inodes, FreeInodes int64
}

func statRoot(root *os.Root) (fsStats, error) {
	f, err := root.Open(".")
	if err != nil {
		return fsStats{}, fmt.Errorf("open pool root: %w", err)
	}
	defer f.Close()
	st, err := statfs(f)
	if err != nil {
		return fsStats{}, fmt.Errorf("statfs %s: %w", root.Name(), err)
	}
	return st, nil
}

// keyedMutex serialises work per key and forgets keys nobody holds.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*refMutex{}
	}
	m, ok := k.locks[key]
	if !ok {
		m = &refMutex{}
		k.locks[key] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		if m.refs--; m.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
