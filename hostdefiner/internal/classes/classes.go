package classes

import (
	"context"
	"fmt"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/worker"
)

// FieldManager names the host definer in the managed fields of the
// ConfigMap.
const FieldManager = "hostpath-hostdefiner"

// The label every object of the product carries.
const (
	partOfLabel = "app.kubernetes.io/part-of"
	partOfValue = "hostpath"
)

// key is the queue's single key: there is one ConfigMap to keep.
type key struct{}

// Controller keeps the ConfigMap hostpathv1.ClassesConfigMap of its
// namespace.
type Controller struct {
	names      hostpathv1.ProvisionerNames
	kube       kubernetes.Interface
	namespace  string
	classes    storagelisters.StorageClassLister
	configMaps corelisters.ConfigMapNamespaceLister
	synced     []cache.InformerSynced
	queue      *worker.Queue[key]
}

// New returns a Controller for the classes of names, reading the
// StorageClasses of classes and the ConfigMaps of configMaps (an informer
// of namespace, which needs to hold only hostpathv1.ClassesConfigMap), and
// writing through kube; it registers its event handlers on both.
func New(names hostpathv1.ProvisionerNames, kube kubernetes.Interface, namespace string,
	classes, configMaps cache.SharedIndexInformer) (*Controller, error) {
	c := &Controller{
		names: names, kube: kube, namespace: namespace,
		classes:    storagelisters.NewStorageClassLister(classes.GetIndexer()),
		configMaps: corelisters.NewConfigMapLister(configMaps.GetIndexer()).ConfigMaps(namespace),
	}
	c.queue = worker.NewQueue("classes", c.sync)
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{classes, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onClass,
			UpdateFunc: func(old, obj any) { c.onClass(old); c.onClass(obj) },
			DeleteFunc: c.onClass,
		}},
		{configMaps, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onConfigMap,
			UpdateFunc: func(_, obj any) { c.onConfigMap(obj) },
			DeleteFunc: c.onConfigMap,
		}},
	} {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("add an event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// Run syncs the ConfigMap once the caches are synced, and after every
// change of a class of the installation or of the ConfigMap, until ctx
// is done. One worker: there is one key.
func (c *Controller) Run(ctx context.Context) error {
	c.queue.Add(key{})
	return c.queue.Run(ctx, 1, c.synced...)
}

// onClass queues the key when obj is a class of the installation (the
// old and the new class of an update are both passed, so that a class
// that leaves the installation is seen).
func (c *Controller) onClass(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if sc, ok := obj.(*storagev1.StorageClass); ok && c.names.Has(sc.Provisioner) {
		c.queue.Add(key{})
	}
}

// onConfigMap queues the key when the ConfigMap changes or goes.
func (c *Controller) onConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*v1.ConfigMap); ok && cm.Name == hostpathv1.ClassesConfigMap {
		c.queue.Add(key{})
	}
}

// Data is the content of the ConfigMap for the classes of names among
// classes: a key per class (hostpathv1.ClassKey) with its mode, and
// hostpathv1.ProvisionersKey.
func Data(names hostpathv1.ProvisionerNames, classes []*storagev1.StorageClass) map[string]string {
	data := map[string]string{
		hostpathv1.ProvisionersKey: strings.Join(append([]string{names.Name()}, names.Additional()...), " "),
	}
	for _, sc := range classes {
		if !names.Has(sc.Provisioner) {
			continue
		}
		mode := hostpathv1.ModeNode
		if sc.Parameters[hostpathv1.ParamMode] == hostpathv1.ModeMultihost {
			mode = hostpathv1.ModeMultihost
		}
		data[hostpathv1.ClassKey(sc.Name)] = mode
	}
	return data
}

// sync makes the ConfigMap hold Data of the cached classes: created when
// missing, updated when it differs, left alone when equal.
func (c *Controller) sync(ctx context.Context, _ key) error {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list StorageClasses: %w", err)
	}
	want := Data(c.names, classes)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "configMap", klog.KRef(c.namespace, hostpathv1.ClassesConfigMap))
	cm, err := c.configMaps.Get(hostpathv1.ClassesConfigMap)
	if apierrors.IsNotFound(err) {
		cm = &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: hostpathv1.ClassesConfigMap, Namespace: c.namespace,
				Labels: map[string]string{partOfLabel: partOfValue},
			},
			Data: want,
		}
		if _, err := c.kube.CoreV1().ConfigMaps(c.namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			// AlreadyExists too: the informer sees it soon, and the
			// retry updates it.
			return fmt.Errorf("create ConfigMap %s/%s: %w", c.namespace, hostpathv1.ClassesConfigMap, err)
		}
		logger.Info("Created the ConfigMap of the classes", "classes", len(want)-1)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ConfigMap %s/%s from the cache: %w", c.namespace, hostpathv1.ClassesConfigMap, err)
	}
	if maps.Equal(cm.Data, want) && cm.Labels[partOfLabel] == partOfValue {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[partOfLabel] = partOfValue
	if _, err := c.kube.CoreV1().ConfigMaps(c.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", c.namespace, hostpathv1.ClassesConfigMap, err)
	}
	logger.Info("Updated the ConfigMap of the classes", "classes", len(want)-1)
	return nil
}
