package reclaim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// Node-mode PVs of a deleted Node (Config.NodeGoneGrace, off when 0). A
// directory lives on its node's disk, so once the Node object is deleted
// nothing can reach it, and the library cannot reclaim a Released PV of
// that node (every instance's Delete leaves it to the node's instance,
// which is gone, and the rule of who acts gives the library's Delete of
// such a PV to nobody): without help such PVs stay forever. With a grace
// period, the instance elected for the PV's UID (responsibility.MarkNodeGone;
// its steps are decided by nodeGoneStep, carried out by doNodeGone):
//
//  1. marks the PV with hostpathv1.AnnotationNodeGoneSince, the time it first saw the
//     Node missing, and emits a Warning event NodeGone saying what will
//     happen (nothing but this mark while the PV is Bound or Retain);
//  2. when the Node is back (a node that re-registers under the same name),
//     removes the mark: its directory may be there again;
//  3. once the Node has been missing for the grace period, deletes a PV
//     with reclaim policy Delete that is not Bound (Released, Available,
//     Failed) with a Warning event VolumeDeleted saying that the directory
//     went with the node; the finalizer then comes off as for any PV of a
//     gone node (the final state: the gone node is skipped, with a
//     Warning DirectoryNotRemoved). A Bound PV is never deleted (its
//     claim is the user's to delete; it is deleted after the grace period
//     once Released), and a Retain PV stays, marked.
//
// Only the absence of the Node object counts: a node that is NotReady,
// cordoned, rebooting or undefined by the host definer keeps its Node, and
// its PVs are never touched.

// Reasons of the events about PVs of a deleted Node.
const (
	// ReasonNodeGone (Warning, on the PV): the PV's Node is missing; the
	// message says what will happen to the PV.
	ReasonNodeGone = "NodeGone"
	// ReasonVolumeDeleted (Warning, on the PV): the PV of a Node missing
	// for longer than the grace period was deleted.
	ReasonVolumeDeleted = "VolumeDeleted"
)

// nodeGoneWork says whether a node-mode PV not under deletion needs the
// node-gone handling: it is on, and the PV's node is missing or the PV is
// marked.
func (c *Controller) nodeGoneWork(pv *v1.PersistentVolume, dir directory) bool {
	if c.cfg.NodeGoneGrace <= 0 || dir.node == "" {
		return false
	}
	if _, marked := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]; marked {
		return true
	}
	exists, err := c.nodes.Exists(dir.node)
	return err == nil && !exists
}

// NodeJoined is told that an instance came to node (its pod was added):
// the Node may be back. It queues the PVs marked as of a gone node of that
// name, to remove the mark.
func (c *Controller) NodeJoined(node string) {
	c.nodes.Forget(node)
	if c.cfg.NodeGoneGrace <= 0 {
		return
	}
	pvs, err := c.volumes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pv := range pvs {
		if _, marked := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]; marked && pv.Annotations[hostpathv1.AnnotationNode] == node {
			c.queue.Add(pv.Name)
		}
	}
}

// NodeLeft is told that an instance left node (its pod was deleted, as it
// is when its Node is): the Node may be gone. It queues the cached PVs of
// that node, so the elected instance releases those under deletion at
// once and marks the others, and asks for a scan of the API server for
// those no cache holds (nodegonescan.go), which runs if the Node is gone.
func (c *Controller) NodeLeft(node string) {
	c.nodes.Forget(node)
	if c.cfg.NodeGoneGrace > 0 {
		c.addSuspect(node)
		c.triggerGoneScan()
	}
	pvs, err := c.volumes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pv := range pvs {
		if loc, ok := locationOf(pv, c.cfg.ProvisionerNames); ok && (loc.Node == node || loc.Multihost && loc.Listed(node)) {
			c.volumeChanged(pv)
		}
	}
}

// doNodeGone carries out a step of the node-gone handling (nodeGoneStep)
// on the PV of f; more says that the pass decides again on f: after
// the mark is removed, on the PV without it.
func (c *Controller) doNodeGone(ctx context.Context, f *Facts, step Step) (more bool, err error) {
	pv, dir := f.PV, f.Loc.at(f.Loc.Node)
	switch step.Action {
	case ActMarkNodeGone:
		return false, c.markNodeGone(ctx, pv, dir, f.Now)
	case ActUnmarkNodeGone:
		if err := c.unmarkNodeGone(ctx, pv, dir); err != nil {
			return false, err
		}
		f.PV = pv.DeepCopy()
		delete(f.PV.Annotations, hostpathv1.AnnotationNodeGoneSince)
		return true, nil
	case ActDeleteNodeGone:
		return false, c.deleteNodeGone(ctx, pv, dir, step.Since)
	}
	return false, fmt.Errorf("PersistentVolume %q: no such step %q", pv.Name, step.Action)
}

