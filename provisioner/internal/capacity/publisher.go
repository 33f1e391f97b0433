// Package capacity publishes, for the node of one provisioner instance, the
// storage capacity of its capacity-aware StorageClasses as
// CSIStorageCapacity objects (storage.k8s.io/v1), so that the
// kube-scheduler places the pods of WaitForFirstConsumer claims only on
// nodes whose pool has room for them.
//
// # How the scheduler uses them
//
// The VolumeBinding plugin of the kube-scheduler checks capacity for an
// unbound WaitForFirstConsumer claim when a CSIDriver object is named like
// the claim's StorageClass's provisioner and says storageCapacity: true.
// hostpath.dev/provisioner cannot name a CSIDriver (it holds a "/"), so the
// capacity-aware classes are those of the provisioner name
// hostpathv1.CapacityProvisionerName (hostpath.dev), which every instance
// serves besides its --provisioner-name, and the CSIDriver hostpath.dev
// (manifests/base/provisioner/csidriver.yaml) opts them in. For such a
// class the plugin keeps a node when some CSIStorageCapacity of the class
// whose nodeTopology matches the node's labels has a capacity (or a
// maximumVolumeSize, when set) of at least the claim's request; with no
// such object the node has no room. Immediate classes are never checked.
//
// # What a Publisher publishes
//
// One object per capacity-aware class of binding mode WaitForFirstConsumer
// (Immediate ones are skipped: the scheduler never reads them), for this
// node only, in Config.Namespace, so that each instance's cost is flat in
// the size of the cluster:
//
//   - name "hp-" and 32 hex digits of the SHA-256 of the class, the node and
//     the node's kubernetes.io/hostname label (ObjectName): deterministic,
//     and new when one of the immutable fields (storageClassName,
//     nodeTopology) would change;
//   - labels app.kubernetes.io/managed-by=hostpath-provisioner,
//     hostpath.dev/node and hostpath.dev/storage-class (LabelValue: the name,
//     or its start and a hash when longer than 63 characters); the instance
//     watches the objects of its own node through the first two (Selector);
//   - an owner reference to the Node, so that the garbage collector deletes
//     them with the Node;
//   - storageClassName, and nodeTopology matchLabels
//     {kubernetes.io/hostname: <the Node's label>}: the label the PVs' node
//     affinity uses too, read from the Node (it need not equal its name). A
//     Node without that label gets no objects;
//   - capacity: availableBytes of the class's pool in the manager's GET
//     /v1/host, the largest size a new volume can have there now (the
//     smaller of the free space and the capacity times the overcommit ratio
//     less the sizes promised); 0 when the manager lists no such pool,
//     cannot read its statistics, or, for a class with enforceSize: "true",
//     does not enforce sizes there (the provisioner would refuse the volume
//     on that node anyway);
//   - no maximumVolumeSize: availableBytes is already the largest volume
//     that fits, and the scheduler compares the request with capacity when
//     maximumVolumeSize is unset. A second figure would say the same thing.
//
// A multihost class gets each node's own figure. A multihost volume needs
// room on every node of its pool, but the scheduler checks only the node it
// places the pod on; a node without room fails the fan-out, whose claim is
// retried with an event naming that node (docs/volumes.md, "Multihost
// volumes").
//
// # Writes
//
// The objects are refreshed every Config.Interval, and TriggerDelay after a
// capacity-aware class comes or goes, this node's hostname label or UID
// changes, an object of this node is deleted, or a PersistentVolume of
// this node (or a multihost one) is created, deleted or resized
// (AddEventHandlers, Trigger): the events of a burst are one refresh. A
// refresh asks the manager once (GET /v1/host) and writes an object only
// when:
//
//   - it is missing, or its labels, owner reference or maximumVolumeSize
//     are not as above (repaired); or
//   - its capacity moved from or to 0, or by more than the threshold:
//     1% of the pool's filesystem capacity or MinThreshold (16 MiB),
//     whichever is larger;
//
// and never more than once per object per Interval (a change that comes
// sooner is published when the Interval since the last write is over). So
// an instance makes at most one create or update per capacity-aware class
// per Interval, plus a delete for each object whose class went, stopped
// being capacity-aware, or whose immutable fields would change. The bound
// is kept in memory: a restarted instance may write each object once more.
//
// A manager that cannot be asked leaves the objects as they are (retried
// with backoff); deletions of objects no class wants any more do not wait
// for it. With Interval 0, Run deletes this node's objects once and
// publishes nothing: the scheduler then sees no room for capacity-aware
// classes on the node.
package capacity

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// DefaultInterval is the default time between two refreshes, and the
// shortest time between two writes of one object.
const DefaultInterval = time.Minute

// MinThreshold is the smallest move of a pool's available bytes that is
// written (see the package doc).
const MinThreshold int64 = 16 << 20

