// Package disk is the only code of the manager that touches the storage
// pools on the host's disks (the identity package keeps the host ID in the
// manager's state directory).
//
// A Store serves volume directories in storage pools: pools configured by
// path, and pools named on the fly, directories of a pool root created by
// PreparePool (see Config.PoolRoot). Every access below a pool's path goes
// through an os.Root opened on that path (for a pool named on the fly,
// opened through an os.Root on the pool root), so the kernel-checked
// confinement of os.Root holds even against symlinks that pods plant inside
// the pool: nothing outside the pool root is ever created, changed or
// removed. Names are validated first (ValidateVolumeName,
// ValidatePoolName) so that a volume is always exactly one directory entry
// directly under its pool root.
//
// What a call is given is checked at its start, with the API's own
// functions (the name rules of api/managerapi and one Validate per
// request body; see names.go), before anything is locked or read. The
// server has checked the same already, with the same functions, so as to
// answer 400 before a bad request costs a slot or a review; the Store
// checks again because the confinement rests on those names and the Store
// has callers besides the server (its tests, the fuzzer, whatever comes
// next). So the rules have one home, the API, and two doors, and a check
// costs a fraction of a microsecond (names_bench_test.go). Types that
// only a validating constructor makes were the other way: they would add
// a checked twin of each request type of the API, to the Backend, its
// fakes and every test, to save a check this cheap.
//
// Then a call works through a volumeTx (tx.go): it resolves the pool,
// takes the volume's lock, refuses a volume a clone is busy with, reads
// the directory and its owner record and checks the caller's node, all
// in one begin and one deferred end, so that each verb reads as its own
// steps.
//
// Each volume directory belongs to exactly one PersistentVolume, named by an
// owner record the Store keeps in the pool (see OwnersDir): a directory is
// created, given a mode or removed only on behalf of its owner, and a
// directory without a record is only touched after it has been adopted
// (SetOwner). Failures the API has an answer for are *managerapi.Error
// values (see managerapi.Errorf).
//
// Every directory the Store creates for pods gets its SELinux context from
// Config.Labeler, through the open directory (see the selinux package): a
// new volume directory right after it is made (a failure removes it again),
// and a pool directory on every PreparePool.
//
// Host reports the node with the identity it is given (Config.Identity,
// which the identity package reads) and the state of every pool.
package disk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/keymutex"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/quota"
	"hostpath.dev/manager/internal/selinux"
)

// Identity is who the host is, as Host reports it; identity.Identity
// implements it.
type Identity interface {
	// HostID returns the persistent host ID.
	HostID() string
	// BootID returns the kernel's boot ID.
	BootID() (string, error)
	// MachineID returns the machine ID, "" when unknown.
	MachineID(ctx context.Context) string
}

// Config says where the pools live and who the host is.
type Config struct {
	// NodeName is reported by Host.
	NodeName string
	// Pools maps pool names to absolute, clean paths on the host.
	Pools map[string]string
	// PoolRoot, when not empty, is an absolute, clean directory on the
	// host where pools are named on the fly: a valid pool name that Pools
	// does not name is the directory PoolRoot/NAME, created by PreparePool
	// and served while it exists. It must not overlap a path of Pools.
	PoolRoot string
	// Identity is reported by Host; required.
	Identity Identity
	// MountInfoFile is the mount table, in the format of
	// /proc/self/mountinfo, read before a volume is removed: a volume with
	// a filesystem mounted inside is not removed. Empty means
	// DefaultMountInfoFile.
	MountInfoFile string
	// Clock dates owner records; nil means the real clock.
	Clock clock.PassiveClock
	// Labeler gives new volume directories and prepared pool directories
	// their SELinux context; nil means none (selinux.Nop).
	Labeler selinux.Labeler
	// Overcommit maps pool names to how many times their capacity the
	// pools may promise to volumes (a ratio > 0); a pool it does not name
	// has ratio 1: no overcommit.
	Overcommit map[string]float64
	// Quotas returns the enforcer of a pool root's filesystem; nil means
	// quota.Detect. Tests give a fake.
	Quotas func(*os.Root) quota.Enforcer
	// CloneConcurrency is how many clones copy at once (CloneVolume);
	// more wait in line. 0 means DefaultCloneConcurrency.
	CloneConcurrency int
	// Owners asks the API server about the PersistentVolumes and claims
	// of the volumes, before a caller bound to another node deletes or
	// creates a multihost copy, or lets one be removed later (see
	// checkRemoteRemoval, checkRemoteClaim, checkRemoteOwner); nil
	// refuses those calls (403), and only those.
	Owners Owners
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
	poolRoot  string
	identity  Identity
	locks     keymutex.KeyMutex
	mountInfo string
	clock     clock.PassiveClock
	labeler   selinux.Labeler
	sizes     sizes
	clones    clones
	owners    Owners
}

