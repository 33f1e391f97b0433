package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
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
	// ProvisionerNames are the provisioner names, as in Config.
	ProvisionerNames hostpathv1.ProvisionerNames
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
// a PersistentVolume that the API server says does not exist, by the
// policy in the record (sweepDecision): with Delete, whatever they hold
// (the PV went while this node's manager was away, say); with Retain or
// marked retained, never; with none recorded, only when empty (those with
// data are reported). A directory whose PV exists is never removed, even
// when the PV refers to another pool or name (a pool renamed, moved or
// swapped): the PV gets a Warning DirectoryMisplaced instead. Nor is a
// directory removed that any PV names in its annotations (pool and
// directory; node too in node mode), whatever the owner record says:
// a record rewritten to name a PV that does not exist must not cost a live
// volume its data. Before a removal the sweeper looks for such PVs in the
// cache (an index by directory, directoryIndex) and, as the cache may lag,
// on the API server (one paginated LIST per sweep, made only when a sweep
// has a directory to remove); each gets a Warning DirectoryOwnerMismatch.
// It creates nothing: the multihost directories a node lacks are the host
// definer's to make, when it defines the node for a pool.
type Sweeper struct {
	cfg     SweeperConfig
	volumes corelisters.PersistentVolumeLister
	// byDirectory is the PV cache, indexed by directoryIndex.
	byDirectory cache.Indexer
	// indexErr is why the index could not be added to the PV informer:
	// then every sweep fails, and removes nothing.
	indexErr error
	synced   []cache.InformerSynced

	// reported holds the pool/directory of the non-empty orphans and
	// ("misplaced/" first) of the misplaced directories, and ("named/"
	// first, then the PV) the directories kept because a PV names them,
	// already reported by this process.
	mu       sync.Mutex
	reported map[string]bool
	// trigger asks Run for a sweep now (Trigger).
	trigger chan struct{}
}

// NewSweeper returns the Sweeper of cfg.Node, with defaults for the zero
// Period, Grace and Clock. It adds directoryIndex to the PV informer,
// unless it has it already.
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
	informer := cfg.Volumes.Informer()
	if _, ok := informer.GetIndexer().GetIndexers()[directoryIndex]; !ok {
		if err := informer.AddIndexers(cache.Indexers{directoryIndex: directoryKeys(cfg.ProvisionerNames)}); err != nil {
			s.indexErr = fmt.Errorf("index PersistentVolumes by directory: %w", err)
		}
	}
	s.byDirectory = informer.GetIndexer()
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

// sweepPass is what one sweep did, and what it learnt from the API server.
type sweepPass struct {
	removed, kept int
	// live holds, by directoryIndex key, the PVs of the API server that
	// name a directory of this node (or of any node): listed once per
	// sweep, at its first removal (listed); listErr is why that LIST
	// failed, which keeps every directory of the sweep without another.
	live    map[string][]*v1.PersistentVolume
	listed  bool
	listErr error
}

