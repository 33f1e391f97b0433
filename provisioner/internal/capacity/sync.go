package capacity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// sync does one refresh (see the package doc): it deletes the objects of
// the node that no capacity-aware class wants, asks the manager for the
// pools' figures once, and creates or updates the objects whose figure
// moved, as the Interval allows. It returns how long until the Interval
// lets a write it held back through (0 when it held none back); the error
// joins every failure, and what did not fail is done.
func (p *Publisher) sync(ctx context.Context) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	// The time of the writes is the refresh's start: the bound between two
	// writes is never shorter than the Interval.
	now := p.cfg.Clock.Now()
	node, err := p.cfg.Nodes.Get(p.cfg.Node)
	if apierrors.IsNotFound(err) {
		// The garbage collector deletes the objects it owns.
		logger.V(2).Info("Not publishing storage capacity: the Node does not exist")
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get Node %q from the cache: %w", p.cfg.Node, err)
	}
	existing, err := p.cfg.Capacities.CSIStorageCapacities(p.cfg.Namespace).List(p.selector)
	if err != nil {
		return 0, fmt.Errorf("list CSIStorageCapacities from the cache: %w", err)
	}
	classes, err := p.classes()
	if err != nil {
		return 0, err
	}
	hostname := node.Labels[v1.LabelHostname]
	if hostname == "" && len(classes) > 0 {
		logger.Info("Not publishing storage capacity: the Node has no label to select it by", "label", v1.LabelHostname)
		classes = nil
	}
	wanted := map[string]bool{}
	for _, sc := range classes {
		wanted[ObjectName(sc.Name, node.Name, hostname)] = true
	}
	current := map[string]*storagev1.CSIStorageCapacity{}
	var errs []error
	for _, obj := range existing {
		if wanted[obj.Name] {
			current[obj.Name] = obj
		} else if err := p.delete(ctx, obj); err != nil {
			errs = append(errs, err)
		}
	}
	if len(classes) == 0 {
		return 0, errors.Join(errs...)
	}
	again, err := p.publishAll(ctx, now, node, hostname, classes, current)
	return again, errors.Join(append(errs, err)...)
}

// publishAll asks the manager for the pools' figures and publishes the
// object of each class (publish); current are the existing objects by
// name, and now the refresh's start. It returns the shortest wait of a
// write held back.
func (p *Publisher) publishAll(ctx context.Context, now time.Time, node *v1.Node, hostname string, classes []*storagev1.StorageClass, current map[string]*storagev1.CSIStorageCapacity) (time.Duration, error) {
	mgr, err := p.cfg.Managers(p.cfg.Node)
	if err != nil {
		return 0, fmt.Errorf("publish the storage capacity of node %q: find the manager: %w", p.cfg.Node, err)
	}
	host, err := mgr.Host(ctx)
	if err != nil {
		return 0, fmt.Errorf("publish the storage capacity of node %q: ask the manager for its pools: %w", p.cfg.Node, err)
	}
	var (
		again time.Duration
		errs  []error
	)
	for _, sc := range classes {
		f := figureOf(host, sc)
		want := object(p.cfg.Namespace, sc, node, hostname, f.available)
		wait, err := p.publish(ctx, current[want.Name], want, f, now)
		if err != nil {
			errs = append(errs, err)
		}
		if wait > 0 && (again == 0 || wait < again) {
			again = wait
		}
	}
	return again, errors.Join(errs...)
}

// publish makes cur, the existing object (nil when there is none), want,
// when it is missing, needs a repair or its capacity moved (see moved),
// unless this process wrote it less than an Interval ago: then it returns
// how long until it may.
func (p *Publisher) publish(ctx context.Context, cur, want *storagev1.CSIStorageCapacity, f figure, now time.Time) (time.Duration, error) {
	if cur != nil && immutableDiffers(cur, want) {
		if err := p.delete(ctx, cur); err != nil {
			return 0, err
		}
		cur = nil
	}
	if cur != nil && !needsRepair(cur, want) && !moved(cur.Capacity, f.available, f.threshold) {
		return 0, nil
	}
	logger := klog.FromContext(ctx).WithValues("storageClass", want.StorageClassName, "csiStorageCapacity", klog.KObj(want), "capacity", want.Capacity)
	if last, ok := p.written[want.Name]; ok {
		if wait := last.Add(p.cfg.Interval).Sub(now); wait > 0 {
			logger.V(4).Info("Holding back a storage capacity write until the interval since the last is over", "wait", wait)
			return wait, nil
		}
	}
	var err error
	if cur == nil {
		_, err = p.cfg.Client.StorageV1().CSIStorageCapacities(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: p.cfg.FieldManager})
	} else {
		logger = logger.WithValues("previous", cur.Capacity)
		_, err = p.cfg.Client.StorageV1().CSIStorageCapacities(want.Namespace).Update(ctx, updated(cur, want), metav1.UpdateOptions{FieldManager: p.cfg.FieldManager})
	}
	if err != nil {
		return 0, fmt.Errorf("publish the storage capacity of class %q on node %q (CSIStorageCapacity %s/%s): %w",
			want.StorageClassName, p.cfg.Node, want.Namespace, want.Name, err)
	}
	p.written[want.Name] = now
	if f.why != "" {
		logger = logger.WithValues("reason", f.why)
	}
	logger.V(2).Info("Published the storage capacity of a class")
	return 0, nil
}

// delete deletes an object of the node; one already gone is not an error.
func (p *Publisher) delete(ctx context.Context, obj *storagev1.CSIStorageCapacity) error {
	err := p.cfg.Client.StorageV1().CSIStorageCapacities(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete CSIStorageCapacity %s/%s of class %q: %w", obj.Namespace, obj.Name, obj.StorageClassName, err)
	}
	delete(p.written, obj.Name)
	klog.FromContext(ctx).V(2).Info("Deleted a storage capacity object no class wants", "csiStorageCapacity", klog.KObj(obj), "storageClass", obj.StorageClassName)
	return nil
}

// classes returns the capacity-aware classes, sorted by name.
func (p *Publisher) classes() ([]*storagev1.StorageClass, error) {
	all, err := p.cfg.Classes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list StorageClasses from the cache: %w", err)
	}
	var out []*storagev1.StorageClass
	for _, sc := range all {
		if capacityAware(sc) {
			out = append(out, sc)
		}
	}
	slices.SortFunc(out, func(a, b *storagev1.StorageClass) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// withdraw deletes every object of the node, read from the API server
// (with publishing off there is no cache of them).
func (p *Publisher) withdraw(ctx context.Context) error {
	list, err := p.cfg.Client.StorageV1().CSIStorageCapacities(p.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: p.selector.String()})
	if err != nil {
		return fmt.Errorf("list the CSIStorageCapacities of node %q to delete them (publishing is off): %w", p.cfg.Node, err)
	}
	var errs []error
	for i := range list.Items {
		if err := p.delete(ctx, &list.Items[i]); err != nil {
			errs = append(errs, err)
		}
	}
	klog.FromContext(ctx).Info("Storage capacity publishing is off: deleted this node's objects", "deleted", len(list.Items)-len(errs), "failed", len(errs))
	return errors.Join(errs...)
}
