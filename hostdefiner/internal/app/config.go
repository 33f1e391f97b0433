package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"hostpath.dev/api/generated/clientset/versioned"
	hdscheme "hostpath.dev/api/generated/clientset/versioned/scheme"
	hdinformers "hostpath.dev/api/generated/informers/externalversions"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/hostdefiner/internal/classes"
	"hostpath.dev/hostdefiner/internal/controller"
	"hostpath.dev/hostdefiner/internal/csr"
)

// userAgent identifies the host definer to the API server, and its events.
const userAgent = "hostpath-hostdefiner"

// Config is the host definer that Complete built from valid Options: its
// API clients, informers and controllers. Nothing in it runs before
// Config.Run, and its informers start only while this replica leads.
type Config struct {
	Options
	// Kube is the Kubernetes API client, HostPath the client of the
	// HostDefinitions (same configuration).
	Kube     kubernetes.Interface
	HostPath versioned.Interface
	// Registry is what /metrics serves: the controller's metrics and the
	// metrics guard's.
	Registry *prometheus.Registry
	// MetricsGuard lets only callers allowed get on /metrics (and on the
	// profiles) through: review.MetricsGuard.
	MetricsGuard func(http.Handler) http.Handler
	// Bundle is the CA bundle the managers' certificates are verified
	// with, kept from the ConfigMap managerapi.CABundleConfigMap once Run
	// watches it; the controller calls no manager before it is loaded.
	Bundle *trust.Bundle
	// Broadcaster sends the controllers' events to the API server once
	// Run starts it.
	Broadcaster record.EventBroadcaster
	// Controller keeps the HostDefinitions.
	Controller *controller.Controller
	// Certificates approve and sign the managers' CSRs and keep their CA.
	Certificates *csr.Controllers
	// Classes keeps the ConfigMap of the classes, the parameters of the
	// claim-labelling policy.
	Classes *classes.Controller

	// factories are the informer factories of the controllers.
	factories []factory
}

// factory is an informer factory, started and shut down with the
// controllers.
type factory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// Complete builds the Config of valid Options: the API clients, the
// metrics and their guard, the informers (each factory trims what it
// caches: cachetrim's package doc says what each cache holds), the event
// recorder and the controllers, which register their event handlers.
func (o *Options) Complete(ctx context.Context) (*Config, error) {
	restConfig, err := component.RESTConfig(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, userAgent)
	if err != nil {
		return nil, err
	}
	c := &Config{Options: *o, Bundle: trust.NewBundle()}
	if c.Kube, err = kubernetes.NewForConfig(restConfig); err != nil {
		return nil, fmt.Errorf("build the Kubernetes client: %w", err)
	}
	if c.HostPath, err = versioned.NewForConfig(restConfig); err != nil {
		return nil, fmt.Errorf("build the HostDefinition client: %w", err)
	}
	if err := hdscheme.AddToScheme(scheme.Scheme); err != nil {
		return nil, fmt.Errorf("register the HostDefinition types: %w", err)
	}
	metrics := controller.NewMetrics()
	guard, reviewMetrics := review.MetricsGuard(c.Kube.AuthenticationV1().TokenReviews(), c.Kube.AuthorizationV1().SubjectAccessReviews(), o.Namespace, userAgent)
	c.MetricsGuard, c.Registry = guard, component.NewRegistry(append(reviewMetrics, metrics)...)
	c.Broadcaster = record.NewBroadcaster(record.WithContext(ctx))
	recorder := c.Broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: userAgent})

	trim := informers.WithTransform(cacheTrim)
	cluster := informers.NewSharedInformerFactoryWithOptions(c.Kube, o.ResyncPeriod, trim)
	local := informers.NewSharedInformerFactoryWithOptions(c.Kube, o.ResyncPeriod, informers.WithNamespace(o.Namespace), trim)
	defs := hdinformers.NewSharedInformerFactoryWithOptions(c.HostPath, o.ResyncPeriod, hdinformers.WithTransform(cacheTrim))
	// Only the multihost PVs are the host definer's (the backfill): the API
	// server sends it those its watch label selects, and no node-mode PV
	// (docs/scale.md, "Watches by node").
	multihost := informers.NewSharedInformerFactoryWithOptions(c.Kube, o.ResyncPeriod, trim,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.SelectorFromSet(labels.Set{hostpathv1.LabelNode: hostpathv1.NodeLabelMultihost}).String()
		}))
	inf := controller.Informers{
		Nodes:       cluster.Core().V1().Nodes().Informer(),
		Classes:     cluster.Storage().V1().StorageClasses().Informer(),
		Volumes:     multihost.Core().V1().PersistentVolumes().Informer(),
		Pods:        local.Core().V1().Pods().Informer(),
		DaemonSets:  local.Apps().V1().DaemonSets().Informer(),
		Definitions: defs.Hostpath().V1().HostDefinitions().Informer(),
		Namespace:   o.Namespace,
	}
	c.Controller, err = controller.New(o.controllerConfig(), c.Kube, c.HostPath, inf, o.managerFor(c.Bundle), recorder, clock.RealClock{}, metrics)
	if err != nil {
		return nil, err
	}
	certFactories, err := c.certificateControllers(inf.Pods)
	if err != nil {
		return nil, err
	}
	classesFactory, err := c.classesController(inf.Classes, inf.Pods)
	if err != nil {
		return nil, err
	}
	c.factories = append([]factory{cluster, multihost, local, defs, classesFactory}, certFactories...)
	return c, nil
}

