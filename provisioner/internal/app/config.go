package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller/metrics"

	"hostpath.dev/api/generated/clientset/versioned"
	"hostpath.dev/api/generated/informers/externalversions"
	hdinformers "hostpath.dev/api/generated/informers/externalversions/hostpath/v1"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/provisioner/internal/app/cachetrim"
	"hostpath.dev/provisioner/internal/capacity"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/managers"
	"hostpath.dev/provisioner/internal/nodes"
	"hostpath.dev/provisioner/internal/podstub"
	"hostpath.dev/provisioner/internal/provisioner"
	"hostpath.dev/provisioner/internal/relabel"
	"hostpath.dev/provisioner/internal/responsibility"
	"hostpath.dev/provisioner/internal/usage"
)

// userAgent identifies the provisioner to the API server.
const userAgent = "hostpath-provisioner"

// Config is what the provisioner runs with: the Options and everything
// Complete built from them. Nothing in it runs before Config.Run.
type Config struct {
	Options
	// Kube is the API client. Its events go through a client with rate
	// limits of their own (EventQPS, EventBurst; see eventsApart).
	Kube kubernetes.Interface
	// HostDefiner is the API client of the host definer's HostDefinitions
	// (same configuration as Kube).
	HostDefiner versioned.Interface
	// ClaimPolicy says whether the claims carry the watch label, as the
	// instance found at start.
	ClaimPolicy ClaimPolicy
	// Informers are the shared informers, not started yet.
	Informers *Informers
	// Instances are this instance's peers, for leaderless elections.
	Instances *responsibility.PodInstances
	// Resolver finds the manager of a node.
	Resolver *managers.Resolver
	// Broadcaster sends the events of Recorder to the API server once Run
	// starts it.
	Broadcaster record.EventBroadcaster
	// Recorder emits the provisioner's events, from this node's instance.
	Recorder record.EventRecorder
	// Metrics are the library's metrics, served from Registry.
	Metrics metrics.Metrics
	// FanoutMetrics are those of multihost fan-outs, served from Registry.
	FanoutMetrics *fanout.Metrics
	// UsageMetrics are the usage of the node's volumes, served from
	// Registry.
	UsageMetrics *usage.Metrics
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// MetricsGuard lets only callers allowed get on /metrics (and on the
	// profiles) through: review.MetricsGuard.
	MetricsGuard func(http.Handler) http.Handler
}

// Complete builds the Config of valid Options: it parses the selectors and
// makes the API clients, the informers, the manager resolver, the event
// recorder and the metrics registry.
func (o *Options) Complete(ctx context.Context) (*Config, error) {
	if _, err := labels.Parse(o.InstanceSelector); err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagInstanceSelector, err)
	}
	restConfig, err := component.RESTConfig(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, userAgent)
	if err != nil {
		return nil, err
	}
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("create the API client: %w", err)
	}
	events, err := eventClient(restConfig, o.EventQPS, o.EventBurst)
	if err != nil {
		return nil, err
	}
	kube := eventsApart{Interface: clientset, events: events}
	definer, err := versioned.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("create the HostDefinition API client: %w", err)
	}
	policy, err := findClaimPolicy(ctx, clientset)
	if err != nil {
		// Safe either way: every claim is watched, as before the label.
		klog.FromContext(ctx).Error(err, "Cannot tell whether the claims carry the watch label; watching every claim")
	}
	c := &Config{Options: *o, Kube: kube, HostDefiner: definer, ClaimPolicy: policy, Informers: o.newInformers(kube, definer, policy.Active)}
	c.Instances = c.Informers.Instances
	if c.Resolver, err = o.newResolver(c.Informers); err != nil {
		return nil, err
	}
	c.Broadcaster = record.NewBroadcaster(record.WithContext(ctx))
	c.Recorder = c.Broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: o.ProvisionerName, Host: o.NodeName})
	c.Metrics = metrics.New("controller")
	c.FanoutMetrics = fanout.NewMetrics()
	c.UsageMetrics = usage.NewMetrics()
	var reviewMetrics []prometheus.Collector
	c.MetricsGuard, reviewMetrics = review.MetricsGuard(clientset.AuthenticationV1().TokenReviews(), clientset.AuthorizationV1().SubjectAccessReviews(), o.Namespace, "hostpath-provisioner")
	c.Registry = newRegistry(c.Metrics, c.FanoutMetrics, c.UsageMetrics, reviewMetrics...)
	return c, nil
}