// markNodeGone records on the PV when its node was first seen missing, and
// says what will happen.
func (c *Controller) markNodeGone(ctx context.Context, pv *v1.PersistentVolume, dir directory, now time.Time) error {
	stamp := now.UTC().Format(time.RFC3339)
	if err := c.patchNodeGone(ctx, pv, &stamp); err != nil {
		return err
	}
	deadline := now.Add(c.cfg.NodeGoneGrace).UTC().Format(time.RFC3339)
	var what string
	switch {
	case pv.DeletionTimestamp != nil:
		what = "the PersistentVolume is being deleted: it goes without its directory"
	case pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete:
		what = fmt.Sprintf("reclaim policy %s: the PersistentVolume stays; delete it by hand once the data is given up", pv.Spec.PersistentVolumeReclaimPolicy)
	case pv.Status.Phase == v1.VolumeBound:
		what = fmt.Sprintf("the PersistentVolume is deleted once its claim is, if the node is still gone after %s (the --node-gone-grace-period)", deadline)
	default:
		what = fmt.Sprintf("unless the node comes back, the PersistentVolume is deleted at %s (--node-gone-grace-period %s)", deadline, c.cfg.NodeGoneGrace)
	}
	c.cfg.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonNodeGone, "Node %q, which holds the %s, no longer exists; %s", dir.node, dir, what)
	klog.FromContext(ctx).Info("Marked a PersistentVolume whose node is gone", "node", dir.node, "since", stamp)
	c.queue.AddAfter(pv.Name, c.cfg.NodeGoneGrace)
	return nil
}

// unmarkNodeGone removes the mark of a PV whose node is back.
func (c *Controller) unmarkNodeGone(ctx context.Context, pv *v1.PersistentVolume, dir directory) error {
	if err := c.patchNodeGone(ctx, pv, nil); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Node of a PersistentVolume marked gone is back: mark removed", "node", dir.node)
	return nil
}

// patchNodeGone sets hostpathv1.AnnotationNodeGoneSince to *since, or
// removes it when since is nil, and the watch label with it
// (hostpathv1.VolumeNodeLabel): NodeGone brings a marked PV into every
// instance's watch, as the elected one releases or deletes it, and the
// node's name takes it back to its node's instance alone.
func (c *Controller) patchNodeGone(ctx context.Context, pv *v1.PersistentVolume, since *string) error {
	next := pv.DeepCopy()
	delete(next.Annotations, hostpathv1.AnnotationNodeGoneSince)
	if since != nil {
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, hostpathv1.AnnotationNodeGoneSince, *since)
	}
	label := hostpathv1.VolumeNodeLabel(next)
	return patchMetadata(ctx, c.cfg.Client, pv, c.cfg.FieldManager,
		map[string]*string{hostpathv1.AnnotationNodeGoneSince: since}, map[string]*string{hostpathv1.LabelNode: &label})
}

// deleteNodeGone deletes a PV whose node has been missing since since,
// longer than the grace period.
func (c *Controller) deleteNodeGone(ctx context.Context, pv *v1.PersistentVolume, dir directory, since time.Time) error {
	uid := pv.UID
	err := c.cfg.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another PV under that name now
	}
	if err != nil {
		return fmt.Errorf("delete PersistentVolume %q of gone node %q: %w", pv.Name, dir.node, err)
	}
	c.cfg.Recorder.Eventf(pv, v1.EventTypeWarning, ReasonVolumeDeleted,
		"Deleted the PersistentVolume: node %q has been gone since %s, longer than --node-gone-grace-period %s; the %s went with the node",
		dir.node, since.UTC().Format(time.RFC3339), c.cfg.NodeGoneGrace, dir)
	klog.FromContext(ctx).Info("Deleted a PersistentVolume of a gone node", "node", dir.node, "since", since)
	return nil
}
