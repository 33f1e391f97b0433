package capacity

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// Sources are the informers whose events make a Publisher refresh.
type Sources struct {
	// Classes are the StorageClasses: a capacity-aware one that comes or
	// goes. Their provisioner, parameters and binding mode cannot change.
	Classes cache.SharedInformer
	// Nodes are the Nodes: this node's kubernetes.io/hostname label or UID
	// that changes.
	Nodes cache.SharedInformer
	// Volumes are the PersistentVolumes: one of the provisioner names on
	// this node, or a multihost one, that comes, goes or is resized.
	Volumes cache.SharedInformer
	// Capacities are this node's objects (Selector): one deleted by
	// someone else is made again.
	Capacities cache.SharedInformer
}

// AddEventHandlers registers the handlers that queue a refresh (Trigger)
// with the informers, which must not have started yet. A refresh writes
// only what moved, within the Interval's bound.
func (p *Publisher) AddEventHandlers(s Sources) error {
	trigger := func(any) { p.notify() }
	handlers := []struct {
		what     string
		informer cache.SharedInformer
		handler  cache.ResourceEventHandler
	}{
		{"StorageClasses", s.Classes, cache.FilteringResourceEventHandler{
			FilterFunc: func(obj any) bool {
				sc, ok := unwrap(obj).(*storagev1.StorageClass)
				return ok && sc.Provisioner == hostpathv1.CapacityProvisionerName
			},
			Handler: cache.ResourceEventHandlerFuncs{AddFunc: trigger, DeleteFunc: trigger},
		}},
		{"Nodes", s.Nodes, cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if n, ok := obj.(*v1.Node); ok && n.Name == p.cfg.Node {
					p.notify()
				}
			},
			UpdateFunc: func(old, obj any) {
				o, okOld := old.(*v1.Node)
				n, ok := obj.(*v1.Node)
				if ok && okOld && n.Name == p.cfg.Node && (o.UID != n.UID || o.Labels[v1.LabelHostname] != n.Labels[v1.LabelHostname]) {
					p.notify()
				}
			},
		}},
		{"PersistentVolumes", s.Volumes, cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { p.onVolume(nil, obj) },
			UpdateFunc: func(old, obj any) {
				p.onVolume(old, obj)
			},
			DeleteFunc: func(obj any) { p.onVolume(nil, obj) },
		}},
		{"CSIStorageCapacities", s.Capacities, cache.ResourceEventHandlerFuncs{DeleteFunc: trigger}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return fmt.Errorf("watch the %s for the capacity publisher: %w", h.what, err)
		}
	}
	return nil
}

// onVolume queues a refresh for a PV that came or went (old nil) or whose
// capacity changed, when its directory is on this node: a node-mode PV of
// this node or a multihost PV, of one of the provisioner names.
func (p *Publisher) onVolume(old, obj any) {
	pv, ok := unwrap(obj).(*v1.PersistentVolume)
	if !ok {
		return
	}
	if d, ours := hostpathv1.VolumeDirectoryOf(pv, p.cfg.ProvisionerNames); !ours || !d.Multihost && !d.On(p.cfg.Node) {
		return
	}
	if old != nil {
		o, ok := old.(*v1.PersistentVolume)
		if ok && o.Spec.Capacity.Storage().Cmp(*pv.Spec.Capacity.Storage()) == 0 {
			return
		}
	}
	p.notify()
}

// unwrap returns the object of a deletion whose final state the informer
// missed.
func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