// Sweep looks once at every volume of every pool of the node's manager,
// removes the orphans its policy rule allows and reports the non-empty ones
// it keeps. The error joins every failure, with the counts of removed and
// kept orphans.
func (s *Sweeper) Sweep(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if s.indexErr != nil {
		return fmt.Errorf("sweep node %q: %w", s.cfg.Node, s.indexErr)
	}
	mgr, err := s.cfg.Managers(s.cfg.Node)
	if err != nil {
		return fmt.Errorf("sweep node %q: find the manager: %w", s.cfg.Node, err)
	}
	host, err := mgr.Host(ctx)
	if err != nil {
		return fmt.Errorf("sweep node %q: describe the host: %w", s.cfg.Node, err)
	}
	var (
		counts sweepPass
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

// ownerState is what became of the PV an owner record names, as the
// sweeper sees it.
type ownerState int

const (
	// ownerUses: the PV exists and refers to this directory of this node
	// (a multihost PV, to its pool and directory on every node).
	ownerUses ownerState = iota
	// ownerElsewhere: the PV, one of this provisioner, exists but refers
	// to another pool, directory or node (a pool renamed, moved or
	// swapped; a claim that moved while provisioning was retried).
	ownerElsewhere
	// ownerForeign: the PV exists but is not this provisioner's.
	ownerForeign
	// ownerGone: the API server answered NotFound for the PV.
	ownerGone
)

// sweepAction is what the sweeper does with one directory.
type sweepAction int

const (
	// sweepLeave: nothing, silently.
	sweepLeave sweepAction = iota
	// sweepReportMisplaced: nothing, but a Warning on the owner PV.
	sweepReportMisplaced
	// sweepRemove: DELETE ...?owner={pv}, whatever the directory holds.
	sweepRemove
	// sweepRemoveIfEmpty: DELETE ...?owner={pv}&ifEmpty=true.
	sweepRemoveIfEmpty
)

// sweepDecision is the sweeper's rule for a directory whose owner record
// is old enough and not marked retained, by what became of its owner PV
// and the reclaim policy the record keeps (a directory it would remove is
// still kept when any PV names it: volumesNaming). A directory is removed only
// when its PV is confirmed gone: with policy Delete whatever it holds (the
// PV went while this node's manager was away, say), with none recorded
// (records of older managers) only when empty, with Retain never. A PV
// that exists keeps its directory, wherever it says its directory is.
func sweepDecision(owner ownerState, policy string) sweepAction {
	switch owner {
	case ownerElsewhere:
		return sweepReportMisplaced
	case ownerGone:
		switch policy {
		case managerapi.ReclaimDelete:
			return sweepRemove
		case "":
			return sweepRemoveIfEmpty
		}
	}
	return sweepLeave
}

// sweepVolume applies sweepDecision to one volume of pool.
func (s *Sweeper) sweepVolume(ctx context.Context, mgr Manager, pool string, vol managerapi.Volume, counts *sweepPass) error {
	owner := vol.Owner
	if owner == "" || vol.Retained || vol.ReclaimPolicy == managerapi.ReclaimRetain ||
		vol.OwnedSince == nil || s.cfg.Clock.Since(*vol.OwnedSince) < s.cfg.Grace {
		// No owner record (adoption handles it), kept on purpose, or
		// possibly a provisioning attempt still saving its PV.
		return nil
	}
	dir := directory{node: s.cfg.Node, pool: pool, name: vol.Name}
	state, pv, err := s.ownerState(ctx, owner, dir)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("pool", pool, "directory", vol.Name, "owner", owner)
	action := sweepDecision(state, vol.ReclaimPolicy)
	switch action {
	case sweepLeave:
		s.forget(dir)
		return nil
	case sweepReportMisplaced:
		s.reportMisplaced(logger, dir, pv)
		return nil
	}
	named, err := s.volumesNaming(ctx, dir, counts)
	if err != nil {
		return fmt.Errorf("keep %s: %w", dir, err)
	}
	if len(named) > 0 {
		s.reportNamed(logger, dir, owner, named)
		return nil
	}
	ifEmpty := action == sweepRemoveIfEmpty
	err = mgr.DeleteVolume(ctx, pool, vol.Name, managerapi.DeleteOptions{Owner: owner, IfEmpty: ifEmpty})
	switch managerapi.Classify(err) {
	case managerapi.AnswerOK:
		counts.removed++
		if ifEmpty {
			logger.Info("Removed an empty orphaned directory", "ownedSince", vol.OwnedSince)
		} else {
			logger.Info("Removed an orphaned directory by its reclaim policy", "reclaimPolicy", vol.ReclaimPolicy, "ownedSince", vol.OwnedSince)
		}
	case managerapi.AnswerNotEmpty:
		counts.kept++
		s.report(logger, dir, owner)
	case managerapi.AnswerVolumeMissing, managerapi.AnswerPoolMissing, managerapi.AnswerOwnerConflict:
		// Gone, or adopted since the list: nothing left to do.
		logger.V(2).Info("The orphaned directory changed since it was listed", "err", err)
	default:
		return fmt.Errorf("remove orphaned %s: %w", dir, err)
	}
	return nil
}

// ownerState finds what became of PV owner, which a record of dir names:
// from the cache when the PV is there, else from the API server (the cache
// can lag; only the API server's NotFound makes it gone). The PV is
// returned when it exists.
func (s *Sweeper) ownerState(ctx context.Context, owner string, dir directory) (ownerState, *v1.PersistentVolume, error) {
	pv, err := s.volumes.Get(owner)
	if apierrors.IsNotFound(err) {
		pv, err = s.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, owner, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ownerGone, nil, nil
		}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("get PersistentVolume %q: %w", owner, err)
	}
	loc, ok := locationOf(pv, s.cfg.ProvisionerNames)
	switch {
	case !ok:
		return ownerForeign, pv, nil
	case loc.holds(dir):
		return ownerUses, pv, nil
	}
	return ownerElsewhere, pv, nil
}

// ReasonDirectoryOwnerMismatch (Warning, on the PV): a node holds the
// directory this PV names, but its owner record names another PV, which
// does not exist (the record was changed by something other than the
// provisioner): the sweeper keeps it, never removes it.
const ReasonDirectoryOwnerMismatch = "DirectoryOwnerMismatch"

// directoryIndex is the name of the PV informer's index by the directory
// a PV names (directoryKeys).
const directoryIndex = "hostpath.dev/directory"

// directoryKey is the directoryIndex key of directory name of pool on
// node; node "" stands for any node (a multihost PV, or one that names no
// node). A "/" inside a part (annotations are not validated) can only make
// two keys alike, which keeps more directories, never fewer.
func directoryKey(node, pool, name string) string {
	return node + "/" + pool + "/" + name
}

// directoryKeys returns the index function of directoryIndex for the
// provisioner names: the key of the directory a PV names in its
// annotations, whoever made it. A PV of the provisioner gives that of
// hostpathv1.VolumeDirectoryOf: its node, pool and directory in node mode,
// its pool and directory on any node in multihost mode. Any other PV that
// names a pool and a directory (one made by hand, another provisioner's:
// cached as a stub that keeps these annotations, package cachetrim) gives
// those with its hostpath.dev/node, or on any node when it names none.
func directoryKeys(names hostpathv1.ProvisionerNames) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return nil, nil
		}
		if key, ok := directoryKeyOf(pv, names); ok {
			return []string{key}, nil
		}
		return nil, nil
	}
}

