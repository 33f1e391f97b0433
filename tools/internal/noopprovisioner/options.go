package noopprovisioner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller/metrics"

	"hostpath.dev/api/runtime/component"
)

// Flag names.
const (
	FlagKubeconfig      = "kubeconfig"
	FlagProvisionerName = "provisioner-name"
	FlagKubeAPIQPS      = "kube-api-qps"
	FlagKubeAPIBurst    = "kube-api-burst"
	FlagWorkers         = "workers"
	FlagResyncPeriod    = "resync-period"
	FlagMetricsAddress  = "metrics-address"
	FlagFinalizer       = "finalizer"
)

// userAgent identifies the no-op provisioner to the API server.
const userAgent = "hostpath-noop-provisioner"

// Options are the no-op provisioner's settings, from flags. The client
// limits and the workers have no default: the benchmark gives the sums over
// the provisioner instances the no-op provisioner stands in for.
type Options struct {
	Kubeconfig      string
	ProvisionerName string
	KubeAPIQPS      float32
	KubeAPIBurst    int
	Workers         int
	ResyncPeriod    time.Duration
	// MetricsAddress, when set, serves /healthz, /readyz (ready once the
	// informer caches synced) and the library's /metrics.
	MetricsAddress string
	// Finalizer runs the library with controller.AddFinalizer(true): its
	// PVs carry LibraryFinalizer, as Kubernetes 1.33 and later expect of a
	// provisioner that honours the reclaim policy (KEP-2644), and it
	// removes the finalizer after deleting a PV. This is the fair floor.
	// Without it, the floor is the old one, which writes PV objects only.
	Finalizer bool
}

var _ component.Program = &Options{}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Kubeconfig:      os.Getenv("KUBECONFIG"),
		ProvisionerName: DefaultProvisionerName,
		ResyncPeriod:    controller.DefaultResyncPeriod,
		Finalizer:       true,
	}
}

// AddFlags binds the options to fs (component.Main adds klog's flags).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, FlagKubeconfig, o.Kubeconfig, "The kubeconfig file to reach the API server with. Defaults to $KUBECONFIG, else the in-cluster configuration.")
	fs.StringVar(&o.ProvisionerName, FlagProvisionerName, o.ProvisionerName, "The provisioner name that StorageClasses name in their provisioner field.")
	fs.Float32Var(&o.KubeAPIQPS, FlagKubeAPIQPS, o.KubeAPIQPS, "The sustained queries per second to the API server; required (the benchmark gives the sum of the provisioner instances').")
	fs.IntVar(&o.KubeAPIBurst, FlagKubeAPIBurst, o.KubeAPIBurst, "The burst of queries to the API server; required (the benchmark gives the sum of the provisioner instances').")
	fs.IntVar(&o.Workers, FlagWorkers, o.Workers, "The number of claim workers and of volume workers, each (the library's threadiness); required (the benchmark gives the sum of the provisioner instances').")
	fs.DurationVar(&o.ResyncPeriod, FlagResyncPeriod, o.ResyncPeriod, "How often every claim and volume is looked at again even when nothing changed; the default is the library's and the provisioner's.")
	fs.StringVar(&o.MetricsAddress, FlagMetricsAddress, o.MetricsAddress, "The address that serves /healthz, /readyz (ready once the caches synced) and the Prometheus /metrics, such as 127.0.0.1:18089. Defaults to empty: none.")
	fs.BoolVar(&o.Finalizer, FlagFinalizer, o.Finalizer, "Whether the PVs carry the library's finalizer "+LibraryFinalizer+
		" (AddFinalizer), as Kubernetes 1.33 and later expect of a provisioner that honours the reclaim policy (KEP-2644): the fair floor. --"+
		FlagFinalizer+"=false is the old floor, which writes PV objects only, for comparison.")
}

// Validate reports every option that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if o.ProvisionerName == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", FlagProvisionerName))
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--%s is required and must be positive", FlagKubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--%s is required and must be at least 1", FlagKubeAPIBurst))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--%s is required and must be at least 1", FlagWorkers))
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagResyncPeriod))
	}
	if o.MetricsAddress != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddress); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", FlagMetricsAddress, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs the no-op provisioner until ctx is done. The Options must be
// valid.
func (o *Options) Run(ctx context.Context) error {
	cfg, err := component.RESTConfig(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, userAgent)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create the API client: %w", err)
	}
	return o.run(ctx, kube)
}

// run wires the library's controller on kube as the provisioner does, serves
// the health endpoints when asked, starts the informers and runs the
// controller until ctx is done.
func (o *Options) run(ctx context.Context, kube kubernetes.Interface) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactory(kube, o.ResyncPeriod)
	claims, volumes := factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes()
	classes, nodes := factory.Storage().V1().StorageClasses(), factory.Core().V1().Nodes()
	m := metrics.New("controller")
	ctrl := controller.NewProvisionController(ctx, kube, o.ProvisionerName, New(nodes.Lister()), o.controllerOptions(
		claims.Informer(), volumes.Informer(), classes.Informer(), m)...)

	var ready atomic.Bool
	if o.MetricsAddress != "" {
		reg := component.NewRegistry(m.PersistentVolumeClaimProvisionTotal, m.PersistentVolumeClaimProvisionFailedTotal,
			m.PersistentVolumeClaimProvisionDurationSeconds, m.PersistentVolumeDeleteTotal,
			m.PersistentVolumeDeleteFailedTotal, m.PersistentVolumeDeleteDurationSeconds)
		// A benchmark's baseline on loopback: its metrics are served to
		// anyone (no Guard).
		if err := component.ServeHealth(ctx, component.Health{Address: o.MetricsAddress, Registry: reg, Ready: &ready}); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // before Shutdown, which waits for the informers to stop
		factory.Shutdown()
	}()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("wait for the %v informer: %w", typ, context.Cause(ctx))
		}
	}
	ready.Store(true)
	logger.Info("Starting the no-op provisioner", "provisioner", o.ProvisionerName, "workers", o.Workers,
		"kubeAPIQPS", o.KubeAPIQPS, "kubeAPIBurst", o.KubeAPIBurst, "finalizer", o.Finalizer)
	ctrl.Run(ctx)
	logger.Info("Stopped the no-op provisioner")
	return nil
}

// controllerOptions are the library options, those the provisioner gives
// (provisioner/internal/app, Config.wire), and AddFinalizer: the provisioner
// keeps a finalizer of its own on its PVs (hostpathv1.FinalizerDirectoryProtection),
// the fair floor the library's.
func (o *Options) controllerOptions(claims, volumes, classes cache.SharedIndexInformer, m metrics.Metrics) []func(*controller.ProvisionController) error {
	return []func(*controller.ProvisionController) error{
		controller.LeaderElection(false),
		controller.Threadiness(o.Workers),
		controller.ResyncPeriod(o.ResyncPeriod),
		controller.ClaimsInformer(claims),
		controller.VolumesInformer(volumes),
		controller.ClassesInformer(classes),
		controller.MetricsInstance(m),
		controller.CreateProvisionedPVLimiter(workqueue.DefaultTypedControllerRateLimiter[string]()),
		controller.AddFinalizer(o.Finalizer),
	}
}