// eventsApart is a clientset whose events go through a client of their own.
// On the client of the volumes, the events would take most of its tokens in
// a burst of claims (the library records two per volume provisioned, this
// program one per volume deleted), and the volumes would wait behind them.
// The separation is in the clientset because the library builds its event
// broadcaster on the clientset it is given, with no option for another.
type eventsApart struct {
	kubernetes.Interface
	events typedcorev1.EventsGetter
}

// CoreV1 is the core group's client, but for events.
func (c eventsApart) CoreV1() typedcorev1.CoreV1Interface {
	return coreEventsApart{CoreV1Interface: c.Interface.CoreV1(), events: c.events}
}

// coreEventsApart is the core group's client of eventsApart.
type coreEventsApart struct {
	typedcorev1.CoreV1Interface
	events typedcorev1.EventsGetter
}

// Events is the events' own client, which drops the library's Normal
// Provisioning events (droppedEvents).
func (c coreEventsApart) Events(namespace string) typedcorev1.EventInterface {
	return droppedEvents{EventInterface: c.events.Events(namespace)}
}

// droppedReason is the reason of the Normal event that the library records
// on a claim each time it calls Provision ("External provisioner is
// provisioning volume for claim ..."): one API write per volume that tells
// a user nothing ProvisioningSucceeded or a Warning does not. The
// provisioner's log has it at --v=3 (the library's broadcaster logs every
// event, libraryEventsLevel).
const droppedReason = "Provisioning"

// droppedEvents is an event client that sends no Normal droppedReason
// event: the library's broadcaster, which has no option to filter its
// events, writes them through it (Create for a new one, Patch for a
// repeat).
type droppedEvents struct {
	typedcorev1.EventInterface
}

func dropped(e *v1.Event) bool { return e.Type == v1.EventTypeNormal && e.Reason == droppedReason }

// CreateWithEventNamespace creates e unless it is dropped.
func (d droppedEvents) CreateWithEventNamespace(e *v1.Event) (*v1.Event, error) {
	return d.CreateWithEventNamespaceWithContext(context.Background(), e)
}

// CreateWithEventNamespaceWithContext creates e unless it is dropped.
func (d droppedEvents) CreateWithEventNamespaceWithContext(ctx context.Context, e *v1.Event) (*v1.Event, error) {
	if dropped(e) {
		return e, nil
	}
	return d.EventInterface.CreateWithEventNamespaceWithContext(ctx, e)
}

// PatchWithEventNamespace patches e unless it is dropped.
func (d droppedEvents) PatchWithEventNamespace(e *v1.Event, data []byte) (*v1.Event, error) {
	return d.PatchWithEventNamespaceWithContext(context.Background(), e, data)
}

// PatchWithEventNamespaceWithContext patches e unless it is dropped.
func (d droppedEvents) PatchWithEventNamespaceWithContext(ctx context.Context, e *v1.Event, data []byte) (*v1.Event, error) {
	if dropped(e) {
		return e, nil
	}
	return d.EventInterface.PatchWithEventNamespaceWithContext(ctx, e, data)
}

// eventClient returns the client of the events (see eventsApart): cfg's API
// server with rate limits of its own.
func eventClient(cfg *rest.Config, qps float32, burst int) (*typedcorev1.CoreV1Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = qps, burst, nil
	c, err := typedcorev1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create the API client of events: %w", err)
	}
	return c, nil
}

// Informers are the shared informers of one instance: cluster-wide caches,
// shared with the library (so it starts none of its own), the cache of
// this instance's own Node, one pod cache per namespace of peers and of
// managers, the host definer's HostDefinitions, the CA bundle of the
// managers' certificates, and this node's CSIStorageCapacity objects.
// Every factory trims what it caches with the transform of package
// cachetrim (whose package doc says what each cache holds), and the claims
// and PVs of other provisioners are not cached at all (cachetrim.Keep).
// No instance watches every Node: the others are looked up on demand
// (package nodes).
type Informers struct {
	// Claims and Volumes are those of the cluster that cachetrim.Keep
	// accepts; Classes are cluster-wide.
	Claims  coreinformers.PersistentVolumeClaimInformer
	Volumes coreinformers.PersistentVolumeInformer
	Classes storageinformers.StorageClassInformer
	// OwnNode is the cache of this instance's Node alone (by field
	// selector).
	OwnNode coreinformers.NodeInformer
	// Nodes answers for every Node: this instance's from OwnNode, an
	// instance's node from PeerPods, another from the API server, kept
	// for a while.
	Nodes *nodes.Lookup
	// PeerPods are the provisioner pods, and Instances the instances they
	// are, by node. Both pod informers cache podstub.Pods, not *v1.Pods
	// (the transform of package cachetrim), so they have no typed lister:
	// podstub.Lister and podstub.Of read them.
	PeerPods  cache.SharedIndexInformer
	Instances *responsibility.PodInstances
	// ManagerPods are the manager pods; nil with a fixed manager URL.
	ManagerPods cache.SharedIndexInformer
	// Definitions are the HostDefinitions (cluster-scoped), which say
	// the nodes of each pool's multihost volumes; nil with a fixed manager
	// URL, which serves no multihost volume.
	Definitions hdinformers.HostDefinitionInformer
	// CABundle is what the managers' certificates are verified with, kept
	// from the ConfigMap managerapi.CABundleConfigMap of the managers'
	// namespace once started (trust.Watch); nil with a fixed manager URL.
	CABundle *trust.Bundle
	// Capacities are the CSIStorageCapacity objects of this node
	// (capacity.Selector) in the instance's namespace; nil when publishing
	// is off. Only the capacity publisher waits for this cache: without
	// it (its permissions missing, say) the rest of the instance runs.
	Capacities storageinformers.CSIStorageCapacityInformer

	factories []factory
	synced    []cache.InformerSynced
	// watches start the informers that are not in a factory.
	watches []func(context.Context) (cache.InformerSynced, error)
}

