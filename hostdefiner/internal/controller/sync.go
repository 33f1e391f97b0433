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

	"hostpath.dev/hostdefiner/internal/placement"
	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/manager/pkg/component"
)

// Sync brings the definition of key in line with the cluster: creates,
// defines, verifies or undefines it.
func (c *Controller) Sync(ctx context.Context, key Key) error {
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "node", key.Node, "pool", key.Pool))
	def, err := c.definitions.Get(hostpathv1.Name(key.Node, key.Pool))
	switch {
	case apierrors.IsNotFound(err):
		def = nil
	case err != nil:
		return fmt.Errorf("get the HostDefinition from the cache: %w", err)
	case def.Spec.NodeName != key.Node || def.Spec.Pool != key.Pool:
		return fmt.Errorf("HostDefinition %q is for node %q and pool %q, not %s", def.Name, def.Spec.NodeName, def.Spec.Pool, key)
	}
	node, err := c.nodes.Get(key.Node)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get the Node from the cache: %w", err)
	}
	if err != nil {
		node = nil
	}
	stay, why, err := c.wanted(node, key, def != nil)
	if err != nil || why.unknown {
		return err
	}
	if !stay {
		if def == nil {
			return nil
		}
		return c.undefine(ctx, def, node, why)
	}
	if def == nil {
		if def, err = c.create(ctx, key); err != nil {
			return err
		}
	}
	if def, err = c.syncLabels(ctx, def, node); err != nil {
		return err
	}
	return c.define(ctx, def)
}

// leaving says why a node is not (or no longer) wanted for a pool.
type leaving struct {
	reason, message string
	// unknown: the manager DaemonSet is missing, so nothing is decided.
	unknown bool
}

// Reasons a node leaves a pool.
const (
	ReasonNodeDeleted   = "NodeDeleted"
	ReasonNoClass       = "NoStorageClass"
	ReasonNoDaemonSet   = "NoManagerDaemonSet"
	leaveReasonNewNode  = "NotScheduled"
	defaultLeaveMessage = "the manager DaemonSet does not run on the node"
)

// wanted decides whether the node should have a definition of the pool;
// exists says whether it has one (an existing one stays while the
// DaemonSet would keep its pod, a new one needs the DaemonSet to start a
// pod or a manager pod to be there).
func (c *Controller) wanted(node *v1.Node, key Key, exists bool) (bool, leaving, error) {
	pools, err := c.pools()
	if err != nil {
		return false, leaving{}, err
	}
	if _, ok := pools[key.Pool]; !ok {
		return false, leaving{reason: ReasonNoClass, message: fmt.Sprintf(
			"no StorageClass of the provisioner (%s) names pool %q any more", c.cfg.ProvisionerNames, key.Pool)}, nil
	}
	if node == nil {
		return false, leaving{reason: ReasonNodeDeleted, message: fmt.Sprintf("Node %q was deleted", key.Node)}, nil
	}
	ds, err := c.daemonSets.Get(c.cfg.ManagerDaemonSet)
	if apierrors.IsNotFound(err) {
		return false, leaving{unknown: true}, nil
	}
	if err != nil {
		return false, leaving{}, fmt.Errorf("get the manager DaemonSet from the cache: %w", err)
	}
	if exists {
		d := placement.ShouldRun(ds, node)
		return d.Runs, leaving{reason: d.Reason, message: d.Message}, nil
	}
	if d := placement.ShouldSchedule(ds, node); d.Runs {
		return true, leaving{}, nil
	}
	// A manager pod the DaemonSet would not keep (being evicted or deleted)
	// must not bring back the definition an existing one would lose.
	if d := placement.ShouldRun(ds, node); !d.Runs {
		return false, leaving{reason: d.Reason, message: d.Message}, nil
	}
	pod, err := c.managerPod(key.Node, false)
	if err != nil {
		return false, leaving{}, err
	}
	return pod != nil, leaving{reason: leaveReasonNewNode, message: defaultLeaveMessage}, nil
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
	return pool, client.ValidatePoolName(pool) == nil
}

// managerPod returns the manager pod on node that is not terminating (that
// also serves, when serving), or nil.
func (c *Controller) managerPod(node string, serving bool) (*v1.Pod, error) {
	pods, err := byIndex[*v1.Pod](c.podIndex, hostpathv1.NodeNameIndex, node)
	if err != nil {
		return nil, fmt.Errorf("manager pods: %w", err)
	}
	for _, p := range pods {
		if p.Namespace != c.namespace || !c.cfg.ManagerSelector.Matches(labels.Set(p.Labels)) || p.DeletionTimestamp != nil {
			continue
		}
		if !serving || (p.Status.PodIP != "" && component.PodServing(p)) {
			return p, nil
		}
	}
	return nil, nil
}

// create makes the definition of key (syncLabels then copies the node's
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

// syncLabels copies the node's AvoidDeletionLabel onto the definition, so
// that it still guards the definition once the Node is gone.
func (c *Controller) syncLabels(ctx context.Context, def *hostpathv1.HostDefinition, node *v1.Node) (*hostpathv1.HostDefinition, error) {
	want := node.Labels[hostpathv1.AvoidDeletionLabel]
	if def.Labels[hostpathv1.AvoidDeletionLabel] == want {
		return def, nil
	}
	def = def.DeepCopy()
	if want == "" {
		delete(def.Labels, hostpathv1.AvoidDeletionLabel)
	} else {
		if def.Labels == nil {
			def.Labels = map[string]string{}
		}
		def.Labels[hostpathv1.AvoidDeletionLabel] = want
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
	if client.ValidatePoolName(m.pool) != nil || client.ValidateVolumeName(m.directory) != nil {
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
