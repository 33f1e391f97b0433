package reclaim

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/worker"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/responsibility"
)

// Config holds what a Controller depends on.
type Config struct {
	// ProvisionerNames are the provisioner names: only PVs whose
	// pv.kubernetes.io/provisioned-by says one of them are looked at.
	ProvisionerNames hostpathv1.ProvisionerNames
	// Node is the node this instance runs on.
	Node string
	// FieldManager is the field manager of the PV patches.
	FieldManager string
	// Client patches PVs.
	Client kubernetes.Interface
	// Volumes is the shared PersistentVolume informer that drives the
	// controller; it is read only through its lister.
	Volumes coreinformers.PersistentVolumeInformer
	// Nodes says whether a PV's node exists (nodes.Lookup): a PV whose
	// node does not belongs to a node that is gone. The app tells the
	// controller of the instances that come and go (NodeJoined,
	// NodeLeft), as no instance watches every Node.
	Nodes Nodes
	// Instances are the live instances, among which the rule of who acts
	// for a PV elects (package responsibility).
	Instances responsibility.Instances
	// Managers returns the manager of a node: Node's for node-mode PVs,
	// any node's for multihost PVs.
	Managers func(node string) (Manager, error)
	// Targets lists the nodes defined for a pool: the nodes that may hold
	// a multihost directory without the PV listing them yet; nil lists
	// none.
	Targets TargetLister
	// Fanout shapes the calls to the nodes that hold a directory (its
	// Retryable is set from managerapi.Classify).
	Fanout fanout.Options
	// FanoutMetrics records those fan-outs; nil records nothing.
	FanoutMetrics *fanout.Metrics
	// Recorder emits events on PVs.
	Recorder record.EventRecorder
	// NodeGoneGrace, when positive, is how long the Node of a node-mode PV
	// must have been missing before the PV (reclaim policy Delete, not
	// Bound) is deleted (see nodegone.go); 0 leaves such PVs alone.
	NodeGoneGrace time.Duration
	// NodeGoneScan is the period of the scan for the PVs of deleted Nodes
	// (nodegonescan.go); 0 is DefaultGoneScanPeriod.
	NodeGoneScan time.Duration
	// Clock dates the node-gone marks; nil means the real clock.
	Clock clock.PassiveClock
}

// Nodes is what the controller needs to know of the Nodes.
type Nodes interface {
	// Exists reports whether the Node name exists; a NotFound is not an
	// error, and a Node is said missing only on the API server's answer
	// of now.
	Exists(name string) (bool, error)
	// Forget drops what is known of the Node name, so that the next
	// Exists asks again.
	Forget(name string)
}

// Controller removes or retains the directories of node-mode and multihost
// PVs under deletion and then removes their finalizer
// (hostpathv1.FinalizerDirectoryProtection), without a second fan-out for a
// PV whose directory its Reclaim took to its final state for the library
// moments before; it is the only remover of that finalizer. It has the
// shape of Kubernetes' sample-controller: the informer queues PV names,
// workers sync one name at a time from the lister, failures are retried with
// backoff (package worker).
type Controller struct {
	cfg     Config
	clock   clock.PassiveClock
	volumes corelisters.PersistentVolumeLister
	nodes   Nodes
	// rule says whether this instance acts for a PV.
	rule   *responsibility.Rule
	synced []cache.InformerSynced
	queue  *worker.Queue[string]
	// finished remembers the PVs whose directory Reclaim took to its
	// final state for the library, so that the pass after the library's
	// DELETE removes the finalizer without a second fan-out.
	finished *finishedSet
	// scan asks for a scan of the API server for the PVs of deleted
	// Nodes (nodegonescan.go); suspects are the nodes an instance left
	// since the last scan (only with a grace period: without one, no
	// scan takes them).
	scan     chan struct{}
	mu       sync.Mutex
	suspects map[string]bool
	// watchErr is the failure to register the event handlers, returned
	// by Run.
	watchErr error
}

