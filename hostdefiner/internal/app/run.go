package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/hostdefiner/internal/controller"
	"hostpath.dev/hostdefiner/internal/csr"
	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	"hostpath.dev/hostdefiner/pkg/generated/clientset/versioned"
	hdscheme "hostpath.dev/hostdefiner/pkg/generated/clientset/versioned/scheme"
	hdinformers "hostpath.dev/hostdefiner/pkg/generated/informers/externalversions"
	"hostpath.dev/manager/pkg/cachetrim"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/manager/pkg/component"
	"hostpath.dev/manager/pkg/profiling"
	"hostpath.dev/manager/pkg/review"
	"hostpath.dev/manager/pkg/trust"
)

// Run serves health and metrics and runs the controllers, while this
// replica leads (or at once without leader election), until ctx is done.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg, err := component.RESTConfig(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, "hostpath-hostdefiner")
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build the Kubernetes client: %w", err)
	}
	hostpath, err := versioned.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build the HostDefinition client: %w", err)
	}
	metrics := controller.NewMetrics()
	var ready atomic.Bool
	ready.Store(true)
	guard, reviewMetrics := review.MetricsGuard(kube.AuthenticationV1().TokenReviews(), kube.AuthorizationV1().SubjectAccessReviews(), o.Namespace, "hostpath-hostdefiner")
	if err := component.ServeHealth(ctx, component.Health{
		Address: o.HealthAddress, Registry: component.NewRegistry(append(reviewMetrics, metrics)...), Ready: &ready, Guard: guard, Extra: profiling.HandlersIf(o.Profiling),
	}); err != nil {
		return err
	}
	run := func(ctx context.Context) error { return o.runController(ctx, kube, hostpath, metrics) }
	if !o.LeaderElect {
		logger.Info("Leader election is off: running the controller now")
		return run(ctx)
	}
	return o.lead(ctx, kube, run)
}

// lead runs run while this replica holds the leader Lease. Losing the Lease
// ends Run with an error, so the pod restarts as a standby with fresh
// caches.
func (o *Options) lead(ctx context.Context, kube kubernetes.Interface, run func(context.Context) error) error {
	id := os.Getenv(EnvPodName)
	if id == "" {
		id, _ = os.Hostname()
	}
	id += "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.Namespace, o.LeaseName,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	errc := make(chan error, 1)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, Name: o.LeaseName, ReleaseOnCancel: true,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.FromContext(ctx).Info("Leading: running the controller", "identity", id)
				errc <- run(ctx)
				cancel()
			},
			OnStoppedLeading: func() { klog.FromContext(parent).Info("Not leading any more", "identity", id) },
			OnNewLeader: func(leader string) {
				klog.FromContext(parent).Info("Leader elected", "leader", leader, "self", leader == id)
			},
		},
	})
	select {
	case err := <-errc:
		if err != nil {
			return err
		}
	default:
	}
	if parent.Err() != nil {
		return nil
	}
	return errors.New("lost the leader Lease: restarting as a standby")
}