// classesController builds the controller of the ConfigMap of the
// classes, reading classes (the host definer's informer of every
// StorageClass), pods (its informer of every pod of --namespace, where
// the provisioner pods run, which --provisioner-selector selects in the
// lister: no second watch of the same pods) and the informer of the
// factory it returns: the ConfigMap hostpathv1.ClassesConfigMap alone,
// listed by a field selector (the RBAC rules name it) and trimmed by
// cacheTrim.
func (c *Config) classesController(classInformer, pods cache.SharedIndexInformer) (factory, error) {
	cms := informers.NewSharedInformerFactoryWithOptions(c.Kube, c.ResyncPeriod, informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(csr.NameListOptions(hostpathv1.ClassesConfigMap)), informers.WithTransform(cacheTrim))
	var err error
	c.Classes, err = classes.New(hostpathv1.NewProvisionerNames(c.ProvisionerName), c.Kube, c.Namespace, c.provisionerSelector,
		classes.Informers{Classes: classInformer, ConfigMaps: cms.Core().V1().ConfigMaps().Informer(), Pods: pods})
	return cms, err
}

// certificateControllers builds the controllers of the managers' serving
// certificates, reading pods (the managers' namespace) and the informers
// of the factories it returns: the CSRs of managerapi.SignerName, the CA
// Secret and the bundle ConfigMap, each listed by a field selector (the
// RBAC rules name them) and trimmed by cacheTrim.
func (c *Config) certificateControllers(pods cache.SharedIndexInformer) ([]factory, error) {
	trim := informers.WithTransform(cacheTrim)
	csrs := informers.NewSharedInformerFactoryWithOptions(c.Kube, c.ResyncPeriod, informers.WithTweakListOptions(csr.SignerListOptions), trim)
	secrets := informers.NewSharedInformerFactoryWithOptions(c.Kube, c.ResyncPeriod, informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(csr.NameListOptions(managerapi.CASecret)), trim)
	bundles := informers.NewSharedInformerFactoryWithOptions(c.Kube, c.ResyncPeriod, informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(csr.NameListOptions(managerapi.CABundleConfigMap)), trim)
	inf := csr.Informers{
		CSRs:       csrs.Certificates().V1().CertificateSigningRequests().Informer(),
		Pods:       pods,
		Secrets:    secrets.Core().V1().Secrets().Informer(),
		ConfigMaps: bundles.Core().V1().ConfigMaps().Informer(),
	}
	var err error
	c.Certificates, err = csr.New(c.csrConfig(), c.Kube, inf, clock.RealClock{})
	return []factory{csrs, secrets, bundles}, err
}
