package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/hostdefiner/internal/controller"
	"hostpath.dev/hostdefiner/pkg/generated/clientset/versioned"
	hdscheme "hostpath.dev/hostdefiner/pkg/generated/clientset/versioned/scheme"
	hdinformers "hostpath.dev/hostdefiner/pkg/generated/informers/externalversions"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/manager/pkg/component"
)

// Run serves health and metrics and runs the controller, while this
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
	if err := component.ServeHealth(ctx, o.HealthAddress, component.NewRegistry(metrics), &ready); err != nil {
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

// runController builds the informers and the controller and runs it.
func (o *Options) runController(ctx context.Context, kube kubernetes.Interface, hostpath versioned.Interface, metrics *controller.Metrics) error {
	cluster := informers.NewSharedInformerFactory(kube, o.ResyncPeriod)
	local := informers.NewSharedInformerFactoryWithOptions(kube, o.ResyncPeriod, informers.WithNamespace(o.Namespace))
	defs := hdinformers.NewSharedInformerFactory(hostpath, o.ResyncPeriod)
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
	ctrl, err := controller.New(o.controllerConfig(), kube, hostpath, inf, o.managerFor(), recorder, clock.RealClock{}, metrics)
	if err != nil {
		return err
	}
	cluster.Start(ctx.Done())
	local.Start(ctx.Done())
	defs.Start(ctx.Done())
	defer cluster.Shutdown()
	defer local.Shutdown()
	defer defs.Shutdown()
	return ctrl.Run(ctx, o.Workers)
}

// controllerConfig is the controller's part of the options.
func (o *Options) controllerConfig() controller.Config {
	return controller.Config{
		ProvisionerName: o.ProvisionerName, ManagerDaemonSet: o.ManagerDaemonSet, ManagerSelector: o.managerSelector,
		MinFreeBytes: o.MinFreeBytes, MaxTries: o.MaxTries, InitialBackoff: o.InitialBackoff, MaxBackoff: o.MaxBackoff,
		AllowDelete: o.AllowDelete, ReverifyPeriod: o.ReverifyPeriod, BackfillWorkers: o.BackfillWorkers,
	}
}

// managerFor calls a manager pod on its IP, with the token file and the
// call timeout.
func (o *Options) managerFor() controller.ManagerFor {
	opts := client.CallerOptions(o.ManagerTokenFile, o.ManagerTimeout, 0)
	return func(pod *v1.Pod) (controller.Manager, error) {
		return client.New("http://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(o.ManagerPort)), opts...)
	}
}
