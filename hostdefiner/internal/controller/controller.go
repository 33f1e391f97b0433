package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"hostpath.dev/api/generated/clientset/versioned"
	hdlisters "hostpath.dev/api/generated/listers/hostpath/v1"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/worker"
)

// FieldManager names the host definer in the managed fields of what it
// writes.
const FieldManager = "hostpath-hostdefiner"

// Key is one unit of work: a (node, pool) pair.
type Key struct {
	// Node is the node's name.
	Node string
	// Pool is the storage pool's name.
	Pool string
}

// String names the key in logs.
func (k Key) String() string { return k.Pool + "/" + k.Node }

// Manager is what a try asks of a node's manager (a *managerapi.Client).
type Manager interface {
	Host(ctx context.Context) (*managerapi.Host, error)
	PreparePool(ctx context.Context, pool string) (*managerapi.Pool, error)
	ListVolumes(ctx context.Context, pool string) (*managerapi.VolumeList, error)
	CreateVolume(ctx context.Context, pool, name string, req managerapi.CreateVolumeRequest) (*managerapi.Volume, error)
	SetOwner(ctx context.Context, pool, name string, req managerapi.SetOwnerRequest) (*managerapi.Volume, error)
}

// ManagerFor returns the Manager served by a manager pod.
type ManagerFor func(pod *v1.Pod) (Manager, error)

// Config is the controller's behaviour.
type Config struct {
	// ProvisionerNames select the StorageClasses and PersistentVolumes:
	// those of any of the names.
	ProvisionerNames hostpathv1.ProvisionerNames
	// ManagerDaemonSet is the manager DaemonSet's name (in the namespace of
	// the pod and DaemonSet listers).
	ManagerDaemonSet string
	// ManagerSelector selects the manager pods.
	ManagerSelector labels.Selector
	// MinFreeBytes is the free space a pool needs on a node to be Ready.
	MinFreeBytes int64
	// MaxTries is how many tries a round of define (or undefine) makes
	// before Error.
	MaxTries int32
	// InitialBackoff is the wait after the first failed try; it doubles
	// after each one, up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// AllowDelete=false keeps every definition when its node leaves.
	AllowDelete bool
	// ReverifyPeriod is how often a Ready definition is verified again.
	ReverifyPeriod time.Duration
	// BackfillWorkers bounds the directories one try creates at once.
	BackfillWorkers int
}

// Informers are the listers the sync reads and the informers whose events
// queue work.
type Informers struct {
	Nodes       cache.SharedIndexInformer
	Pods        cache.SharedIndexInformer
	DaemonSets  cache.SharedIndexInformer
	Classes     cache.SharedIndexInformer
	Definitions cache.SharedIndexInformer
	Volumes     cache.SharedIndexInformer
	// Namespace holds the manager pods and DaemonSet.
	Namespace string
}

// Controller keeps the HostDefinitions.
type Controller struct {
	cfg        Config
	kube       kubernetes.Interface
	hostpath   versioned.Interface
	managerFor ManagerFor
	recorder   record.EventRecorder
	clock      clock.Clock
	metrics    *Metrics
	namespace  string

	nodes       corelisters.NodeLister
	daemonSets  appslisters.DaemonSetNamespaceLister
	classes     storagelisters.StorageClassLister
	definitions hdlisters.HostDefinitionLister
	// Caches looked up by index: pods and definitions by node
	// (hostpathv1.NodeNameIndex), definitions by pool
	// (hostpathv1.PoolIndex), multihost volumes by pool (volumePoolIndex).
	podIndex, definitionIndex, volumeIndex cache.Indexer

	synced []cache.InformerSynced

	queue *worker.Queue[Key]
}