// factory is what Informers needs of an informer factory, Kubernetes' or
// the host definer's.
type factory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// newInformers makes the informers of the Options and registers every one
// of them with its factory, so that starting the factories starts them all;
// labelledClaims says
// that the claims carry the watch label (ClaimPolicy.Active). PVs are
// watched by the watch label always: the provisioner labels its own
// (package relabel labels the older ones before the first list).
func (o *Options) newInformers(kube kubernetes.Interface, definer versioned.Interface, labelledClaims bool) *Informers {
	names := hostpathv1.NewProvisionerNames(o.ProvisionerName)
	trim := cachetrim.New(names)
	peers := podFactory(kube, o.ResyncPeriod, o.Namespace, o.InstanceSelector, trim)
	i := &Informers{PeerPods: peers.Core().V1().Pods().Informer()}
	i.Instances = responsibility.NewPodInstances(podstub.NewLister(i.PeerPods.GetIndexer(), o.Namespace), o.NodeName)
	cluster := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, informers.WithTransform(trim))
	// The claim and PV informers cache only what cachetrim.Keep accepts.
	cachetrim.Register(cluster, o.scope(kube, names, i, cluster, labelledClaims))
	own := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, o.NodeName).String()
		}),
		informers.WithTransform(trim))
	i.Claims, i.Volumes = cluster.Core().V1().PersistentVolumeClaims(), cluster.Core().V1().PersistentVolumes()
	i.Classes, i.OwnNode = cluster.Storage().V1().StorageClasses(), own.Core().V1().Nodes()
	i.Nodes = nodes.New(nodes.Config{Node: o.NodeName, Own: i.OwnNode.Lister(), API: kube.CoreV1(), Peers: i.Instances, Transform: trim})
	i.factories = []factory{cluster, own, peers}
	i.synced = []cache.InformerSynced{i.Claims.Informer().HasSynced, i.Volumes.Informer().HasSynced,
		i.Classes.Informer().HasSynced, i.OwnNode.Informer().HasSynced, i.PeerPods.HasSynced}
	if o.ManagerURL == "" {
		managerFactory := podFactory(kube, o.ResyncPeriod, o.ManagerNamespace, o.ManagerSelector, trim)
		i.ManagerPods = managerFactory.Core().V1().Pods().Informer()
		i.factories = append(i.factories, managerFactory)
		i.synced = append(i.synced, i.ManagerPods.HasSynced)
		definitions := externalversions.NewSharedInformerFactoryWithOptions(definer, o.ResyncPeriod, externalversions.WithTransform(trim))
		i.Definitions = definitions.Hostpath().V1().HostDefinitions()
		i.factories = append(i.factories, definitions)
		i.synced = append(i.synced, i.Definitions.Informer().HasSynced)
		i.CABundle = trust.NewBundle()
		i.watches = append(i.watches, func(ctx context.Context) (cache.InformerSynced, error) {
			return trust.Watch(ctx, kube, o.ManagerNamespace, i.CABundle)
		})
	}
	if o.CapacityInterval > 0 {
		capacities := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod,
			informers.WithNamespace(o.Namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = capacity.Selector(o.NodeName).String() }),
			informers.WithTransform(trim))
		i.Capacities = capacities.Storage().V1().CSIStorageCapacities()
		// Registered with the factory now, so that starting it starts it.
		i.Capacities.Informer()
		i.factories = append(i.factories, capacities)
	}
	return i
}

