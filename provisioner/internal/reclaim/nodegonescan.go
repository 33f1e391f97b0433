package reclaim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/responsibility"
)

// The scan for the node-mode PVs of deleted Nodes that no cache holds.
//
// An instance does not cache a Bound node-mode PV of another node whose
// Node exists and that is not marked (package app's cachetrim: only that
// node's instance acts for it). When such a Node is deleted, its instance
// goes with it, and no cache holds its Bound PVs: the mark of step 1 above
// would never come. So one instance, elected for goneScanKey, lists the PVs
// on the API server, page by page, and marks (markNodeGone) each Bound,
// unmarked node-mode PV of this provisioner that its own cache does not
// hold and whose Node the API server says is gone (Config.Nodes). The
// mark changes the PV, and every instance's cache takes it in at that
// update: from then on the steps above go as for any PV. It scans once its
// caches have synced, when an instance leaves a node whose Node is gone
// (NodeLeft: the pods of a deleted Node are deleted with it), and every
// goneScanPeriod (a Node deleted with no instance on it, or while no
// instance ran), only with a grace period.

// goneScanKey is the key the scanning instance is elected for.
const goneScanKey = "node-gone-scan"

// goneScanPeriod is the time between two scans without a deleted Node.
const goneScanPeriod = 30 * time.Minute

// goneScanPageSize is the number of PVs per page of a scan's list.
const goneScanPageSize = 500

// scans reports whether this instance is the one that scans: the node-gone
// handling of goneScanKey (responsibility.MarkNodeGone).
func (c *Controller) scans() (bool, error) {
	a, err := c.rule.Acts(responsibility.MarkNodeGone, responsibility.Object{Key: goneScanKey})
	return a.Acts, err
}

// triggerGoneScan asks for a scan now; triggers that come while one is
// pending are merged.
func (c *Controller) triggerGoneScan() {
	select {
	case c.scan <- struct{}{}:
	default:
	}
}

// runGoneScans scans once the caches synced, then every goneScanPeriod and
// when triggered by an instance leaving a node whose Node is gone
// (suspectGone), until ctx is done; it does nothing without a grace
// period.
func (c *Controller) runGoneScans(ctx context.Context) {
	if c.cfg.NodeGoneGrace <= 0 || !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	ticker := time.NewTicker(goneScanPeriod)
	defer ticker.Stop()
	for scan := true; ; {
		if scan {
			if err := c.scanGoneNodes(ctx); err != nil {
				utilruntime.HandleErrorWithContext(ctx, err, "Failed to scan for the PersistentVolumes of deleted Nodes")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			scan = true
		case <-c.scan:
			scan = c.suspectGone()
		}
	}
}

// suspectGone takes the nodes that instances left since it was last
// called and, on the instance elected to scan, reports whether one of
// their Nodes is gone (or cannot be looked up): an instance's pod also
// goes in a rollout, and a scan lists every PV.
func (c *Controller) suspectGone() bool {
	c.mu.Lock()
	suspects := c.suspects
	c.suspects = map[string]bool{}
	c.mu.Unlock()
	if scans, err := c.scans(); err != nil || !scans {
		return err != nil
	}
	for node := range suspects {
		if exists, err := c.nodes.Exists(node); err != nil || !exists {
			return true
		}
	}
	return false
}

// nodeCheckPeriod is the time between two checks of the nodes that run no
// instance (checkNodesWithoutInstance).
const nodeCheckPeriod = 15 * time.Second

// runNodeChecks checks the nodes that run no instance every
// nodeCheckPeriod once the caches synced, until ctx is done; it does
// nothing without a grace period.
func (c *Controller) runNodeChecks(ctx context.Context) {
	if c.cfg.NodeGoneGrace <= 0 || !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	wait.UntilWithContext(ctx, func(context.Context) { c.checkNodesWithoutInstance() }, nodeCheckPeriod)
}

// checkNodesWithoutInstance queues the cached node-mode PVs, not under
// deletion, of the other nodes that run no instance and for which this
// instance is elected, once it has forgotten what it knew of those nodes.
// The deletion of a Node that runs an instance is told by its pod's
// (NodeLeft); of one that runs none (a control-plane node, a node the
// DaemonSet leaves out, a Node without a kubelet) nothing tells, and no
// instance watches every Node. So the instance elected for each such PV
// asks the API server about its node every nodeCheckPeriod (the sync, one
// GET per node a round), and marks the PV once the Node is gone. Every
// instance caches these PVs: they are not settled (cachetrim.Keep).
func (c *Controller) checkNodesWithoutInstance() {
	pvs, err := c.volumes.List(labels.Everything())
	if err != nil {
		return
	}
	forgotten := map[string]bool{}
	for _, pv := range pvs {
		loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
		if !ok || loc.Multihost || loc.Node == "" || loc.Node == c.cfg.Node || pv.DeletionTimestamp != nil {
			continue
		}
		if running, err := c.rule.Served(loc.Node); err != nil || running {
			continue
		}
		if a, err := c.rule.Acts(responsibility.MarkNodeGone, objectOf(pv, loc)); err != nil || !a.Acts {
			continue
		}
		if !forgotten[loc.Node] {
			c.nodes.Forget(loc.Node)
			forgotten[loc.Node] = true
		}
		c.queue.Add(pv.Name)
	}
}

// scanGoneNodes is one scan, on the elected instance only: it marks the
// PVs described above and returns the first error (a page that failed, a
// mark that failed) after trying every PV.
func (c *Controller) scanGoneNodes(ctx context.Context) error {
	scans, err := c.scans()
	if err != nil || !scans {
		return err
	}
	var (
		marked int
		first  error
		// gone holds the answer for each Node asked about in this scan:
		// a deleted Node's PVs come many to a page.
		gone = map[string]bool{}
	)
	list := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.cfg.Client.CoreV1().PersistentVolumes().List(ctx, opts)
	}))
	list.PageSize = goneScanPageSize
	err = list.EachListItemWithAlloc(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return nil
		}
		done, err := c.markUncached(ctx, pv, gone)
		if done {
			marked++
		}
		if err != nil && first == nil {
			first = err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list PersistentVolumes: %w", err)
	}
	if marked > 0 {
		klog.FromContext(ctx).Info("Marked the PersistentVolumes of deleted Nodes that no cache held", "marked", marked)
	}
	return first
}

// markUncached marks pv, listed from the API server, when it is a Bound,
// unmarked node-mode PV of this provisioner that the cache does not hold
// and whose Node is gone (nodeGone, answers kept in gone); it reports
// whether it marked it. A PV that changed since the list (a conflict) is
// left to the caches that take it in, or to the next scan.
func (c *Controller) markUncached(ctx context.Context, pv *v1.PersistentVolume, gone map[string]bool) (bool, error) {
	loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
	if !ok || loc.Multihost || loc.Node == "" || pv.DeletionTimestamp != nil || pv.Status.Phase != v1.VolumeBound {
		return false, nil
	}
	if _, marked := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]; marked {
		return false, nil
	}
	if _, err := c.volumes.Get(pv.Name); err == nil {
		return false, nil // cached: the steps above look after it
	}
	isGone, asked := gone[loc.Node]
	if !asked {
		var err error
		if isGone, err = c.nodeGone(loc.Node); err != nil {
			return false, err
		}
		gone[loc.Node] = isGone
	}
	if !isGone {
		return false, nil
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pv", klog.KObj(pv))
	err := c.markNodeGone(klog.NewContext(ctx, logger), pv, loc.at(loc.Node), c.clock.Now())
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err):
		return false, nil
	}
	return false, err
}
