package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/profiling"
	"hostpath.dev/provisioner/internal/capacity"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/managers"
	"hostpath.dev/provisioner/internal/podstub"
	"hostpath.dev/provisioner/internal/provisioner"
	"hostpath.dev/provisioner/internal/reclaim"
	"hostpath.dev/provisioner/internal/resize"
	"hostpath.dev/provisioner/internal/usage"
)

// Run runs the provisioner until ctx is done: Complete, then Config.Run.
// The Options must be valid.
func (o *Options) Run(ctx context.Context) error {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("node", o.NodeName))
	c, err := o.Complete(ctx)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// parts are the pieces of one instance, wired together.
type parts struct {
	prov      *provisioner.Provisioner
	claims    *provisioner.ClaimSync
	reclaimer *reclaim.Controller
	resizer   *resize.Controller
	sweeper   *reclaim.Sweeper
	refresher *usage.Refresher
	publisher *capacity.Publisher
	ctrl      *controller.ProvisionController
}

// Run wires the parts of the provisioner, serves /healthz, /readyz (ready
// once the caches synced) and /metrics, starts the informers, and runs the
// parts until ctx is done.
func (c *Config) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	logger := klog.FromContext(ctx)
	p := c.wire(ctx)
	// Registered before the informers start, like the other handlers.
	if err := c.onManagerReady(p); err != nil {
		return err
	}
	if err := c.onInstancesMoved(p); err != nil {
		return err
	}
	if err := c.watchCapacity(p); err != nil {
		return err
	}
	if err := watchClaimPolicy(ctx, c.Kube, c.ClaimPolicy, func() { cancel(errClaimPolicyChanged) }); err != nil {
		return err
	}
	var ready atomic.Bool
	if err := component.ServeHealth(ctx, component.Health{
		Address: c.MetricsAddress, Registry: c.Registry, Ready: &ready, Guard: c.MetricsGuard, Extra: profiling.HandlersIf(c.Profiling),
	}); err != nil {
		return err
	}
	c.Broadcaster.StartStructuredLogging(3)
	c.Broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	defer c.Broadcaster.Shutdown()
	stop, err := c.Informers.start(ctx)
	defer stop()
	if err != nil {
		return err
	}
	ready.Store(true)
	go runUntilDone(ctx, "claim sync", func(ctx context.Context) error { return p.claims.Run(ctx, c.Workers) })
	go runUntilDone(ctx, "reclaim controller", func(ctx context.Context) error { return p.reclaimer.Run(ctx, c.Workers) })
	go runUntilDone(ctx, "resize controller", func(ctx context.Context) error { return p.resizer.Run(ctx, c.Workers) })
	if c.OrphanSweepPeriod > 0 {
		go runUntilDone(ctx, "orphan sweeper", p.sweeper.Run)
	}
	if c.UsageInterval > 0 {
		go runUntilDone(ctx, "usage refresher", p.refresher.Run)
	}
	// With --capacity-interval=0 it deletes this node's objects and ends.
	go runUntilDone(ctx, "capacity publisher", p.publisher.Run)
	go adoptAll(ctx, p.prov)
	logger.Info("Starting the provisioner", "provisioner", c.ProvisionerName, "workers", c.Workers)
	p.ctrl.Run(ctx)
	logger.Info("Stopped the provisioner")
	if cause := context.Cause(ctx); errors.Is(cause, errClaimPolicyChanged) {
		return cause
	}
	return nil
}

