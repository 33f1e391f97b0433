package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// Sync brings the definition of key in line with the cluster: it reads
// the Facts from the caches, and does what NextStep decides: creates,
// defines, verifies or undefines it, or waits.
func (c *Controller) Sync(ctx context.Context, key Key) error {
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "node", key.Node, "pool", key.Pool))
	in, err := c.facts(key)
	if err != nil {
		return err
	}
	// A new definition is created, then labelled, then defined: each
	// write is followed by the decision on what it wrote.
	for range 3 {
		step := NextStep(c.cfg, in)
		switch step.Action {
		case ActCreate:
			in.Definition, err = c.create(ctx, key)
		case ActCopyLabel:
			in.Definition, err = c.copyLabel(ctx, in.Definition, step.Label)
		default:
			return c.do(ctx, in, step)
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("HostDefinition %s: still to create or label after 3 steps", hostpathv1.Name(key.Node, key.Pool))
}

// facts reads what NextStep decides from, from the caches.
func (c *Controller) facts(key Key) (Facts, error) {
	in := Facts{Key: key, Now: c.clock.Now()}
	def, err := c.definitions.Get(hostpathv1.Name(key.Node, key.Pool))
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, fmt.Errorf("get the HostDefinition from the cache: %w", err)
	case def.Spec.NodeName != key.Node || def.Spec.Pool != key.Pool:
		return in, fmt.Errorf("HostDefinition %q is for node %q and pool %q, not %s", def.Name, def.Spec.NodeName, def.Spec.Pool, key)
	default:
		in.Definition = def
	}
	if in.Node, err = c.nodes.Get(key.Node); apierrors.IsNotFound(err) {
		in.Node = nil
	} else if err != nil {
		return in, fmt.Errorf("get the Node from the cache: %w", err)
	}
	if in.DaemonSet, err = c.daemonSets.Get(c.cfg.ManagerDaemonSet); apierrors.IsNotFound(err) {
		in.DaemonSet = nil
	} else if err != nil {
		return in, fmt.Errorf("get the manager DaemonSet from the cache: %w", err)
	}
	pools, err := c.pools()
	if err != nil {
		return in, err
	}
	_, in.PoolNamed = pools[key.Pool]
	if in.ManagerPods, err = c.managerPods(key.Node); err != nil {
		return in, err
	}
	if in.Definition != nil {
		vols, err := c.multihostVolumes(key.Pool)
		if err != nil {
			return in, err
		}
		in.Unlisted = slices.ContainsFunc(vols, func(m multihostVolume) bool { return !m.holds(key.Node) })
	}
	return in, nil
}

// do carries out a step other than ActCreate and ActCopyLabel.
func (c *Controller) do(ctx context.Context, in Facts, step Step) error {
	def := in.Definition
	if step.Retry {
		klog.FromContext(ctx).Info("Retry requested: starting a new round of tries", "annotation", hostpathv1.RetryAnnotation, "value", step.Status.Retry)
	}
	if step.After > 0 {
		c.queue.AddAfter(in.Key, step.After)
	}
	switch step.Action {
	case ActNothing:
		return nil
	case ActClearBlocked:
		return c.clearUndefineBlocked(ctx, def)
	case ActWaitForManager:
		return c.waitForManager(ctx, def, step)
	case ActTry:
		return c.try(ctx, def, step.Status, step.Pod)
	case ActBlockUndefine:
		return c.blockUndefine(ctx, def, step)
	case ActUndefine:
		return c.undefine(ctx, def, step)
	}
	return fmt.Errorf("HostDefinition %s: no such step %q", def.Name, step.Action)
}

// pools returns the pools named by the provisioner's StorageClasses.
func (c *Controller) pools() (map[string]struct{}, error) {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list StorageClasses from the cache: %w", err)
	}
	pools := map[string]struct{}{}
	for _, sc := range classes {
		if pool, ok := poolOf(sc, c.cfg.ProvisionerNames); ok {
			pools[pool] = struct{}{}
		}
	}
	return pools, nil
}

