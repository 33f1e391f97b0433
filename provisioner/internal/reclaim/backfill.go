package reclaim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/client"
)

// Backfill: a multihost PV lists the nodes that got its directory when it
// was made (annotations.Nodes) and those whose manager was away (annotations.PendingNodes).
// Each instance's Sweeper makes the missing directories of its own node at
// every sweep, so a node whose manager was off at creation, or a node
// defined after it, gets them once its manager answers. The host definer is
// to take this over (it defines nodes, so it knows when one joins); until
// then the Sweeper does it.
//
// A node that gained a directory is not written back into the PV's
// annotations: backfill makes no API write. The reclaim Controller deletes
// on every node whose manager can be found, not only on the listed ones,
// and the directory's owner record carries the PV's reclaim policy, so the
// Sweeper removes a leftover by that policy.

// StorageClass parameter read for the mode of a backfilled directory, and
// its default: the same as the provisioner's ParamDirMode and
// DefaultDirMode (not imported: package provisioner is the other side of
// this one).
const (
	paramDirMode = "dirMode"
	// DefaultBackfillMode is the mode of a backfilled directory whose
	// StorageClass is gone or names no valid dirMode.
	DefaultBackfillMode = "0777"
)

// backfillCandidates returns the multihost PVs of this provisioner, not
// being deleted, that name a pool and a directory: those whose directory
// every node should hold.
func (s *Sweeper) backfillCandidates() ([]*v1.PersistentVolume, error) {
	pvs, err := s.volumes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes from the cache: %w", err)
	}
	var out []*v1.PersistentVolume
	for _, pv := range pvs {
		d, ok := multihostDirectory(pv, s.cfg.ProvisionerName)
		if !ok || pv.DeletionTimestamp != nil || d.pool == "" || client.ValidateVolumeName(d.name) != nil {
			continue
		}
		out = append(out, pv)
	}
	slices.SortFunc(out, func(a, b *v1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// backfill creates, in pool on this node, the directory of every PV of pvs
// (backfillCandidates) in that pool that list, the pool's volumes, lacks:
// owned by the PV, with its class's dirMode and its reclaim policy. A
// directory that exists is left as it is, whoever owns it. It returns the
// failures.
func (s *Sweeper) backfill(ctx context.Context, mgr Manager, pool string, list *client.VolumeList, pvs []*v1.PersistentVolume, counts *sweepCounts) []error {
	var errs []error
	for _, pv := range pvs {
		d, _ := multihostDirectory(pv, s.cfg.ProvisionerName)
		if d.pool != pool || slices.ContainsFunc(list.Items, func(v client.Volume) bool { return v.Name == d.name }) {
			continue
		}
		req := client.CreateVolumeRequest{Owner: pv.Name, Mode: s.dirMode(pv), ReclaimPolicy: reclaimPolicy(pv)}
		if _, err := mgr.CreateVolume(ctx, pool, d.name, req); err != nil {
			errs = append(errs, fmt.Errorf("backfill the directory of multihost PersistentVolume %q: %s: %w", pv.Name, d.onNode(s.cfg.Node), err))
			continue
		}
		counts.created++
		klog.FromContext(ctx).Info("Backfilled the directory of a multihost PersistentVolume",
			"pv", klog.KObj(pv), "pool", pool, "directory", d.name, "mode", req.Mode, "reclaimPolicy", req.ReclaimPolicy)
	}
	return errs
}

// dirMode returns the dirMode parameter of pv's StorageClass, or
// DefaultBackfillMode when the class cannot be read or its value is not a
// valid mode (the provisioner refuses such classes anyway).
func (s *Sweeper) dirMode(pv *v1.PersistentVolume) string {
	if s.classes == nil || pv.Spec.StorageClassName == "" {
		return DefaultBackfillMode
	}
	class, err := s.classes.Get(pv.Spec.StorageClassName)
	if err != nil {
		return DefaultBackfillMode
	}
	v, ok := class.Parameters[paramDirMode]
	if !ok || v == "" {
		return DefaultBackfillMode
	}
	mode, err := client.ParseMode(v)
	if err != nil {
		return DefaultBackfillMode
	}
	return client.FormatMode(mode)
}
