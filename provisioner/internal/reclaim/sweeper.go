package reclaim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/manager/pkg/client"
)

// Defaults of a SweeperConfig.
const (
	// DefaultSweepPeriod is how often a Sweeper looks for orphans.
	DefaultSweepPeriod = 10 * time.Minute
	// DefaultSweepGrace is how old an owner record must be before its
	// directory can be an orphan: longer than a provisioning attempt takes
	// to save its PV.
	DefaultSweepGrace = 10 * time.Minute
)

// SweeperConfig holds what a Sweeper depends on.
type SweeperConfig struct {
	// ProvisionerName is the provisioner name, as in Config.
	ProvisionerName string
	// Node is the node whose manager is swept.
	Node string
	// Client reads an owner PV live before its directory is removed.
	Client kubernetes.Interface
	// Volumes is the shared PersistentVolume informer, read through its
	// lister.
	Volumes coreinformers.PersistentVolumeInformer
	// Managers returns the manager of a node (only Node is asked for).
	Managers func(node string) (Manager, error)
	// Recorder emits OrphanedDirectory events on the Node.
	Recorder record.EventRecorder
	// Period is the time between sweeps (DefaultSweepPeriod when zero).
	Period time.Duration
	// Grace is the minimum age of an owner record whose directory is
	// removed (DefaultSweepGrace when zero).
	Grace time.Duration
	// Clock tells the time (the real clock when nil).
	Clock clock.PassiveClock
}

// Sweeper removes, on one node, volume directories whose owner record names
// a PersistentVolume that does not exist, by the policy in the record: with
// Delete, whatever they hold (the PV went while this node's manager was
// away, say); with Retain or marked retained, never; with none recorded,
// only when empty (left behind when a claim moved to another node while a
// provisioning attempt was being retried; those with data are reported).
// It creates nothing: the multihost directories a node lacks are the host
// definer's to make, when it defines the node for a pool.
type Sweeper struct {
	cfg     SweeperConfig
	volumes corelisters.PersistentVolumeLister
	synced  []cache.InformerSynced

	// reported holds the pool/directory of the non-empty orphans already
	// reported by this process.
	mu       sync.Mutex
	reported map[string]bool
	// trigger asks Run for a sweep now (Trigger).
	trigger chan struct{}
}

// NewSweeper returns the Sweeper of cfg.Node, with defaults for the zero
// Period, Grace and Clock.
func NewSweeper(cfg SweeperConfig) *Sweeper {
	if cfg.Period <= 0 {
		cfg.Period = DefaultSweepPeriod
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultSweepGrace
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	s := &Sweeper{
		cfg:      cfg,
		volumes:  cfg.Volumes.Lister(),
		synced:   []cache.InformerSynced{cfg.Volumes.Informer().HasSynced},
		reported: map[string]bool{},
		trigger:  make(chan struct{}, 1),
	}
	return s
}

// Run waits for the PersistentVolume cache, then sweeps every Period, and
// at once when triggered (Trigger), until ctx is done. A failed sweep is
// logged and the next one comes on time.
func (s *Sweeper) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting the orphan sweeper", "period", s.cfg.Period, "grace", s.cfg.Grace)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, s.synced...) {
		return fmt.Errorf("wait for the PersistentVolume cache: %w", context.Cause(ctx))
	}
	ticker := time.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	// The first sweep covers whatever asked for one before it (the manager
	// pod already Ready when the caches filled).
	select {
	case <-s.trigger:
	default:
	}
	for {
		if err := s.Sweep(ctx); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Failed to sweep orphaned directories")
		}
		select {
		case <-ctx.Done():
			logger.Info("Stopped the orphan sweeper")
			return nil
		case <-ticker.C:
		case <-s.trigger:
			logger.V(2).Info("Sweeping now: this node's manager became Ready")
		}
	}
}

// Trigger asks for a sweep now, without waiting for the period: the app
// calls it when this node's manager becomes Ready, so that the orphans left
// while it was away (the directories of multihost volumes deleted
// meanwhile, with policy Delete) go at once and a sweep that failed for
// want of a manager is not left to the next period. Triggers that come
// while one is pending are merged.
func (s *Sweeper) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// sweepCounts is what one sweep did.
type sweepCounts struct {
	removed, kept int
}

