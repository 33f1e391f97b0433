package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller/metrics"

	"hostpath.dev/provisioner/internal/managers"
	"hostpath.dev/provisioner/internal/ownership"
	"hostpath.dev/provisioner/internal/provisioner"
	"hostpath.dev/provisioner/internal/reclaim"
)

// userAgent identifies the provisioner to the API server.
const userAgent = "hostpath-provisioner"

// Run runs the provisioner until ctx is done. Options must be valid.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", o.NodeName)
	ctx = klog.NewContext(ctx, logger)

	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create Kubernetes client: %w", err)
	}

	// Cluster-wide caches, shared with the library (so it starts none of
	// its own), and one pod cache per namespace of peers and managers.
	factory := informers.NewSharedInformerFactory(kube, o.ResyncPeriod)
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	classes := factory.Storage().V1().StorageClasses()
	nodes := factory.Core().V1().Nodes()

	instanceSelector, _ := labels.Parse(o.InstanceSelector)
	peerFactory := podFactory(kube, o.ResyncPeriod, o.Namespace, o.InstanceSelector)
	peerPods := peerFactory.Core().V1().Pods()
	instances := ownership.NewInstances(peerPods.Lister().Pods(o.Namespace), instanceSelector, o.NodeName)
	synced := []cache.InformerSynced{claims.Informer().HasSynced, volumes.Informer().HasSynced,
		classes.Informer().HasSynced, nodes.Informer().HasSynced, peerPods.Informer().HasSynced}

	tokenOpts := managers.ClientOptions(o.ManagerTokenFile, o.ManagerTimeout, o.ManagerDeleteTimeout)
	var resolver *managers.Resolver
	var managerFactory informers.SharedInformerFactory
	if o.ManagerURL != "" {
		if resolver, err = managers.NewStaticResolver(o.ManagerURL, tokenOpts...); err != nil {
			return err
		}
	} else {
		managerSelector, _ := labels.Parse(o.ManagerSelector)
		managerFactory = podFactory(kube, o.ResyncPeriod, o.ManagerNamespace, o.ManagerSelector)
		managerPods := managerFactory.Core().V1().Pods()
		resolver = managers.NewResolver(managerPods.Lister().Pods(o.ManagerNamespace), managerSelector, o.ManagerPort, tokenOpts...)
		synced = append(synced, managerPods.Informer().HasSynced)
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: o.ProvisionerName, Host: o.NodeName})

	prov := provisioner.New(provisioner.Config{
		Name:      o.ProvisionerName,
		Node:      o.NodeName,
		Client:    kube,
		Classes:   classes.Lister(),
		Nodes:     nodes.Lister(),
		Volumes:   volumes.Lister(),
		Instances: instances,
		Managers: func(node string) (provisioner.VolumeManager, error) {
			c, err := resolver.ForNode(node)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		Recorder: recorder,
	})
	reclaimManagers := func(node string) (reclaim.Manager, error) {
		c, err := resolver.ForNode(node)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	reclaimer := reclaim.NewController(reclaim.Config{
		ProvisionerName: o.ProvisionerName, Node: o.NodeName, Annotations: reclaimAnnotations,
		FieldManager: provisioner.FieldManager, Client: kube, Volumes: volumes, Nodes: nodes,
		Instances: instances, Managers: reclaimManagers, Recorder: recorder,
	})
	sweeper := reclaim.NewSweeper(reclaim.SweeperConfig{
		ProvisionerName: o.ProvisionerName, Node: o.NodeName, Annotations: reclaimAnnotations,
		Client: kube, Volumes: volumes, Managers: reclaimManagers, Recorder: recorder,
		Period: o.OrphanSweepPeriod, Grace: o.OrphanGracePeriod,
	})
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if claim, ok := obj.(*v1.PersistentVolumeClaim); ok {
				prov.Forget(claim.UID)
			}
		},
	}); err != nil {
		return fmt.Errorf("watch claim deletions: %w", err)
	}

	registry := prometheus.NewRegistry()
	libMetrics := metrics.New("controller")
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		libMetrics.PersistentVolumeClaimProvisionTotal,
		libMetrics.PersistentVolumeClaimProvisionFailedTotal,
		libMetrics.PersistentVolumeClaimProvisionDurationSeconds,
		libMetrics.PersistentVolumeDeleteTotal,
		libMetrics.PersistentVolumeDeleteFailedTotal,
		libMetrics.PersistentVolumeDeleteDurationSeconds,
	)

	ctrl := controller.NewProvisionController(logger, kube, o.ProvisionerName, prov,
		controller.LeaderElection(false),
		controller.Threadiness(o.Workers),
		controller.ResyncPeriod(o.ResyncPeriod),
		controller.ClaimsInformer(claims.Informer()),
		controller.VolumesInformer(volumes.Informer()),
		controller.ClassesInformer(classes.Informer()),
		controller.NodesLister(nodes.Lister()),
		controller.MetricsInstance(libMetrics),
		// Keep trying to save a PV rather than deleting a directory that
		// was created.
		controller.CreateProvisionedPVLimiter(workqueue.DefaultControllerRateLimiter()),
	)

	var ready atomic.Bool
	srv, err := serve(ctx, o.MetricsAddress, registry, &ready)
	if err != nil {
		return err
	}
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()

	factory.Start(ctx.Done())
	peerFactory.Start(ctx.Done())
	if managerFactory != nil {
		managerFactory.Start(ctx.Done())
	}
	defer factory.Shutdown()
	defer peerFactory.Shutdown()
	if managerFactory != nil {
		defer managerFactory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("wait for informer caches: %w", context.Cause(ctx))
	}
	ready.Store(true)
	go runUntilDone(ctx, "reclaim controller", func(ctx context.Context) error { return reclaimer.Run(ctx, o.Workers) })
	if o.OrphanSweepPeriod > 0 {
		go runUntilDone(ctx, "orphan sweeper", sweeper.Run)
	}
	go adoptAll(ctx, prov)
	logger.Info("Starting the provisioner", "provisioner", o.ProvisionerName, "workers", o.Workers)
	ctrl.Run(ctx)
	logger.Info("Stopped the provisioner")
	return nil
}

// reclaimAnnotations are the PV annotations the reclaim package reads.
var reclaimAnnotations = reclaim.Annotations{
	ProvisionedBy: provisioner.AnnProvisionedBy, Node: provisioner.AnnNode, Pool: provisioner.AnnPool,
	Directory: provisioner.AnnDirectory, Mode: provisioner.AnnMode, NodeMode: string(provisioner.ModeNode),
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

// restConfig returns the API client configuration with the QPS and burst.
func (o *Options) restConfig() (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes client configuration: %w", err)
	}
	cfg.QPS = o.KubeAPIQPS
	cfg.Burst = o.KubeAPIBurst
	cfg.UserAgent = userAgent
	return cfg, nil
}

// podFactory returns an informer factory for the pods in namespace that match
// selector.
func podFactory(kube kubernetes.Interface, resync time.Duration, namespace, selector string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(kube, resync,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
}

// serve starts the HTTP server of /healthz, /readyz and /metrics.
func serve(ctx context.Context, address string, registry *prometheus.Registry, ready *atomic.Bool) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", address, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger := klog.FromContext(ctx)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Health and metrics server stopped")
		}
	}()
	logger.Info("Serving health and metrics", "address", ln.Addr().String())
	return srv, nil
}