// New returns a Controller reading inf and writing through kube and
// hostpath; it registers its event handlers on inf.
func New(cfg Config, kube kubernetes.Interface, hostpath versioned.Interface, inf Informers,
	managerFor ManagerFor, recorder record.EventRecorder, clk clock.Clock, metrics *Metrics) (*Controller, error) {
	c := &Controller{
		cfg: cfg, kube: kube, hostpath: hostpath, managerFor: managerFor, recorder: recorder, clock: clk, metrics: metrics,
		namespace:   inf.Namespace,
		nodes:       corelisters.NewNodeLister(inf.Nodes.GetIndexer()),
		daemonSets:  appslisters.NewDaemonSetLister(inf.DaemonSets.GetIndexer()).DaemonSets(inf.Namespace),
		classes:     storagelisters.NewStorageClassLister(inf.Classes.GetIndexer()),
		definitions: hdlisters.NewHostDefinitionLister(inf.Definitions.GetIndexer()),
		podIndex:    inf.Pods.GetIndexer(), definitionIndex: inf.Definitions.GetIndexer(), volumeIndex: inf.Volumes.GetIndexer(),
	}
	if err := addIndexers(inf, cfg.ProvisionerNames); err != nil {
		return nil, err
	}
	metrics.SetLister(c.definitions)
	c.queue = worker.NewQueue("hostdefinitions", c.syncTimed)
	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any)
	}{
		{inf.Nodes, c.onNode}, {inf.Pods, c.onPod}, {inf.DaemonSets, c.onDaemonSet},
		{inf.Classes, c.onClass}, {inf.Definitions, c.onDefinition}, {inf.Volumes, c.onVolume},
	}
	for _, h := range handlers {
		fn := h.fn
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    fn,
			UpdateFunc: func(_, obj any) { fn(obj) },
			DeleteFunc: fn,
		})
		if err != nil {
			return nil, fmt.Errorf("add an event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// volumePoolIndex indexes the multihost PersistentVolumes of the
// provisioner by pool (multihostVolumeOf).
const volumePoolIndex = "multihostVolumePool"

// addIndexers adds the indexes the controller looks its caches up by.
func addIndexers(inf Informers, names hostpathv1.ProvisionerNames) error {
	byPool := func(obj any) ([]string, error) {
		if pv, ok := obj.(*v1.PersistentVolume); ok {
			if m, ok := multihostVolumeOf(pv, names); ok {
				return []string{m.pool}, nil
			}
		}
		return nil, nil
	}
	for _, x := range []struct {
		inf      cache.SharedIndexInformer
		indexers cache.Indexers
	}{
		{inf.Pods, cache.Indexers{hostpathv1.NodeNameIndex: hostpathv1.IndexByNodeName}},
		{inf.Definitions, cache.Indexers{hostpathv1.NodeNameIndex: hostpathv1.IndexByNodeName, hostpathv1.PoolIndex: hostpathv1.IndexByPool}},
		{inf.Volumes, cache.Indexers{volumePoolIndex: byPool}},
	} {
		if err := x.inf.AddIndexers(x.indexers); err != nil {
			return fmt.Errorf("add indexers to an informer: %w", err)
		}
	}
	return nil
}

// byIndex returns the objects of type T that index holds under name=value.
func byIndex[T any](index cache.Indexer, name, value string) ([]T, error) {
	objs, err := index.ByIndex(name, value)
	if err != nil {
		return nil, fmt.Errorf("look %s=%q up in the cache: %w", name, value, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// Run syncs definitions with workers goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return c.queue.Run(ctx, workers, c.synced...)
}

// syncTimed is Sync with its duration observed.
func (c *Controller) syncTimed(ctx context.Context, key Key) error {
	start := c.clock.Now()
	err := c.Sync(ctx, key)
	c.metrics.observeSync(c.clock.Since(start), err)
	return err
}

// object unwraps a deleted object's tombstone.
func object(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// onNode queues the node for every pool, and for the pools of its
// definitions.
func (c *Controller) onNode(obj any) {
	if n, ok := object(obj).(*v1.Node); ok {
		c.enqueueNode(n.Name)
	}
}

// onPod queues the node of a manager pod.
func (c *Controller) onPod(obj any) {
	if p, ok := object(obj).(*v1.Pod); ok && p.Spec.NodeName != "" && c.cfg.ManagerSelector.Matches(labels.Set(p.Labels)) {
		c.enqueueNode(p.Spec.NodeName)
	}
}

// onDaemonSet queues every node when the manager DaemonSet changes.
func (c *Controller) onDaemonSet(obj any) {
	if ds, ok := object(obj).(*appsv1.DaemonSet); ok && ds.Name == c.cfg.ManagerDaemonSet {
		c.enqueueAll()
	}
}

// onClass queues every node when a class of the provisioner changes.
func (c *Controller) onClass(obj any) {
	if _, ok := poolOf(object(obj), c.cfg.ProvisionerNames); ok {
		c.enqueueAll()
	}
}

// onDefinition queues a definition's key.
func (c *Controller) onDefinition(obj any) {
	if d, ok := object(obj).(*hostpathv1.HostDefinition); ok {
		c.queue.Add(Key{Node: d.Spec.NodeName, Pool: d.Spec.Pool})
	}
}

// onVolume queues every definition of a multihost volume's pool that the
// volume does not list among its nodes.
func (c *Controller) onVolume(obj any) {
	pv, ok := object(obj).(*v1.PersistentVolume)
	if !ok {
		return
	}
	mv, ok := multihostVolumeOf(pv, c.cfg.ProvisionerNames)
	if !ok {
		return
	}
	defs, err := byIndex[*hostpathv1.HostDefinition](c.definitionIndex, hostpathv1.PoolIndex, mv.pool)
	if err != nil {
		return
	}
	for _, d := range defs {
		if !mv.holds(d.Spec.NodeName) {
			c.queue.Add(Key{Node: d.Spec.NodeName, Pool: d.Spec.Pool})
		}
	}
}

// enqueueNode queues (node, pool) for every pool and every definition of
// the node.
func (c *Controller) enqueueNode(node string) {
	pools, _ := c.pools()
	for pool := range pools {
		c.queue.Add(Key{Node: node, Pool: pool})
	}
	defs, _ := byIndex[*hostpathv1.HostDefinition](c.definitionIndex, hostpathv1.NodeNameIndex, node)
	for _, d := range defs {
		c.queue.Add(Key{Node: node, Pool: d.Spec.Pool})
	}
}

// enqueueAll queues every node and every definition.
func (c *Controller) enqueueAll() {
	nodes, _ := c.nodes.List(labels.Everything())
	for _, n := range nodes {
		c.enqueueNode(n.Name)
	}
	defs, _ := c.definitions.List(labels.Everything())
	for _, d := range defs {
		c.queue.Add(Key{Node: d.Spec.NodeName, Pool: d.Spec.Pool})
	}
}