// directoryKeyOf returns the directoryIndex key of the directory pv names
// (directoryKeys), and false when it names none.
func directoryKeyOf(pv *v1.PersistentVolume, names hostpathv1.ProvisionerNames) (string, bool) {
	d, ok := hostpathv1.VolumeDirectoryOf(pv, names)
	if !ok {
		a := pv.Annotations
		d = hostpathv1.VolumeDirectory{Pool: a[hostpathv1.AnnotationPool], Directory: a[hostpathv1.AnnotationDirectory], Node: a[hostpathv1.AnnotationNode]}
	}
	if d.Pool == "" || d.Directory == "" {
		return "", false
	}
	if d.Multihost {
		return directoryKey("", d.Pool, d.Directory), true
	}
	return directoryKey(d.Node, d.Pool, d.Directory), true
}

// volumesNaming returns the PVs that name dir, a directory of this node,
// in their annotations (directoryKeys), sorted by name: those of the
// cache, else those of the API server. The PV cache holds every PV that
// names a directory of this node or of any node (package cachetrim keeps
// the PVs of this node, the multihost ones and stubs of the others that
// name a directory), but it may lag behind a PV just made or changed, so
// when it holds none the API server is asked too, once per sweep (pass):
// a paginated LIST of every PV, of which only those that name a directory
// of this node or of any node are kept. It is made only by a sweep that
// has a directory to remove, which the grace period and the policy rule
// make rare; an error keeps the directory.
func (s *Sweeper) volumesNaming(ctx context.Context, dir directory, pass *sweepPass) ([]*v1.PersistentVolume, error) {
	keys := []string{directoryKey(dir.node, dir.pool, dir.name), directoryKey("", dir.pool, dir.name)}
	var named []*v1.PersistentVolume
	for _, key := range keys {
		objs, err := s.byDirectory.ByIndex(directoryIndex, key)
		if err != nil {
			return nil, fmt.Errorf("find the PersistentVolumes that name it in the cache: %w", err)
		}
		for _, obj := range objs {
			if pv, ok := obj.(*v1.PersistentVolume); ok {
				named = append(named, pv)
			}
		}
	}
	if len(named) == 0 {
		if !pass.listed {
			pass.live, pass.listErr = s.listNaming(ctx)
			pass.listed = true
		}
		if pass.listErr != nil {
			return nil, pass.listErr
		}
		for _, key := range keys {
			named = append(named, pass.live[key]...)
		}
	}
	slices.SortFunc(named, func(a, b *v1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	return named, nil
}

// listNaming lists every PV from the API server and returns, by
// directoryIndex key, those that name a directory of this node or of any
// node.
func (s *Sweeper) listNaming(ctx context.Context) (map[string][]*v1.PersistentVolume, error) {
	live := map[string][]*v1.PersistentVolume{}
	list := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return s.cfg.Client.CoreV1().PersistentVolumes().List(ctx, opts)
	}))
	list.PageSize = goneScanPageSize
	err := list.EachListItemWithAlloc(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return nil
		}
		key, ok := directoryKeyOf(pv, s.cfg.ProvisionerNames)
		if ok && (strings.HasPrefix(key, "/") || strings.HasPrefix(key, s.cfg.Node+"/")) {
			live[key] = append(live[key], pv)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the PersistentVolumes that could name it: %w", err)
	}
	return live, nil
}