// Sweep looks once at every volume of every pool of the node's manager,
// removes the orphans its policy rule allows and reports the non-empty ones
// it keeps. The error joins every failure, with the counts of removed and
// kept orphans.
func (s *Sweeper) Sweep(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	mgr, err := s.cfg.Managers(s.cfg.Node)
	if err != nil {
		return fmt.Errorf("sweep node %q: find the manager: %w", s.cfg.Node, err)
	}
	host, err := mgr.Host(ctx)
	if err != nil {
		return fmt.Errorf("sweep node %q: describe the host: %w", s.cfg.Node, err)
	}
	var (
		counts sweepCounts
		errs   []error
	)
	for _, pool := range host.Pools {
		list, err := mgr.ListVolumes(ctx, pool.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("list volumes of pool %q: %w", pool.Name, err))
			continue
		}
		for _, vol := range list.Items {
			if err := s.sweepVolume(ctx, mgr, pool.Name, vol, &counts); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if counts.removed > 0 || counts.kept > 0 {
		logger.Info("Swept orphaned directories", "removed", counts.removed, "keptNotEmpty", counts.kept, "failures", len(errs))
	} else {
		// Once a period (and at start): what an operator, or a test, checks
		// to know that a sweep ran.
		logger.V(2).Info("Swept orphaned directories", "removed", 0, "keptNotEmpty", 0, "failures", len(errs))
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweep node %q (%d orphans removed, %d kept because not empty): %w",
			s.cfg.Node, counts.removed, counts.kept, errors.Join(errs...))
	}
	return nil
}

// sweepVolume removes one volume of pool if it is an orphan, by the reclaim
// policy in its owner record: Delete removes it whatever it holds (that is
// its PV's policy: a multihost node whose manager was away while the PV was
// deleted, or a PV whose finalizer was removed by hand); Retain, or marked
// retained, never touches it; no policy recorded (records of older
// managers and provisioners) removes it only if empty.
func (s *Sweeper) sweepVolume(ctx context.Context, mgr Manager, pool string, vol client.Volume, counts *sweepCounts) error {
	owner := vol.Owner
	if owner == "" || vol.Retained || vol.ReclaimPolicy == client.ReclaimRetain ||
		vol.OwnedSince == nil || s.cfg.Clock.Since(*vol.OwnedSince) < s.cfg.Grace {
		// No owner record (adoption handles it), kept on purpose, or
		// possibly a provisioning attempt still saving its PV.
		return nil
	}
	dir := directory{node: s.cfg.Node, pool: pool, name: vol.Name}
	if pv, err := s.volumes.Get(owner); err == nil && s.refersTo(pv, dir) {
		return nil
	} else if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PersistentVolume %q from the cache: %w", owner, err)
	}
	// The cache can lag: confirm with the API server.
	pv, err := s.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, owner, metav1.GetOptions{})
	switch {
	case err == nil && s.refersTo(pv, dir):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get PersistentVolume %q: %w", owner, err)
	}

	logger := klog.FromContext(ctx).WithValues("pool", pool, "directory", vol.Name, "owner", owner)
	ifEmpty := vol.ReclaimPolicy != client.ReclaimDelete
	err = mgr.DeleteVolume(ctx, pool, vol.Name, client.DeleteOptions{Owner: owner, IfEmpty: ifEmpty})
	switch client.ReasonOf(err) {
	case "":
		if err != nil {
			return fmt.Errorf("remove orphaned %s: %w", dir, err)
		}
		counts.removed++
		if ifEmpty {
			logger.Info("Removed an empty orphaned directory", "ownedSince", vol.OwnedSince)
		} else {
			logger.Info("Removed an orphaned directory by its reclaim policy", "reclaimPolicy", vol.ReclaimPolicy, "ownedSince", vol.OwnedSince)
		}
	case client.ReasonNotEmpty:
		counts.kept++
		s.report(logger, dir, owner)
	case client.ReasonNotFound, client.ReasonOwnerConflict:
		// Gone, or adopted since the list: nothing left to do.
		logger.V(2).Info("The orphaned directory changed since it was listed", "err", err)
	default:
		return fmt.Errorf("remove orphaned %s: %w", dir, err)
	}
	return nil
}

// refersTo reports whether pv may still use dir: pv is not a PV of this
// provisioner (so not ours to judge), or it points at dir (a multihost PV
// points at its pool and directory on every node).
func (s *Sweeper) refersTo(pv *v1.PersistentVolume, dir directory) bool {
	if m, ok := multihostDirectory(pv, s.cfg.ProvisionerName); ok {
		return m.pool == dir.pool && m.name == dir.name
	}
	d, ok := nodeDirectory(pv, s.cfg.ProvisionerName)
	return !ok || d == dir
}

// report logs a non-empty orphan and emits a Warning event on the Node, once
// per directory and process.
func (s *Sweeper) report(logger klog.Logger, dir directory, owner string) {
	key := dir.pool + "/" + dir.name
	s.mu.Lock()
	done := s.reported[key]
	s.reported[key] = true
	s.mu.Unlock()
	if done {
		return
	}
	msg := fmt.Sprintf("The %s belongs to PersistentVolume %q, which does not exist, but holds data, so it was kept: remove it by hand when nothing needs it", dir, owner)
	logger.Info("Kept an orphaned directory that holds data")
	// Events of the kubelet name the Node by name as its UID; kubectl
	// describe node shows them.
	node := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: s.cfg.Node, UID: types.UID(s.cfg.Node)}
	s.cfg.Recorder.Event(node, v1.EventTypeWarning, ReasonOrphanedDirectory, msg)
}