// thresholdDivisor makes the other bound of the threshold: 1% of the
// pool's filesystem capacity.
const thresholdDivisor = 100

// retryBase is the first wait after a failed refresh; it doubles after each
// failure, up to the Interval.
const retryBase = time.Second

// queueKey is the one key of the queue: a refresh covers every object of
// the node.
const queueKey = "refresh"

// TriggerDelay is how long after a Trigger its refresh comes: the triggers
// of a burst of volumes are one refresh, so that they ask the manager at
// most once per TriggerDelay.
const TriggerDelay = 5 * time.Second

// Manager is what a Publisher needs of its node's manager (*managerapi.Client).
type Manager interface {
	// Host describes the host and its pools, with their available bytes.
	Host(ctx context.Context) (*managerapi.Host, error)
}

var _ Manager = &managerapi.Client{}

// Config holds what a Publisher depends on.
type Config struct {
	// ProvisionerNames are the provisioner names: a PersistentVolume of one
	// of them, on Node or multihost, triggers a refresh when it comes, goes
	// or is resized.
	ProvisionerNames hostpathv1.ProvisionerNames
	// Node is the node whose capacity is published.
	Node string
	// Namespace holds the objects (the provisioner's).
	Namespace string
	// FieldManager is the field manager of the creates and updates.
	FieldManager string
	// Client writes the objects.
	Client kubernetes.Interface
	// Classes reads StorageClasses from the shared cache.
	Classes storagelisters.StorageClassLister
	// Nodes reads Nodes from the shared cache: Node's labels and UID.
	Nodes corelisters.NodeLister
	// Capacities reads the objects of Node in Namespace from a cache of
	// those that Selector(Node) selects.
	Capacities storagelisters.CSIStorageCapacityLister
	// Synced are the caches to wait for before the first refresh.
	Synced []cache.InformerSynced
	// Managers returns the manager of a node (only Node is asked for).
	Managers func(node string) (Manager, error)
	// Interval is the time between refreshes and the shortest time between
	// two writes of one object; 0 turns publishing off (see Run).
	Interval time.Duration
	// Clock tells the time and drives the queue's delays (the real clock
	// when nil).
	Clock clock.WithTicker
}

// Publisher keeps the CSIStorageCapacity objects of one node (see the
// package doc).
type Publisher struct {
	cfg      Config
	selector labels.Selector
	queue    workqueue.TypedRateLimitingInterface[string]
	// written holds when this process last created or updated each object,
	// by name. Only the queue's one worker uses it.
	written map[string]time.Time
	// notify is what the event handlers call: Trigger (tests count the
	// calls instead).
	notify func()
}

// New returns the Publisher of cfg.Node, with the real clock when
// cfg.Clock is nil. Run must be called, if only to stop its queue.
func New(cfg Config) *Publisher {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, max(cfg.Interval, retryBase))
	p := &Publisher{
		cfg:      cfg,
		selector: Selector(cfg.Node),
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Clock: cfg.Clock}),
		written:  map[string]time.Time{},
	}
	p.notify = p.Trigger
	return p
}

// Trigger asks for a refresh TriggerDelay from now. Calls that come before
// it are the same refresh; the writes stay bounded by the Interval.
func (p *Publisher) Trigger() { p.queue.AddAfter(queueKey, TriggerDelay) }

// Run publishes until ctx is done and returns nil then, even while it
// waits for the caches. With Interval 0 it deletes this node's objects
// instead and returns: the error says which deletions failed.
func (p *Publisher) Run(ctx context.Context) error {
	defer p.queue.ShutDown()
	logger := klog.FromContext(ctx)
	if p.cfg.Interval <= 0 {
		return p.withdraw(ctx)
	}
	logger.Info("Starting the capacity publisher", "interval", p.cfg.Interval, "namespace", p.cfg.Namespace,
		"provisioner", hostpathv1.CapacityProvisionerName)
	if !cache.WaitForCacheSync(ctx.Done(), p.cfg.Synced...) {
		logger.Info("Stopped the capacity publisher before the caches synced")
		return nil
	}
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	p.queue.Add(queueKey)
	for p.processNext(ctx) {
	}
	logger.Info("Stopped the capacity publisher")
	return nil
}

// processNext does one refresh, and queues the next: after the Interval,
// sooner for a write the Interval held back, and with backoff after a
// failure. It returns false once the queue is shut down or ctx is done.
func (p *Publisher) processNext(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit || ctx.Err() != nil {
		return false
	}
	defer p.queue.Done(key)
	again, err := p.sync(ctx)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to publish the storage capacity of the node")
		p.queue.AddRateLimited(key)
	} else {
		p.queue.Forget(key)
	}
	if again > 0 {
		p.queue.AddAfter(key, again)
	}
	p.queue.AddAfter(key, p.cfg.Interval)
	return true
}