// reportNamed logs a directory that the sweeper would have removed, as its
// owner record names PV owner, which does not exist, but that the PVs
// named name, and emits a Warning event on each of them, once per
// directory, PV and process.
func (s *Sweeper) reportNamed(logger klog.Logger, dir directory, owner string, named []*v1.PersistentVolume) {
	names := make([]string, len(named))
	for i, pv := range named {
		names[i] = pv.Name
	}
	logger.V(2).Info("Kept a directory that a PersistentVolume names, whose owner record names one that does not exist", "namedBy", names)
	for _, pv := range named {
		if !s.firstReport("named/" + dir.pool + "/" + dir.name + "/" + pv.Name) {
			continue
		}
		logger.Info("Kept a directory that a PersistentVolume names, whose owner record names one that does not exist", "namedBy", pv.Name)
		s.cfg.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonDirectoryOwnerMismatch,
			"The %s, which this PersistentVolume names, is recorded as PersistentVolume %q's, which does not exist: it is kept, never removed by the sweeper; "+
				"its owner record was changed by something other than this provisioner: check the node, and give the directory back to this PersistentVolume with the manager's owner call", dir, owner)
	}
}

// reportMisplaced logs a directory whose owner PV refers to another place,
// and emits a Warning event on the PV, once per directory and process
// (again after it was found in place, see forget).
func (s *Sweeper) reportMisplaced(logger klog.Logger, dir directory, pv *v1.PersistentVolume) {
	if !s.firstReport("misplaced/" + dir.pool + "/" + dir.name) {
		return
	}
	where := "its directory"
	if loc, ok := locationOf(pv, s.cfg.ProvisionerNames); ok {
		where = loc.String()
		if loc.Multihost {
			where += " on every node"
		}
	}
	logger.Info("Kept a directory whose owner PersistentVolume refers to another place", "pvRefersTo", where)
	s.cfg.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonDirectoryMisplaced,
		"The %s is recorded as this PersistentVolume's, but the PersistentVolume refers to %s (a pool renamed, moved or swapped?): "+
			"it is kept, never removed by the sweeper; restore the pool's name and path, or see kubectl hostpath orphans", dir, where)
}

// forget clears the reports of dir, so that it is reported again should it
// be misplaced again.
func (s *Sweeper) forget(dir directory) {
	s.mu.Lock()
	delete(s.reported, "misplaced/"+dir.pool+"/"+dir.name)
	s.mu.Unlock()
}

// firstReport records key as reported and says whether it was not before.
func (s *Sweeper) firstReport(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reported[key] {
		return false
	}
	s.reported[key] = true
	return true
}

// report logs a non-empty orphan and emits a Warning event on the Node, once
// per directory and process.
func (s *Sweeper) report(logger klog.Logger, dir directory, owner string) {
	if !s.firstReport(dir.pool + "/" + dir.name) {
		return
	}
	msg := fmt.Sprintf("The %s belongs to PersistentVolume %q, which does not exist, but holds data, so it was kept: remove it by hand when nothing needs it", dir, owner)
	logger.Info("Kept an orphaned directory that holds data")
	// Events of the kubelet name the Node by name as its UID; kubectl
	// describe node shows them.
	node := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: s.cfg.Node, UID: types.UID(s.cfg.Node)}
	s.cfg.Recorder.Event(node, v1.EventTypeWarning, ReasonOrphanedDirectory, msg)
}
