package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
)

// shared is where a multihost PV's data lives: the same directory of the
// same pool on every node, listed in annotations.Nodes (made at creation,
// or given since by the host definer) and annotations.PendingNodes (still
// to get it from the host definer).
type shared struct {
	pool, name     string
	nodes, pending []string
}

// multihostDirectory returns the directory of pv, and false when pv is not a
// multihost volume of provisioner.
func multihostDirectory(pv *v1.PersistentVolume, provisioner string) (shared, bool) {
	m, ok := hostpathv1.MultihostDirectoryOf(pv, provisioner)
	if !ok {
		return shared{}, false
	}
	return shared{pool: m.Pool, name: m.Directory, nodes: m.Nodes, pending: m.PendingNodes}, true
}

// listed reports whether the PV names node in annotations.Nodes or
// annotations.PendingNodes.
func (d shared) listed(node string) bool {
	return slices.Contains(d.nodes, node) || slices.Contains(d.pending, node)
}

// syncMultihost reclaims a multihost PV under deletion, on the one instance
// elected for its UID: a backstop behind the provisioning side's Delete,
// which fans out first, and the only path when the PV is deleted by hand.
func (c *Controller) syncMultihost(ctx context.Context, pv *v1.PersistentVolume, d shared) error {
	if pv.DeletionTimestamp == nil || !hasFinalizer(pv) {
		return nil
	}
	logger := klog.FromContext(ctx)
	if pv.Status.Phase == v1.VolumeBound {
		logger.V(4).Info("Waiting for the claim to release the PersistentVolume before reclaiming its directories")
		return nil
	}
	elected, err := c.cfg.Instances.IsOwner(string(pv.UID))
	if err != nil {
		return fmt.Errorf("elect the instance for the PersistentVolume: %w", err)
	}
	if !elected {
		return nil
	}
	if d.pool == "" || d.name == "" {
		return c.finish(ctx, pv, release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The PersistentVolume names no pool or directory (annotations %s, %s): nothing was removed",
			annotations.Pool, annotations.Directory)))
	}
	targets, err := c.multihostTargets(d)
	if err != nil {
		return err
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		return c.finish(ctx, pv, c.deleteEverywhere(ctx, pv, d, targets))
	}
	return c.finish(ctx, pv, c.retainEverywhere(ctx, pv, d, targets))
}

// target is a node that may hold a multihost directory, with its manager
// (nil when none can be found).
type target struct {
	node string
	mgr  Manager
	// required is set for a node the PV lists that still exists: the
	// directory must be reclaimed there before the finalizer goes.
	required bool
	// findErr is why no manager was found.
	findErr error
}

// multihostTargets returns, sorted, the nodes that may hold d: the nodes the
// PV lists that still exist (required, manager or not), and every other node
// whose manager can be found (the host definer may have given it the
// directory and not recorded it on the PV yet). A listed node that is gone
// for good and has no manager is skipped.
func (c *Controller) multihostTargets(d shared) ([]target, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes from the cache: %w", err)
	}
	names := append(slices.Clone(d.nodes), d.pending...)
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
		names = append(names, n.Name)
	}
	slices.Sort(names)
	var targets []target
	for _, node := range slices.Compact(names) {
		t := target{node: node, required: exists[node] && d.listed(node)}
		t.mgr, t.findErr = c.cfg.Managers(node)
		if t.findErr != nil && !t.required {
			continue
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// deleteEverywhere deletes d, as pv, on every target, one after the other.
// A missing directory or pool is done; a directory of another owner is left
// alone. Any other failure on a target, or a required target without a
// manager, retries the PV with an event naming the nodes still pending.
func (c *Controller) deleteEverywhere(ctx context.Context, pv *v1.PersistentVolume, d shared, targets []target) outcome {
	logger := klog.FromContext(ctx)
	var (
		pending []string
		errs    []error
		done    int
	)
	for _, t := range targets {
		err := t.findErr
		if err == nil {
			err = t.mgr.DeleteVolume(ctx, d.pool, d.name, client.DeleteOptions{Owner: pv.Name})
		} else {
			err = fmt.Errorf("find the manager: %w", err)
		}
		switch client.ReasonOf(err) {
		case "":
			if err == nil {
				done++
				continue
			}
		case client.ReasonNotFound:
			done++
			continue
		case client.ReasonOwnerConflict:
			logger.Info("Left a directory of another owner in place", "node", t.node, "owner", ownerOf(err))
			done++
			continue
		}
		pending = append(pending, t.node)
		errs = append(errs, fmt.Errorf("node %q: %w", t.node, err))
	}
	if len(pending) > 0 {
		err := errors.Join(errs...)
		return outcome{err: fmt.Errorf("remove directory %q in pool %q: %w", d.name, d.pool, err),
			eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved,
			message: fmt.Sprintf("Failed to remove directory %q in pool %q on nodes %s (will retry): %v",
				d.name, d.pool, strings.Join(pending, ", "), err)}
	}
	return release(v1.EventTypeNormal, ReasonDirectoryRemoved, fmt.Sprintf(
		"Removed directory %q in pool %q on %d nodes", d.name, d.pool, done))
}

// retainEverywhere marks d retained on every target that has a manager, best
// effort: a failure is logged and the finalizer goes all the same (a
// directory not marked retained is still never removed while its record
// says Retain, and one without a policy only when empty).
func (c *Controller) retainEverywhere(ctx context.Context, pv *v1.PersistentVolume, d shared, targets []target) outcome {
	logger := klog.FromContext(ctx)
	marked := 0
	for _, t := range targets {
		if t.findErr != nil {
			logger.Info("Cannot mark a directory retained: no manager", "node", t.node, "err", t.findErr)
			continue
		}
		_, err := t.mgr.SetOwner(ctx, d.pool, d.name, client.SetOwnerRequest{Owner: pv.Name, Previous: pv.Name, Retained: true})
		switch reason := client.ReasonOf(err); {
		case err == nil:
			marked++
		case reason == client.ReasonNotFound || reason == client.ReasonOwnerConflict:
			logger.V(2).Info("No directory of this PersistentVolume to mark retained", "node", t.node, "err", err)
		default:
			logger.Error(err, "Cannot mark a directory retained", "node", t.node)
		}
	}
	return release(v1.EventTypeNormal, ReasonDirectoryRetained, fmt.Sprintf(
		"Directory %q in pool %q keeps its data on %d nodes, marked retained: remove it by hand when done", d.name, d.pool, marked))
}

// multihostOnNode reports whether pv is a multihost PV of provisioner that
// lists node.
func multihostOnNode(pv *v1.PersistentVolume, provisioner, node string) bool {
	d, ok := multihostDirectory(pv, provisioner)
	return ok && d.listed(node)
}
