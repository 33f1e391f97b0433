package reclaim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// An instance watches only the PVs of its own node, the multihost ones and
// those marked as of a gone node (hostpathv1.WatchSelector), so no other
// instance caches the PVs of a node until they are marked. When a Node is
// deleted, its instance goes with it, and no cache holds its PVs: the mark
// of step 1 above would never come. So one instance, elected for
// goneScanKey, lists the PVs on the API server, page by page, and marks
// (markNodeGone) each unmarked node-mode PV of this provisioner, of any
// phase, that its own cache does not hold and whose Node the API server
// says is gone (Config.Nodes). The mark sets the watch label NodeGone,
// and every instance's cache takes the PV in at that update: from then on
// the steps above go as for any PV. It scans once its caches have synced,
// when a suspect's Node is gone, and every Config.NodeGoneScan, only with a
// grace period.
//
// The suspects are the nodes an instance left (NodeLeft: the pods of a
// deleted Node are deleted with it, and an instance's pod also goes in a
// rollout) and, found by a scan, the nodes of PVs whose Node exists but
// runs no instance (a node the DaemonSet no longer covers). Every
// nodeCheckPeriod, the scanning instance asks the API server whether each
// suspect's Node is still there (one GET a suspect) and scans when one is
// gone; a suspect whose instance is back, or whose Node is gone, is
// dropped.

// goneScanKey is the key the scanning instance is elected for.
const goneScanKey = "node-gone-scan"

// DefaultGoneScanPeriod is the time between two scans without a deleted
// Node (Config.NodeGoneScan): one paged list of every PV on one instance.
const DefaultGoneScanPeriod = 10 * time.Minute

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

// runGoneScans scans once the caches synced, then every Config.NodeGoneScan and
// when triggered by an instance leaving a node whose Node is gone
// (suspectGone), until ctx is done; it does nothing without a grace
// period.
func (c *Controller) runGoneScans(ctx context.Context) {
	if c.cfg.NodeGoneGrace <= 0 || !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	period := c.cfg.NodeGoneScan
	if period <= 0 {
		period = DefaultGoneScanPeriod
	}
	ticker := time.NewTicker(period)
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

// suspectGone reports, on the instance elected to scan, whether the Node
// of a suspect is gone (or cannot be looked up). It drops the suspects
// that run an instance again, and, on the scanning instance, those whose
// Node is gone (the scan it asks for marks their PVs).
func (c *Controller) suspectGone() bool {
	scans, err := c.scans()
	if err != nil {
		return true
	}
	gone := false
	for _, node := range c.suspectList() {
		if served, err := c.rule.Served(node); err == nil && served {
			c.dropSuspect(node)
			continue
		}
		if !scans {
			continue
		}
		exists, err := c.nodes.Exists(node)
		if err != nil || !exists {
			gone = true
		}
		if err == nil && !exists {
			c.dropSuspect(node)
		}
	}
	return gone
}

// addSuspect keeps node among the suspects.
func (c *Controller) addSuspect(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.suspects[node] = true
}

// dropSuspect drops node from the suspects.
func (c *Controller) dropSuspect(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.suspects, node)
}

// suspectList returns the suspects.
func (c *Controller) suspectList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.suspects))
}

// nodeCheckPeriod is the time between two checks of the suspects.
const nodeCheckPeriod = 15 * time.Second

// runNodeChecks checks the suspects every nodeCheckPeriod once the caches
// synced, until ctx is done; it does nothing without a grace period. The
// deletion of a Node that runs no instance is told by nothing (no
// instance watches every Node), so the check asks the API server anew
// (nodes.Lookup.Forget) each time.
func (c *Controller) runNodeChecks(ctx context.Context) {
	if c.cfg.NodeGoneGrace <= 0 || !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		suspects := c.suspectList()
		for _, node := range suspects {
			c.nodes.Forget(node)
		}
		if len(suspects) > 0 {
			c.triggerGoneScan()
		}
	}, nodeCheckPeriod)
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

// markUncached marks pv, listed from the API server, when it is an
// unmarked node-mode PV of this provisioner that the cache does not hold
// and whose Node is gone (nodeGone, answers kept in gone); it reports
// whether it marked it. A PV whose Node exists but runs no instance makes
// its node a suspect. A PV that changed since the list (a conflict) is
// left to the caches that take it in, or to the next scan.
func (c *Controller) markUncached(ctx context.Context, pv *v1.PersistentVolume, gone map[string]bool) (bool, error) {
	loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
	if !ok || loc.Multihost || loc.Node == "" {
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
		if served, err := c.rule.Served(loc.Node); err == nil && !served {
			c.addSuspect(loc.Node)
		}
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