// New validates cfg and returns a Store. Pool directories and the pool root
// need not exist yet: PreparePool creates them.
func New(cfg Config) (*Store, error) {
	if len(cfg.Pools) == 0 && cfg.PoolRoot == "" {
		return nil, errors.New("no storage pool configured")
	}
	if cfg.Identity == nil {
		return nil, errors.New("no host identity configured")
	}
	s := &Store{
		nodeName:  cfg.NodeName,
		identity:  cfg.Identity,
		pools:     map[string]*pool{},
		poolRoot:  cfg.PoolRoot,
		locks:     keymutex.NewHashed(lockShards),
		mountInfo: cfg.MountInfoFile,
		clock:     cfg.Clock,
		labeler:   cfg.Labeler,
		owners:    cfg.Owners,
		sizes:     sizes{detect: cfg.Quotas, overcommit: cfg.Overcommit},
	}
	if cfg.CloneConcurrency <= 0 {
		cfg.CloneConcurrency = DefaultCloneConcurrency
	}
	s.clones = clones{jobs: map[string]*cloneJob{}, busy: map[string]int{}, swept: map[string]bool{}, slots: make(chan struct{}, cfg.CloneConcurrency)}
	if s.sizes.detect == nil {
		s.sizes.detect = quota.Detect
	}
	for name, r := range cfg.Overcommit {
		if err := ValidatePoolName(name); err != nil {
			return nil, fmt.Errorf("overcommit ratio: %w", err)
		}
		if !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("overcommit ratio of pool %q is %v, not a number above 0", name, r)
		}
	}
	if s.mountInfo == "" {
		s.mountInfo = DefaultMountInfoFile
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.labeler == nil {
		s.labeler = selinux.Nop{}
	}
	if err := ValidatePaths(cfg.Pools, cfg.PoolRoot); err != nil {
		return nil, err
	}
	for name, path := range cfg.Pools {
		if err := ValidatePoolName(name); err != nil {
			return nil, err
		}
		s.pools[name] = &pool{name: name, path: path}
	}
	return s, nil
}

// Host reports the node, its identity and the state of every pool: the
// configured ones and those named on the fly whose directories exist.
func (s *Store) Host(ctx context.Context) (*managerapi.Host, error) {
	bootID, err := s.identity.BootID()
	if err != nil {
		return nil, err
	}
	h := &managerapi.Host{
		NodeName:  s.nodeName,
		HostID:    s.identity.HostID(),
		BootID:    bootID,
		MachineID: s.identity.MachineID(ctx),
		Pools:     []managerapi.Pool{},
	}
	for _, p := range s.servedPools(ctx) {
		h.Pools = append(h.Pools, s.poolInfo(p))
	}
	return h, nil
}

// PoolNames returns the names of the pools configured by path, sorted
// (pools named on the fly are not among them).
func (s *Store) PoolNames() []string {
	names := make([]string, 0, len(s.pools))
	for n := range s.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PreparePool creates the pool's directory (and its parents, mode 0755) if
// it is missing, gives it its SELinux context (Config.Labeler; also when it
// was there already, as the DaemonSet's hostPath may have made it) and
// returns the pool's state. A pool named on the fly gets its directory in
// the pool root (created too if missing), made through an os.Root on the
// pool root; an entry with its name that is not a directory is a Conflict.
// A labelling failure fails the call and leaves the directory in place.
func (s *Store) PreparePool(ctx context.Context, name string) (*managerapi.Pool, error) {
	p, err := s.pool(name)
	if err != nil {
		return nil, err
	}
	unlock := s.lock(p.name)
	defer unlock()
	if p.parent != "" {
		err = p.makeInParent()
	} else {
		err = mkdirAll(fmt.Sprintf("pool %q", name), p.path)
	}
	if err != nil {
		return nil, err
	}
	if err := s.labelPool(p); err != nil {
		return nil, err
	}
	if err := s.sweepPool(ctx, p); err != nil {
		return nil, err
	}
	info := s.poolInfo(p)
	if info.Error != "" {
		return nil, fmt.Errorf("pool %q: %s", name, info.Error)
	}
	klog.FromContext(ctx).V(4).Info("Prepared pool", "pool", name, "path", p.path)
	return &info, nil
}

// labelPool gives the directory of p its SELinux context, through a
// descriptor of the directory that p.open confined (for a pool named on
// the fly, the one Lstat saw in the pool root).
func (s *Store) labelPool(p *pool) error {
	root, err := p.open()
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("open pool %q directory %s to label it: %w", p.name, p.path, err)
	}
	defer f.Close()
	if err := s.labeler.Label(f); err != nil {
		return fmt.Errorf("label pool %q directory %s for SELinux: %w", p.name, p.path, err)
	}
	return nil
}

// now dates a new owner record, to the second.
func (s *Store) now() time.Time { return s.clock.Now().UTC().Truncate(time.Second) }

// pool returns the pool name: BadRequest for an invalid name, else see
// lookup.
func (s *Store) pool(name string) (*pool, error) {
	if err := ValidatePoolName(name); err != nil {
		return nil, err
	}
	return s.lookup(name)
}

// lookup returns the pool of the valid pool name: the configured pool of
// that name if there is one, else the pool named on the fly in the pool
// root (whose directory may not exist yet), and PoolNotFound without a
// pool root.
func (s *Store) lookup(name string) (*pool, error) {
	if p, ok := s.pools[name]; ok {
		return p, nil
	}
	if s.poolRoot != "" {
		return s.dynamicPool(name), nil
	}
	return nil, poolNotFoundf("pool %q is not configured on node %q (pools: %s)", name, s.nodeName, strings.Join(s.PoolNames(), ", "))
}