// NewController returns the Controller of the instance on cfg.Node and
// registers its event handlers with cfg.Volumes; start the informers after
// it.
func NewController(cfg Config) *Controller {
	c := &Controller{
		cfg:     cfg,
		clock:   cfg.Clock,
		volumes: cfg.Volumes.Lister(),
		nodes:   cfg.Nodes,
		rule:    responsibility.New(cfg.Node, cfg.Instances, cfg.Nodes),
		synced:  []cache.InformerSynced{cfg.Volumes.Informer().HasSynced},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.finished = newFinishedSet(c.clock)
	c.scan, c.suspects = make(chan struct{}, 1), map[string]bool{}
	c.queue = worker.NewQueue("reclaim", c.sync)
	_, c.watchErr = cfg.Volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, obj any) { c.volumeChanged(obj) },
	})
	return c
}

// Run waits for the caches, then syncs PVs with workers goroutines until ctx
// is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if c.watchErr != nil {
		c.queue.ShutDown()
		return fmt.Errorf("watch PersistentVolumes: %w", c.watchErr)
	}
	klog.FromContext(ctx).Info("Starting the reclaim controller", "finalizer", hostpathv1.FinalizerDirectoryProtection)
	go c.runGoneScans(ctx)
	go c.runNodeChecks(ctx)
	return c.queue.Run(ctx, workers, c.synced...)
}

// volumeChanged queues a PV of this provisioner that may need work: one
// under deletion with the finalizer; one whose owner records do not say
// its reclaim policy yet (hostpathv1.AnnotationRecordedPolicy); and, in node mode,
// one of this node lacking the finalizer or one whose node is gone.
func (c *Controller) volumeChanged(obj any) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok {
		return
	}
	loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
	if !ok {
		return
	}
	deleting := pv.DeletionTimestamp != nil
	switch {
	case deleting && hasFinalizer(pv),
		!deleting && !policyRecorded(pv),
		!loc.Multihost && !deleting && !hasFinalizer(pv) && loc.Node == c.cfg.Node,
		!loc.Multihost && !deleting && c.nodeGoneWork(pv, loc.at(loc.Node)):
		c.queue.Add(pv.Name)
	}
}

// ManagerReady queues the PVs that may wait for node's manager: those
// under deletion with the finalizer and those whose reclaim policy is not
// recorded yet, of node (node mode) or multihost (which any node may
// hold). The app calls it when a manager pod becomes Ready, so a PV that
// waited for that manager does not wait for its backoff too.
func (c *Controller) ManagerReady(node string) {
	pvs, err := c.volumes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pv := range pvs {
		loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
		if !ok || !loc.Multihost && loc.Node != node {
			continue
		}
		if pv.DeletionTimestamp != nil && hasFinalizer(pv) || pv.DeletionTimestamp == nil && !policyRecorded(pv) {
			c.queue.Add(pv.Name)
		}
	}
}

// sync brings one PV, read from the lister, to its next state.
func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PersistentVolume %q from the cache: %w", name, err)
	}
	in, err := c.facts(pv)
	if err != nil {
		return err
	}
	return c.run(ctx, in)
}

// Reclaim is the library's path (provisioner.Provisioner.Delete, on the
// instance its DeletionGuard chose, for a Released PV with policy Delete):
// the library DELETEs the PV itself as soon as Reclaim returns nil.
// Reclaim takes the directory of pv, a PV of this provisioner that is not
// Bound, to its final state on every node that holds it (reclaim policy
// Delete: removed; otherwise: marked retained) and reports what was done;
// it does not remove pv's finalizer. Once no node is waiting it remembers
// pv (policy Delete only: see finishedSet) and returns nil; the library's
// DELETE then puts pv under deletion, and the Controller's pass removes
// the finalizer without asking the managers again (ActRemoveFinalizer).
// While a node that holds the directory is not done, Reclaim emits a
// Warning naming the nodes and returns an error, to be retried, and
// remembers nothing. A PV remembered already (the library syncs it again
// before its DELETE went through) returns nil at once.
func (c *Controller) Reclaim(ctx context.Context, pv *v1.PersistentVolume) error {
	return c.run(ctx, c.libraryFacts(pv))
}