// scope is what the instance asks the API server for (cachetrim.Scope):
// the PVs by the watch label, after the upgrade step that labels the older
// ones of its node (relabel.Volumes); the claims by the watch label too
// when labelledClaims, after labelling those made before the policy was
// bound (relabel.Claims), else every claim.
func (o *Options) scope(kube kubernetes.Interface, names hostpathv1.ProvisionerNames, i *Informers, cluster informers.SharedInformerFactory, labelledClaims bool) cachetrim.Scope {
	cfg := relabel.Config{Client: kube, Names: names, Node: o.NodeName, Instances: i.Instances, FieldManager: provisioner.FieldManager}
	s := cachetrim.Scope{Names: names, Node: o.NodeName, Instances: i.Instances, InstancesSynced: i.PeerPods.HasSynced,
		Volumes: hostpathv1.WatchSelector(o.NodeName),
		BeforeVolumes: func(ctx context.Context) error {
			_, err := relabel.Volumes(ctx, cfg)
			return err
		}}
	if labelledClaims {
		classes := cluster.Storage().V1().StorageClasses().Lister()
		s.Claims = hostpathv1.WatchSelector(o.NodeName)
		s.BeforeClaims = func(ctx context.Context) error {
			_, err := relabel.Claims(ctx, relabel.ClaimConfig{Config: cfg, Classes: classes})
			return err
		}
	}
	return s
}

// podFactory returns an informer factory for the pods in namespace that match
// selector, trimmed by trim.
func podFactory(kube kubernetes.Interface, resync time.Duration, namespace, selector string, trim cache.TransformFunc) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(kube, resync,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(trim))
}

// start starts the informers until ctx is done and waits for their caches
// (the CA bundle's: until the ConfigMap, if it exists, is loaded). stop
// stops them and waits for the factories' to end; call it also after an
// error.
func (i *Informers) start(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	for _, f := range i.factories {
		f.Start(ctx.Done())
	}
	stop = func() {
		cancel()
		for _, f := range i.factories {
			f.Shutdown()
		}
	}
	synced := slices.Clip(i.synced)
	for _, watch := range i.watches {
		s, err := watch(ctx)
		if err != nil {
			return stop, err
		}
		synced = append(synced, s)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return stop, fmt.Errorf("wait for informer caches: %w", context.Cause(ctx))
	}
	return stop, nil
}

// newResolver returns the manager resolver: the fixed --manager-url
// (verified with --manager-ca-file when https), or the Ready manager pod of
// a node from the manager pod cache, verified with the CA bundle, and the
// targets of a pool from the HostDefinition cache.
func (o *Options) newResolver(inf *Informers) (*managers.Resolver, error) {
	opts := managerapi.CallerOptions(o.ManagerTokenFile, o.ManagerTimeout, o.ManagerDeleteTimeout)
	if o.ManagerURL != "" {
		if isHTTPS(o.ManagerURL) {
			bundle, err := trust.LoadFile(o.ManagerCAFile)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", FlagManagerCAFile, err)
			}
			name := o.ManagerServerName
			if name == "" {
				name = managerapi.ServerName(o.NodeName)
			}
			opts = append(opts, managerapi.WithServerTLS(bundle.Pool, name))
		}
		return managers.NewStaticResolver(o.ManagerURL, opts...)
	}
	selector, err := labels.Parse(o.ManagerSelector)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagManagerSelector, err)
	}
	return managers.NewResolver(inf.ManagerPods.GetIndexer(), inf.Definitions.Informer().GetIndexer(), selector, o.ManagerPort, inf.CABundle.Pool, opts...)
}

// newRegistry returns the registry /metrics serves: the Go and process
// collectors, the library's provisioning and deletion metrics, those of
// multihost fan-outs, the usage of the node's volumes and the extra ones
// (the metrics guard's reviews).
func newRegistry(m metrics.Metrics, f *fanout.Metrics, u *usage.Metrics, extra ...prometheus.Collector) *prometheus.Registry {
	return component.NewRegistry(append(append(append(f.Collectors(), u.Collectors()...), extra...),
		m.PersistentVolumeClaimProvisionTotal,
		m.PersistentVolumeClaimProvisionFailedTotal,
		m.PersistentVolumeClaimProvisionDurationSeconds,
		m.PersistentVolumeDeleteTotal,
		m.PersistentVolumeDeleteFailedTotal,
		m.PersistentVolumeDeleteDurationSeconds,
	)...)
}
