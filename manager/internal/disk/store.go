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
// Each volume directory belongs to exactly one PersistentVolume, named by an
// owner record the Store keeps in the pool (see OwnersDir): a directory is
// created, given a mode or removed only on behalf of its owner, and a
// directory without a record is only touched after it has been adopted
// (SetOwner). Failures the API has an answer for are *client.Error values
// (see client.Errorf).
//
// The Store also owns the host identity kept in the state directory (see
// Identity).
package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/keymutex"

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
	// MountInfoFile is the mount table, in the format of
	// /proc/self/mountinfo, read before a volume is removed: a volume with
	// a filesystem mounted inside is not removed. Empty means
	// DefaultMountInfoFile.
	MountInfoFile string
	// Clock dates owner records; nil means the real clock.
	Clock clock.PassiveClock
}

// lockShards is the number of mutexes volume keys are hashed to: calls on
// the same volume are serialised, and calls on different volumes rarely
// wait for each other (a long removal holds one shard).
const lockShards = 1024

// Store creates, lists and removes volume directories confined to their
// pool roots, and keeps their owner records. It is safe for concurrent use;
// calls on the same volume are serialised.
type Store struct {
	nodeName  string
	pools     map[string]*pool
	identity  *Identity
	locks     keymutex.KeyMutex
	mountInfo string
	clock     clock.PassiveClock
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
	s := &Store{
		nodeName:  cfg.NodeName,
		pools:     map[string]*pool{},
		locks:     keymutex.NewHashed(lockShards),
		mountInfo: cfg.MountInfoFile,
		clock:     cfg.Clock,
	}
	if s.mountInfo == "" {
		s.mountInfo = DefaultMountInfoFile
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
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
	for _, n := range s.PoolNames() {
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
	unlock := s.lock(p.name)
	defer unlock()
	if err := os.MkdirAll(p.path, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return nil, conflictf("pool %q: %s exists and is not a directory", name, p.path)
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

// ListVolumes returns the volume directories of a pool with their owners,
// sorted by name. Entries that are not directories or whose names are not
// valid volume names (the metadata directory among them) are not volumes
// and are left out, and so are owner records without a directory. A record
// that cannot be read fails the whole listing rather than show its
// directory as unowned.
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
		fi, err := root.Lstat(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			return nil, fmt.Errorf("stat volume %q in pool %q: %w", e.Name(), p.name, err)
		}
		if !fi.IsDir() {
			continue
		}
		rec, err := readRecord(root, e.Name())
		if err != nil {
			return nil, fmt.Errorf("volume %q in pool %q: %w", e.Name(), p.name, err)
		}
		list.Items = append(list.Items, p.volume(e.Name(), fi, rec))
	}
	slices.SortFunc(list.Items, func(a, b client.Volume) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// GetVolume returns one volume directory with its owner.
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
	fi, exists, err := p.lstat(root, name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, notFoundf("volume %q not found in pool %q", name, p.name)
	}
	rec, err := readRecord(root, name)
	if err != nil {
		return nil, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	v := p.volume(name, fi, rec)
	return &v, nil
}

// CreateVolume makes the directory name in the pool for the PersistentVolume
// owner, with exactly mode (whatever the umask), and reports whether it made
// the directory.
//
//   - No owner record and no directory: the record naming owner is written
//     first, then the directory is made. When requiredBytes is positive, the
//     pool must have that much free space before either.
//   - A record naming owner: the directory is made if missing (a crash
//     between record and directory) and gets mode.
//   - A record naming another PersistentVolume: OwnerConflict naming it.
//   - A directory without a record: OwnerConflict with no owner; the
//     directory must be adopted with SetOwner first.
//   - Anything but a directory with that name (a file, a symlink): Conflict.
func (s *Store) CreateVolume(ctx context.Context, poolName, name, owner string, mode fs.FileMode, requiredBytes int64) (*client.Volume, bool, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return nil, false, err
	}
	if err := ValidateVolumeName(name); err != nil {
		return nil, false, err
	}
	if err := validateOwner(owner); err != nil {
		return nil, false, err
	}
	if mode&^(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return nil, false, badRequestf("mode %v has bits other than permissions, setuid, setgid and sticky", mode)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pool", p.name, "volume", name, "owner", owner)
	unlock := s.lock(p.key(name))
	defer unlock()
	root, err := p.open()
	if err != nil {
		return nil, false, err
	}
	defer root.Close()

	fi, exists, err := p.lstat(root, name)
	if err != nil {
		return nil, false, err
	}
	rec, err := readRecord(root, name)
	if err != nil {
		return nil, false, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	switch {
	case rec != nil && rec.Owner != owner:
		return nil, false, ownerConflictf(rec.Owner, "directory %q in pool %q belongs to PersistentVolume %q", name, p.name, rec.Owner)
	case rec == nil && exists:
		return nil, false, ownerConflictf("", "directory %q in pool %q exists without an owner record; it must be adopted with PUT /v1/pools/%s/volumes/%s/owner", name, p.name, p.name, name)
	}

	created := false
	if !exists {
		if err := checkSpace(root, p, requiredBytes); err != nil {
			return nil, false, err
		}
		wroteRecord := false
		if rec == nil {
			rec = &record{Owner: owner, OwnedSince: s.now()}
			if err := writeRecord(root, name, *rec); err != nil {
				return nil, false, fmt.Errorf("write owner record of volume %q in pool %q: %w", name, p.name, err)
			}
			wroteRecord = true
		}
		// Owner-only until the chmod below sets the exact mode.
		if err := root.Mkdir(name, 0o700); err != nil {
			if wroteRecord {
				if rerr := removeRecord(root, name); rerr != nil {
					logger.Error(rerr, "Cannot remove the owner record of a volume that was not created")
				}
			}
			return nil, false, fmt.Errorf("create volume %q in pool %q: %w", name, p.name, err)
		}
		created = true
		if fi, err = root.Lstat(name); err != nil {
			return nil, false, fmt.Errorf("stat new volume %q in pool %q: %w", name, p.name, err)
		}
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
		return nil, false, conflictf("volume %q in pool %q changed while it was being created", name, p.name)
	}
	if err := f.Chmod(mode); err != nil {
		return nil, false, fmt.Errorf("set mode %s on volume %q in pool %q: %w", client.FormatMode(mode), name, p.name, err)
	}
	if ffi, err = f.Stat(); err != nil {
		return nil, false, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	if created {
		logger.V(2).Info("Created volume", "mode", client.FormatMode(mode))
	}
	v := p.volume(name, ffi, rec)
	return &v, created, nil
}

// SetOwner replaces the owner record of the existing directory name: a
// compare-and-swap where previous must be the current owner ("" when the
// directory has no record, to adopt it), else OwnerConflict names the
// current owner. The new record names owner, keeps its date when the owner
// does not change, and says whether the directory is retained.
func (s *Store) SetOwner(ctx context.Context, poolName, name, owner, previous string, retained bool) (*client.Volume, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return nil, err
	}
	if err := ValidateVolumeName(name); err != nil {
		return nil, err
	}
	if err := validateOwner(owner); err != nil {
		return nil, err
	}
	if previous != "" {
		if err := client.ValidateOwner(previous); err != nil {
			return nil, badRequestf("previous owner: %s", err)
		}
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pool", p.name, "volume", name, "owner", owner)
	unlock := s.lock(p.key(name))
	defer unlock()
	root, err := p.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()

	fi, exists, err := p.lstat(root, name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, notFoundf("volume %q not found in pool %q", name, p.name)
	}
	rec, err := readRecord(root, name)
	if err != nil {
		return nil, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	current := ownerOf(rec)
	if current != previous {
		if current == "" {
			return nil, ownerConflictf("", "directory %q in pool %q has no owner record, not one naming %q; adopt it with previous owner \"\"", name, p.name, previous)
		}
		return nil, ownerConflictf(current, "directory %q in pool %q belongs to PersistentVolume %q, not %q", name, p.name, current, previous)
	}
	next := record{Owner: owner, OwnedSince: s.now(), Retained: retained}
	if rec != nil && rec.Owner == owner {
		next.OwnedSince = rec.OwnedSince
	}
	if rec == nil || rec.Owner != next.Owner || rec.Retained != next.Retained {
		if err := writeRecord(root, name, next); err != nil {
			return nil, fmt.Errorf("write owner record of volume %q in pool %q: %w", name, p.name, err)
		}
	}
	if current != owner {
		logger.Info("Changed volume owner", "previous", current, "retained", retained)
	} else {
		logger.V(2).Info("Updated volume owner record", "retained", retained)
	}
	v := p.volume(name, fi, &next)
	return &v, nil
}

// DeleteVolume removes the directory name, everything in it and its owner
// record from the pool on behalf of owner, and reports whether there was
// anything to remove.
//
//   - A record naming owner: the directory is removed, then the record. With
//     ifEmpty, a directory holding anything is NotEmpty and stays. A record
//     without a directory is removed (true).
//   - No record and no directory (or no pool directory): nothing to do
//     (false, nil).
//   - A record naming another PersistentVolume: OwnerConflict naming it.
//   - A directory without a record: OwnerConflict with no owner; adopt it
//     first.
//   - Anything but a directory with that name: Conflict, left alone.
//   - A filesystem mounted on or below the directory (per the mount table):
//     Conflict naming the mount points, nothing removed.
//
// Symlinks inside the tree are removed, never followed; trees of any depth
// are removed with a bounded number of open files. When ctx ends, the
// removal stops (wrapping ctx.Err()) with the record still in place, so a
// later call finishes it.
func (s *Store) DeleteVolume(ctx context.Context, poolName, name, owner string, ifEmpty bool) (bool, error) {
	p, err := s.pool(poolName)
	if err != nil {
		return false, err
	}
	if err := ValidateVolumeName(name); err != nil {
		return false, err
	}
	if err := validateOwner(owner); err != nil {
		return false, err
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pool", p.name, "volume", name, "owner", owner)
	unlock := s.lock(p.key(name))
	defer unlock()
	root, err := p.open()
	if client.ReasonOf(err) == client.ReasonNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer root.Close()

	_, exists, err := p.lstat(root, name)
	if err != nil {
		return false, err
	}
	rec, err := readRecord(root, name)
	if err != nil {
		return false, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	switch {
	case rec == nil && !exists:
		return false, nil
	case rec == nil:
		return false, ownerConflictf("", "directory %q in pool %q has no owner record: adopt it first with PUT /v1/pools/%s/volumes/%s/owner", name, p.name, p.name, name)
	case rec.Owner != owner:
		return false, ownerConflictf(rec.Owner, "directory %q in pool %q belongs to PersistentVolume %q, not %q", name, p.name, rec.Owner, owner)
	case !exists:
		if err := removeRecord(root, name); err != nil {
			return false, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
		}
		logger.V(2).Info("Removed the owner record of a volume without a directory")
		return true, nil
	}

	if err := s.checkNoMounts(p, name); err != nil {
		return false, err
	}
	if ifEmpty {
		empty, err := isEmptyDir(root, name)
		if err != nil {
			return false, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
		}
		if !empty {
			return false, client.Errorf(client.ReasonNotEmpty, "volume %q in pool %q is not empty", name, p.name)
		}
	}
	if err := removeTree(ctx, root, name); err != nil {
		return false, fmt.Errorf("remove volume %q from pool %q: %w", name, p.name, err)
	}
	if _, err := root.Lstat(name); err == nil {
		return false, fmt.Errorf("volume %q in pool %q still exists after removal", name, p.name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("check removal of volume %q in pool %q: %w", name, p.name, err)
	}
	// The directory's removal must reach the disk before the record's: a
	// record without a directory is harmless, a directory without a record
	// needs adopting.
	if err := syncDir(root, "."); err != nil {
		return false, fmt.Errorf("pool %q: %w", p.name, err)
	}
	if err := removeRecord(root, name); err != nil {
		return false, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	logger.V(2).Info("Removed volume", "ifEmpty", ifEmpty)
	return true, nil
}

// checkNoMounts fails with Conflict when the mount table lists a mount
// point on or below the volume directory (by its configured path and by its
// path with symlinks resolved). Device numbers would not do: a btrfs
// subvolume has its own without being a mount.
func (s *Store) checkNoMounts(p *pool, name string) error {
	points, err := readMountPoints(s.mountInfo)
	if err != nil {
		return fmt.Errorf("volume %q in pool %q: cannot tell whether filesystems are mounted inside: %w", name, p.name, err)
	}
	dirs := []string{filepath.Join(p.path, name)}
	if real, err := filepath.EvalSymlinks(p.path); err == nil && real != p.path {
		dirs = append(dirs, filepath.Join(real, name))
	}
	if inside := mountsInside(points, dirs...); len(inside) > 0 {
		return conflictf("volume %q in pool %q has filesystems mounted inside (%s); unmount them first", name, p.name, strings.Join(inside, ", "))
	}
	return nil
}

// isEmptyDir reports whether the directory name of root has no entries.
func isEmptyDir(root *os.Root, name string) (bool, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return false, fmt.Errorf("open directory: %w", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read directory: %w", err)
	}
	return len(entries) == 0, nil
}

// checkSpace fails with InsufficientStorage when requiredBytes is positive
// and the pool has less free space.
func checkSpace(root *os.Root, p *pool, requiredBytes int64) error {
	if requiredBytes <= 0 {
		return nil
	}
	st, err := statRoot(root)
	if err != nil {
		return fmt.Errorf("pool %q: %w", p.name, err)
	}
	if st.FreeBytes < requiredBytes {
		return client.Errorf(client.ReasonInsufficientStorage, "pool %q has %d bytes free, %d requested", p.name, st.FreeBytes, requiredBytes)
	}
	return nil
}

// lock takes the lock of key and returns its release.
func (s *Store) lock(key string) (unlock func()) {
	s.locks.LockKey(key)
	return func() { _ = s.locks.UnlockKey(key) } // never fails for a hashed KeyMutex
}

// now dates a new owner record, to the second.
func (s *Store) now() time.Time { return s.clock.Now().UTC().Truncate(time.Second) }

func (s *Store) pool(name string) (*pool, error) {
	if err := ValidatePoolName(name); err != nil {
		return nil, err
	}
	p, ok := s.pools[name]
	if !ok {
		return nil, notFoundf("pool %q is not configured on node %q (pools: %s)", name, s.nodeName, strings.Join(s.PoolNames(), ", "))
	}
	return p, nil
}

// key is the lock key of a volume.
func (p *pool) key(name string) string { return p.name + "/" + name }

// open opens the pool root. A missing pool directory is NotFound.
func (p *pool) open() (*os.Root, error) {
	root, err := os.OpenRoot(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFoundf("pool %q directory %s does not exist; prepare it with PUT /v1/pools/%s", p.name, p.path, p.name)
	}
	if err != nil {
		return nil, fmt.Errorf("open pool %q at %s: %w", p.name, p.path, err)
	}
	return root, nil
}

// lstat looks at the entry name of the pool root: it reports whether it
// exists, and fails with Conflict when it is not a directory.
func (p *pool) lstat(root *os.Root, name string) (fs.FileInfo, bool, error) {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	if !fi.IsDir() {
		return nil, false, conflictf("%q in pool %q is %s, not a volume directory", name, p.name, kindOf(fi))
	}
	return fi, true, nil
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

// volume describes the directory name with its owner record (nil: none).
func (p *pool) volume(name string, fi fs.FileInfo, rec *record) client.Volume {
	v := client.Volume{Name: name, Pool: p.name, Path: filepath.Join(p.path, name), Mode: client.FormatMode(fi.Mode())}
	if rec != nil {
		since := rec.OwnedSince
		v.Owner, v.OwnedSince, v.Retained = rec.Owner, &since, rec.Retained
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