// runController builds the informers and the controllers (HostDefinitions,
// and the managers' certificates) and runs them. The HostDefinition
// controller calls the managers once the CA bundle is loaded.
func (o *Options) runController(ctx context.Context, kube kubernetes.Interface, hostpath versioned.Interface, metrics *controller.Metrics) error {
	bundle := trust.NewBundle()
	bundleSynced, err := trust.Watch(ctx, kube, o.Namespace, bundle)
	if err != nil {
		return err
	}
	// Every factory trims what it caches (cachetrim's package doc says
	// what each cache holds).
	trim := informers.WithTransform(cachetrim.Transform)
	cluster := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, trim)
	local := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, informers.WithNamespace(o.Namespace), trim)
	defs := hdinformers.NewSharedInformerFactoryWithOptions(hostpath, o.ResyncPeriod, hdinformers.WithTransform(cachetrim.Transform))
	inf := controller.Informers{
		Nodes:       cluster.Core().V1().Nodes().Informer(),
		Classes:     cluster.Storage().V1().StorageClasses().Informer(),
		Volumes:     cluster.Core().V1().PersistentVolumes().Informer(),
		Pods:        local.Core().V1().Pods().Informer(),
		DaemonSets:  local.Apps().V1().DaemonSets().Informer(),
		Definitions: defs.Hostpath().V1().HostDefinitions().Informer(),
		Namespace:   o.Namespace,
	}
	if err := hdscheme.AddToScheme(scheme.Scheme); err != nil {
		return fmt.Errorf("register the HostDefinition types: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "hostpath-hostdefiner"})
	ctrl, err := controller.New(o.controllerConfig(), kube, hostpath, inf, o.managerFor(bundle), recorder, clock.RealClock{}, metrics)
	if err != nil {
		return err
	}
	certs, certFactories, err := o.certificateControllers(kube, inf.Pods)
	if err != nil {
		return err
	}
	// Shutdown waits for the informers, which stop with runCtx: cancel
	// (deferred last, so run first) ends them whatever ends runAll.
	runCtx, cancel := context.WithCancel(ctx)
	for _, f := range append([]factory{cluster, local, defs}, certFactories...) {
		f.Start(runCtx.Done())
		defer f.Shutdown()
	}
	defer cancel()
	return runAll(runCtx,
		func(ctx context.Context) error { return certs.Run(ctx, o.Workers) },
		func(ctx context.Context) error {
			if !cache.WaitForNamedCacheSyncWithContext(ctx, bundleSynced) {
				return fmt.Errorf("wait for the CA bundle: %w", context.Cause(ctx))
			}
			return ctrl.Run(ctx, o.Workers)
		})
}

// factory is an informer factory, started and shut down with the
// controllers.
type factory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// certificateControllers builds the controllers of the managers' serving
// certificates, reading pods (the managers' namespace) and the informers
// of the factories it returns: the CSRs of client.SignerName, the CA
// Secret and the bundle ConfigMap, each listed by a field selector (the
// RBAC rules name them) and trimmed by cachetrim.Transform.
func (o *Options) certificateControllers(kube kubernetes.Interface, pods cache.SharedIndexInformer) (*csr.Controllers, []factory, error) {
	trim := informers.WithTransform(cachetrim.Transform)
	csrs := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, informers.WithTweakListOptions(csr.SignerListOptions), trim)
	secrets := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(csr.NameListOptions(client.CASecret)), trim)
	bundles := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(csr.NameListOptions(client.CABundleConfigMap)), trim)
	inf := csr.Informers{
		CSRs:       csrs.Certificates().V1().CertificateSigningRequests().Informer(),
		Pods:       pods,
		Secrets:    secrets.Core().V1().Secrets().Informer(),
		ConfigMaps: bundles.Core().V1().ConfigMaps().Informer(),
	}
	c, err := csr.New(o.csrConfig(), kube, inf, clock.RealClock{})
	return c, []factory{csrs, secrets, bundles}, err
}

// runAll runs fns until ctx is done or one of them fails, and returns
// their errors.
func runAll(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(fns))
	for _, fn := range fns {
		go func() {
			err := fn(ctx)
			if err != nil {
				cancel()
			}
			errc <- err
		}()
	}
	var errs []error
	for range fns {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// controllerConfig is the controller's part of the options.
func (o *Options) controllerConfig() controller.Config {
	return controller.Config{
		ProvisionerNames: hostpathv1.NewProvisionerNames(o.ProvisionerName), ManagerDaemonSet: o.ManagerDaemonSet, ManagerSelector: o.managerSelector,
		MinFreeBytes: o.MinFreeBytes, MaxTries: o.MaxTries, InitialBackoff: o.InitialBackoff, MaxBackoff: o.MaxBackoff,
		AllowDelete: o.AllowDelete, ReverifyPeriod: o.ReverifyPeriod, BackfillWorkers: o.BackfillWorkers,
	}
}

// csrConfig is the certificate controllers' part of the options.
func (o *Options) csrConfig() csr.Config {
	return csr.Config{
		Namespace: o.Namespace, ServiceAccount: o.ManagerServiceAccount, ManagerSelector: o.managerSelector,
		MaxLifetime: o.MaxCertificateLifetime, CAOverlap: o.CAOverlap,
	}
}

// managerFor calls a manager pod over HTTPS on its IP, with the token file
// and the call timeout, trusting only bundle and only the serving
// certificate of the pod's node (client.ServerName).
func (o *Options) managerFor(bundle *trust.Bundle) controller.ManagerFor {
	opts := client.CallerOptions(o.ManagerTokenFile, o.ManagerTimeout, 0)
	// One client (and so one TLS transport, whose connections are reused)
	// per manager pod; a new pod, or a new IP, gets a new one.
	var clients sync.Map // pod UID -> *client.Client
	return func(pod *v1.Pod) (controller.Manager, error) {
		if pod.Spec.NodeName == "" {
			return nil, fmt.Errorf("manager pod %s/%s has no node yet", pod.Namespace, pod.Name)
		}
		url := "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(o.ManagerPort))
		if c, ok := clients.Load(pod.UID); ok && c.(*client.Client).BaseURL() == url {
			return c.(*client.Client), nil
		}
		c, err := client.New(url, append(slices.Clip(opts), client.WithServerTLS(bundle.Pool, client.ServerName(pod.Spec.NodeName)))...)
		if err != nil {
			return nil, err
		}
		clients.Store(pod.UID, c)
		return c, nil
	}
}