// poolOf returns the pool of a StorageClass of the provisioner; false for
// anything else or a pool name that is not valid.
func poolOf(obj any, provisioner hostpathv1.ProvisionerNames) (string, bool) {
	sc, ok := obj.(*storagev1.StorageClass)
	if !ok || !provisioner.Has(sc.Provisioner) {
		return "", false
	}
	pool := hostpathv1.ClassPool(sc.Parameters)
	return pool, managerapi.ValidatePoolName(pool) == nil
}

// managerPods returns the manager pods on node, in any state.
func (c *Controller) managerPods(node string) ([]*v1.Pod, error) {
	pods, err := byIndex[*v1.Pod](c.podIndex, hostpathv1.NodeNameIndex, node)
	if err != nil {
		return nil, fmt.Errorf("manager pods: %w", err)
	}
	return slices.DeleteFunc(pods, func(p *v1.Pod) bool {
		return p.Namespace != c.namespace || !c.cfg.ManagerSelector.Matches(labels.Set(p.Labels))
	}), nil
}

// create makes the definition of key (copyLabel then copies the node's
// AvoidDeletionLabel onto it).
func (c *Controller) create(ctx context.Context, key Key) (*hostpathv1.HostDefinition, error) {
	def := &hostpathv1.HostDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.Name(key.Node, key.Pool)},
		Spec:       hostpathv1.HostDefinitionSpec{NodeName: key.Node, Pool: key.Pool},
	}
	created, err := c.hostpath.HostpathV1().HostDefinitions().Create(ctx, def, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create HostDefinition %q: %w", def.Name, err)
	}
	klog.FromContext(ctx).Info("Created a HostDefinition", "hostDefinition", created.Name)
	return created, nil
}

// copyLabel sets the definition's AvoidDeletionLabel to value, the
// node's (removes it when empty), so that it still guards the definition
// once the Node is gone.
func (c *Controller) copyLabel(ctx context.Context, def *hostpathv1.HostDefinition, value string) (*hostpathv1.HostDefinition, error) {
	def = def.DeepCopy()
	if value == "" {
		delete(def.Labels, hostpathv1.AvoidDeletionLabel)
	} else {
		if def.Labels == nil {
			def.Labels = map[string]string{}
		}
		def.Labels[hostpathv1.AvoidDeletionLabel] = value
	}
	updated, err := c.hostpath.HostpathV1().HostDefinitions().Update(ctx, def, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("copy the label %s of the node onto HostDefinition %q: %w", hostpathv1.AvoidDeletionLabel, def.Name, err)
	}
	return updated, nil
}

// multihostVolume is what the host definer reads of a multihost PV.
type multihostVolume struct {
	pv              *v1.PersistentVolume
	pool, directory string
	nodes, pending  []string
}

// holds says whether the PV lists node among the nodes with its directory.
func (m multihostVolume) holds(node string) bool { return slices.Contains(m.nodes, node) }

// multihostVolumeOf reads a multihost PV of the provisioner that is not
// being deleted; false for anything else.
func multihostVolumeOf(pv *v1.PersistentVolume, provisioner hostpathv1.ProvisionerNames) (multihostVolume, bool) {
	d, ok := hostpathv1.MultihostDirectoryOf(pv, provisioner)
	if !ok || pv.DeletionTimestamp != nil || pv.Status.Phase == v1.VolumeReleased || pv.Status.Phase == v1.VolumeFailed {
		return multihostVolume{}, false
	}
	m := multihostVolume{pv: pv, pool: d.Pool, directory: d.Directory, nodes: d.Nodes, pending: d.PendingNodes}
	if managerapi.ValidatePoolName(m.pool) != nil || managerapi.ValidateVolumeName(m.directory) != nil {
		return multihostVolume{}, false
	}
	return m, true
}

// multihostVolumes returns the multihost volumes of pool.
func (c *Controller) multihostVolumes(pool string) ([]multihostVolume, error) {
	pvs, err := byIndex[*v1.PersistentVolume](c.volumeIndex, volumePoolIndex, pool)
	if err != nil {
		return nil, fmt.Errorf("multihost PersistentVolumes: %w", err)
	}
	var out []multihostVolume
	for _, pv := range pvs {
		if m, ok := multihostVolumeOf(pv, c.cfg.ProvisionerNames); ok && m.pool == pool {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b multihostVolume) int { return strings.Compare(a.pv.Name, b.pv.Name) })
	return out, nil
}
