package provisioner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
)

// Adopt writes the owner record of a volume's directory that has none
// (made before the manager kept owner records): it makes pv, a node-mode PV
// of this node provisioned by this provisioner, the owner. It adopts only
// when pv is the one PV whose annotations name the directory; when two or
// more do (claims that shared a directory), it adopts none and says so, as
// deleting either would delete the other's data. Other PVs, a directory that
// is gone, and one pv already owns are left as they are. Adopt is
// idempotent.
func (p *Provisioner) Adopt(ctx context.Context, pv *v1.PersistentVolume) error {
	pool, dir, ok := p.ownVolume(pv)
	if !ok {
		return nil
	}
	mgr, err := p.cfg.Managers(p.cfg.Node)
	if err != nil {
		return fmt.Errorf("adopt the directory of PersistentVolume %q: %w", pv.Name, err)
	}
	vol, err := mgr.GetVolume(ctx, pool, dir)
	if a := client.Classify(err); a == client.AnswerVolumeMissing || a == client.AnswerPoolMissing {
		return nil // nothing to adopt
	}
	if err != nil {
		return fmt.Errorf("read %s to adopt it: %w", p.where(pool, dir), err)
	}
	if vol.Owner == pv.Name {
		return nil
	}
	names, err := p.volumesNaming(pool, dir)
	if err != nil {
		return fmt.Errorf("adopt %s: %w", p.where(pool, dir), err)
	}
	return p.adopt(ctx, mgr, pv, vol, names)
}

// AdoptAll runs Adopt over every PV of this node in the informer cache, with
// one ListVolumes per pool and a SetOwner only for the directories without
// an owner record, and returns the errors joined. It is meant for start-up
// (after the caches synced) and is idempotent, so it can be retried.
func (p *Provisioner) AdoptAll(ctx context.Context) error {
	if p.cfg.Volumes == nil {
		return errors.New("adopt volume directories: the provisioner has no PersistentVolume cache")
	}
	pvs, err := p.cfg.Volumes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("adopt volume directories: list PersistentVolumes: %w", err)
	}
	naming := map[dirKey][]string{}
	byPool := map[string][]*v1.PersistentVolume{}
	for _, pv := range pvs {
		if k, ok := keyOf(pv); ok {
			naming[k] = append(naming[k], pv.Name)
		}
		if pool, _, ok := p.ownVolume(pv); ok {
			byPool[pool] = append(byPool[pool], pv)
		}
	}
	if len(byPool) == 0 {
		return nil
	}
	mgr, err := p.cfg.Managers(p.cfg.Node)
	if err != nil {
		return fmt.Errorf("adopt volume directories: %w", err)
	}
	var errs []error
	reported := map[dirKey]bool{}
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		list, err := mgr.ListVolumes(ctx, pool)
		if err != nil {
			errs = append(errs, fmt.Errorf("adopt volume directories: list pool %q on node %q: %w", pool, p.cfg.Node, err))
			continue
		}
		vols := make(map[string]*client.Volume, len(list.Items))
		for i := range list.Items {
			vols[list.Items[i].Name] = &list.Items[i]
		}
		for _, pv := range byPool[pool] {
			k, _ := keyOf(pv)
			vol := vols[k.dir]
			if vol == nil || vol.Owner == pv.Name || reported[k] {
				continue
			}
			names := slices.Sorted(slices.Values(naming[k]))
			if err := p.adopt(ctx, mgr, pv, vol, names); err != nil {
				errs = append(errs, err)
				reported[k] = true
			}
		}
	}
	return errors.Join(errs...)
}

// adopt makes pv the owner of vol, a directory without an owner record,
// when names (the PVs that name the directory) holds no other PV; the
// record keeps pv's claim namespace, the one it may be reused from.
func (p *Provisioner) adopt(ctx context.Context, mgr VolumeManager, pv *v1.PersistentVolume, vol *client.Volume, names []string) error {
	pool := pv.Annotations[annotations.Pool]
	where := p.where(pool, vol.Name)
	if vol.Owner != "" {
		return fmt.Errorf("%s belongs to PersistentVolume %q, but PersistentVolume %q names it: not adopted; check both volumes by hand", where, vol.Owner, pv.Name)
	}
	if !slices.Contains(names, pv.Name) {
		names = append(slices.Clone(names), pv.Name)
		slices.Sort(names)
	}
	if len(names) > 1 {
		return fmt.Errorf("%s has no owner record and the PersistentVolumes %s all use it: deleting either would delete the other's data; resolve by hand (copy the data apart and give each volume its own directory), none was adopted", where, quoteAll(names))
	}
	_, err := mgr.SetOwner(ctx, pool, vol.Name, client.SetOwnerRequest{Owner: pv.Name, Previous: "", ClaimNamespace: client.ClaimNamespaceOf(pv)})
	if owner, conflict := client.OwnerOf(err); conflict && owner == pv.Name {
		return nil
	}
	if err != nil {
		return fmt.Errorf("adopt %s for PersistentVolume %q: %w", where, pv.Name, err)
	}
	klog.FromContext(ctx).Info("Adopted a volume directory without an owner record", "pv", pv.Name, "node", p.cfg.Node, "pool", pool, "directory", vol.Name)
	return nil
}

// ownVolume returns the pool and directory of a node-mode PV of this node
// that this provisioner made, and false for any other PV.
func (p *Provisioner) ownVolume(pv *v1.PersistentVolume) (pool, dir string, ok bool) {
	k, named := keyOf(pv)
	if !named || k.node != p.cfg.Node || pv.Annotations[annotations.ProvisionedBy] != p.cfg.Name ||
		pv.Annotations[annotations.Mode] == annotations.ModeMultihost {
		return "", "", false
	}
	return k.pool, k.dir, true
}
