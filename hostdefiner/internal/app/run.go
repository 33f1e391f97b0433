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
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/profiling"
	"hostpath.dev/hostdefiner/internal/controller"
	"hostpath.dev/hostdefiner/internal/csr"
)

// Run runs the host definer until ctx is done: Complete, then Config.Run.
// The Options must be valid.
func (o *Options) Run(ctx context.Context) error {
	c, err := o.Complete(ctx)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// Run serves health and metrics and runs the controllers, while this
// replica leads (or at once without leader election), until ctx is done.
func (c *Config) Run(ctx context.Context) error {
	var ready atomic.Bool
	ready.Store(true)
	if err := component.ServeHealth(ctx, component.Health{
		Address: c.HealthAddress, Registry: c.Registry, Ready: &ready, Guard: c.MetricsGuard, Extra: profiling.HandlersIf(c.Profiling),
	}); err != nil {
		return err
	}
	if !c.LeaderElect {
		klog.FromContext(ctx).Info("Leader election is off: running the controller now")
		return c.runControllers(ctx)
	}
	return c.lead(ctx, c.runControllers)
}

// lead runs run while this replica holds the leader Lease. Losing the Lease
// ends Run with an error, so the pod restarts as a standby with fresh
// caches.
func (c *Config) lead(ctx context.Context, run func(context.Context) error) error {
	id := os.Getenv(EnvPodName)
	if id == "" {
		id, _ = os.Hostname()
	}
	id += "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, c.Namespace, c.LeaseName,
		c.Kube.CoreV1(), c.Kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	errc := make(chan error, 1)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, Name: c.LeaseName, ReleaseOnCancel: true,
		LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
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

// runControllers runs the controllers (HostDefinitions, the managers'
// certificates, and the ConfigMap of the classes) on their informers, and sends their events, until ctx is
// done or one of them fails. The HostDefinition controller calls the
// managers once the CA bundle is loaded.
func (c *Config) runControllers(ctx context.Context) error {
	bundleSynced, err := trust.Watch(ctx, c.Kube, c.Namespace, c.Bundle)
	if err != nil {
		return err
	}
	c.Broadcaster.StartStructuredLogging(3)
	c.Broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	defer c.Broadcaster.Shutdown()
	// Shutdown waits for the informers, which stop with runCtx: cancel
	// (deferred last, so run first) ends them whatever ends runAll.
	runCtx, cancel := context.WithCancel(ctx)
	for _, f := range c.factories {
		f.Start(runCtx.Done())
		defer f.Shutdown()
	}
	defer cancel()
	return runAll(runCtx,
		func(ctx context.Context) error { return c.Certificates.Run(ctx, c.Workers) },
		c.Classes.Run,
		func(ctx context.Context) error {
			if !cache.WaitForNamedCacheSyncWithContext(ctx, bundleSynced) {
				return fmt.Errorf("wait for the CA bundle: %w", context.Cause(ctx))
			}
			return c.Controller.Run(ctx, c.Workers)
		})
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
// certificate of the pod's node (managerapi.ServerName).
func (o *Options) managerFor(bundle *trust.Bundle) controller.ManagerFor {
	opts := managerapi.CallerOptions(o.ManagerTokenFile, o.ManagerTimeout, 0)
	// One client (and so one TLS transport, whose connections are reused)
	// per manager pod; a new pod, or a new IP, gets a new one.
	var clients sync.Map // pod UID -> *managerapi.Client
	return func(pod *v1.Pod) (controller.Manager, error) {
		if pod.Spec.NodeName == "" {
			return nil, fmt.Errorf("manager pod %s/%s has no node yet", pod.Namespace, pod.Name)
		}
		url := "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(o.ManagerPort))
		if c, ok := clients.Load(pod.UID); ok && c.(*managerapi.Client).BaseURL() == url {
			return c.(*managerapi.Client), nil
		}
		c, err := managerapi.New(url, append(slices.Clip(opts), managerapi.WithServerTLS(bundle.Pool, managerapi.ServerName(pod.Spec.NodeName)))...)
		if err != nil {
			return nil, err
		}
		clients.Store(pod.UID, c)
		return c, nil
	}
}