// onManagerReady acts whenever a manager pod becomes Ready: on this node,
// it asks the sweeper for a sweep, so that the orphans left while the
// manager was away go at once rather than at the next period (the
// multihost directories the node lacks are the host definer's to make);
// on any node, it queues the PVs that wait for a manager in the reclaim
// controller, so they do not wait for their backoff too.
func (c *Config) onManagerReady(p *parts) error {
	if c.Informers.ManagerPods == nil {
		return nil
	}
	ready := func(obj any) {
		pod, ok := podstub.Of(obj)
		if !ok {
			return
		}
		if pod.NodeName == c.NodeName && c.OrphanSweepPeriod > 0 {
			p.sweeper.Trigger()
		}
		p.reclaimer.ManagerReady(pod.NodeName)
	}
	serving := func(obj any) bool {
		pod, ok := podstub.Of(obj)
		return ok && pod.Serving()
	}
	_, err := c.Informers.ManagerPods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if serving(obj) {
				ready(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			if serving(obj) && !serving(old) {
				ready(obj)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch the manager pods: %w", err)
	}
	return nil
}

// onInstancesMoved tells the reclaim controller of the instances that come
// to a node and leave one, from the peer cache: no instance watches every
// Node (package nodes), and an instance's pod is deleted with its Node
// (by kube-controller-manager's pod garbage collector, or by the
// DaemonSet controller while the pod was not scheduled yet) and made when
// a Node comes. The node of a pod not scheduled yet is the one its
// DaemonSet's node affinity names.
func (c *Config) onInstancesMoved(p *parts) error {
	_, err := c.Informers.PeerPods.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// The pods of the first list are no news: the reclaim controller
		// looks at every cached PV when its caches sync.
		AddFunc: func(obj any, initial bool) {
			if node := podNode(obj); node != "" && !initial {
				p.reclaimer.NodeJoined(node)
			}
		},
		DeleteFunc: func(obj any) {
			if node := podNode(obj); node != "" {
				p.reclaimer.NodeLeft(node)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch the provisioner pods: %w", err)
	}
	return nil
}

// podNode returns the node of a pod of a DaemonSet (a tombstone's too):
// the one it is scheduled to, else the one its node affinity requires by
// name, as the DaemonSet controller sets it (podstub.Pod.Node).
func podNode(obj any) string {
	if pod, ok := podstub.Of(obj); ok {
		return pod.Node()
	}
	return ""
}

// watchCapacity registers the capacity publisher's event handlers, unless
// publishing is off.
func (c *Config) watchCapacity(p *parts) error {
	inf := c.Informers
	if inf.Capacities == nil {
		return nil
	}
	return p.publisher.AddEventHandlers(capacity.Sources{
		Classes: inf.Classes.Informer(), Nodes: inf.OwnNode.Informer(), Volumes: inf.Volumes.Informer(), Capacities: inf.Capacities.Informer(),
	})
}

// wire makes the parts of the instance and registers their event handlers
// with the informers, which must not have started yet. The library's
// controller logs with ctx's logger, and its event broadcaster stops when
// ctx is done.
func (c *Config) wire(ctx context.Context) *parts {
	inf := c.Informers
	names := hostpathv1.NewProvisionerNames(c.ProvisionerName)
	volumeManagers := managersAs(c.Resolver, func(m *managerapi.Client) provisioner.VolumeManager { return m })
	reclaimManagers := managersAs(c.Resolver, func(m *managerapi.Client) reclaim.Manager { return m })
	p := &parts{}
	p.reclaimer = reclaim.NewController(reclaim.Config{
		ProvisionerNames: names, Node: c.NodeName, FieldManager: provisioner.FieldManager,
		Client: c.Kube, Volumes: inf.Volumes, Nodes: inf.Nodes,
		Instances: c.Instances, Managers: reclaimManagers, Targets: c.Resolver, Recorder: c.Recorder,
		Fanout:        fanout.Options{Workers: c.FanoutWorkers, NodeTimeout: c.ManagerDeleteTimeout, Attempts: c.FanoutAttempts},
		FanoutMetrics: c.FanoutMetrics,
		NodeGoneGrace: c.NodeGoneGracePeriod, NodeGoneScan: c.NodeGoneScanPeriod,
	})
	p.prov = provisioner.New(provisioner.Config{
		Names: names, Node: c.NodeName, Client: c.Kube,
		Classes: inf.Classes.Lister(), Nodes: inf.Nodes, Volumes: inf.Volumes.Lister(), Claims: inf.Claims.Lister(),
		Instances: c.Instances, Managers: volumeManagers, Targets: c.Resolver,
		CreateFanout:  fanout.Options{Workers: c.FanoutWorkers, NodeTimeout: c.FanoutNodeTimeout, Attempts: c.FanoutAttempts},
		Reclaim:       p.reclaimer.Reclaim,
		FanoutMetrics: c.FanoutMetrics, Recorder: c.Recorder,
	})
	p.claims = provisioner.NewClaimSync(p.prov, inf.Claims, c.Recorder)
	p.resizer = resize.NewController(resize.Config{
		ProvisionerNames: names, Node: c.NodeName, FieldManager: provisioner.FieldManager,
		Client: c.Kube, Claims: inf.Claims, Volumes: inf.Volumes, Classes: inf.Classes,
		Instances: c.Instances, Managers: managersAs(c.Resolver, func(m *managerapi.Client) resize.Manager { return m }),
		Fanout:   fanout.Options{Workers: c.FanoutWorkers, NodeTimeout: c.FanoutNodeTimeout, Attempts: c.FanoutAttempts},
		Recorder: c.Recorder,
	})
	p.sweeper = reclaim.NewSweeper(reclaim.SweeperConfig{
		ProvisionerNames: names, Node: c.NodeName,
		Client: c.Kube, Volumes: inf.Volumes, Managers: reclaimManagers, Recorder: c.Recorder,
		Period: c.OrphanSweepPeriod, Grace: c.OrphanGracePeriod,
	})
	p.refresher = usage.New(usage.Config{
		ProvisionerNames: names, Node: c.NodeName, FieldManager: provisioner.FieldManager,
		Client: c.Kube, Volumes: inf.Volumes.Lister(), Synced: []cache.InformerSynced{inf.Volumes.Informer().HasSynced},
		Managers: managersAs(c.Resolver, func(m *managerapi.Client) usage.Manager { return m }),
		Interval: c.UsageInterval, WarningThreshold: c.UsageWarningThreshold,
		Recorder: c.Recorder, Metrics: c.UsageMetrics,
	})
	p.publisher = c.newPublisher(names)
	p.ctrl = controller.NewProvisionController(libraryContext(ctx), c.Kube, names.Name(), p.prov,
		// The claims of classes of hostpathv1.CapacityProvisionerName too.
		controller.AdditionalProvisionerNames(names.Additional()),
		controller.LeaderElection(false),
		controller.Threadiness(c.Workers),
		controller.ResyncPeriod(c.ResyncPeriod),
		controller.ClaimsInformer(inf.Claims.Informer()),
		controller.VolumesInformer(inf.Volumes.Informer()),
		controller.ClassesInformer(inf.Classes.Informer()),
		controller.MetricsInstance(c.Metrics),
		// Keep trying to save a PV rather than deleting a directory that
		// was created.
		controller.CreateProvisionedPVLimiter(workqueue.DefaultTypedControllerRateLimiter[string]()),
	)
	return p
}

// libraryEventsLevel is how many levels deeper than this program's own the
// library logs with the logger of the context NewProvisionController is
// given: that of its event broadcaster, which logs every event it records
// at V(0) (client-go's StartStructuredLogging(0); the library has no option
// for another level). That is a log line for each volume provisioned and
// each Provisioning event, which says what the claim's events say, and in a
// burst of claims a load on the node's container runtime, which copies each
// line into the pod's log. Three levels deeper, the library's events are
// logged at V(3), as this program's own broadcaster logs its own (Run).
const libraryEventsLevel = 3

// libraryContext is ctx for NewProvisionController: its logger logs
// libraryEventsLevel levels deeper (errors are logged at any verbosity).
// The library's workers log with the context of Run, at their own levels.
func libraryContext(ctx context.Context) context.Context {
	return klog.NewContext(ctx, klog.FromContext(ctx).V(libraryEventsLevel))
}

// newPublisher returns the capacity publisher of this node, with the cache
// of its objects unless publishing is off.
func (c *Config) newPublisher(names hostpathv1.ProvisionerNames) *capacity.Publisher {
	inf := c.Informers
	cfg := capacity.Config{
		ProvisionerNames: names, Node: c.NodeName, Namespace: c.Namespace, FieldManager: provisioner.FieldManager,
		Client: c.Kube, Classes: inf.Classes.Lister(), Nodes: inf.OwnNode.Lister(),
		Managers: managersAs(c.Resolver, func(m *managerapi.Client) capacity.Manager { return m }),
		Interval: c.CapacityInterval,
	}
	if inf.Capacities != nil {
		cfg.Capacities = inf.Capacities.Lister()
		// Not the PV cache: the publisher takes only PV events, as triggers.
		cfg.Synced = []cache.InformerSynced{inf.Classes.Informer().HasSynced, inf.OwnNode.Informer().HasSynced,
			inf.Capacities.Informer().HasSynced}
	}
	return capacity.New(cfg)
}

// managersAs adapts the resolver to the interface M that a part declares
// for a manager; as converts the client to M, so the compiler checks that
// it implements M.
func managersAs[M any](r *managers.Resolver, as func(*managerapi.Client) M) func(node string) (M, error) {
	return func(node string) (M, error) {
		c, err := r.ForNode(node)
		if err != nil {
			var none M
			return none, err
		}
		return as(c), nil
	}
}

// runUntilDone runs a part of the provisioner and reports its failure once.
func runUntilDone(ctx context.Context, what string, run func(context.Context) error) {
	if err := run(ctx); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Stopped early", "part", what)
	}
}

// adoptAll gives the directories of this node's PVs made before owner
// records existed their owner (upgrade), retrying with backoff while
// managers are unreachable; what stays wrong (two PVs naming one directory)
// is reported once the retries are spent.
func adoptAll(ctx context.Context, prov *provisioner.Provisioner) {
	var last error
	backoff := wait.Backoff{Duration: 2 * time.Second, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 5 * time.Minute}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = prov.AdoptAll(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		utilruntime.HandleErrorWithContext(ctx, last, "Failed to adopt the directories of existing volumes")
		return
	}
	klog.FromContext(ctx).V(2).Info("Adopted the directories of existing volumes")
}
