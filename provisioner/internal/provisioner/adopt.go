package provisioner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// AdoptAll writes the owner records of the directories that have none
// (made before the manager kept owner records): for every node-mode PV of
// this node provisioned by this provisioner, in the informer cache, it
// makes the PV the owner of its directory, but only when it is the one PV
// whose annotations name the directory; when two or more do (claims that
// shared a directory), it adopts none and says so, as deleting either
// would delete the other's data. Other PVs, a directory that is gone, and
// one its PV already owns are left as they are. It also marks as multihost
// the owner records of this node's copies of multihost PVs written before
// records kept the mode (see markMultihost). It makes one ListVolumes per
// pool and a SetOwner only where a record is missing or unmarked, and
// returns the errors joined. It is meant for start-up (after the caches
// synced) and is idempotent, so it can be retried.
func (p *Provisioner) AdoptAll(ctx context.Context) error {
	pvs, err := p.knownVolumes(ctx)
	if err != nil {
		return fmt.Errorf("adopt volume directories: %w", err)
	}
	naming := map[dirKey][]string{}
	byPool := map[string][]*v1.PersistentVolume{}
	multihost := map[string][]*v1.PersistentVolume{}
	for _, pv := range pvs {
		if k, ok := keyOf(pv); ok {
			naming[k] = append(naming[k], pv.Name)
		}
		if pool, _, ok := p.ownVolume(pv); ok {
			byPool[pool] = append(byPool[pool], pv)
		}
		if m, ok := hostpathv1.MultihostDirectoryOf(pv, p.cfg.Names); ok && m.Pool != "" && m.Directory != "" {
			multihost[m.Pool] = append(multihost[m.Pool], pv)
		}
	}
	if len(byPool) == 0 && len(multihost) == 0 {
		return nil
	}
	mgr, err := p.cfg.Managers(p.cfg.Node)
	if err != nil {
		return fmt.Errorf("adopt volume directories: %w", err)
	}
	var errs []error
	reported := map[dirKey]bool{}
	pools := slices.Concat(slices.Collect(maps.Keys(byPool)), slices.Collect(maps.Keys(multihost)))
	slices.Sort(pools)
	for _, pool := range slices.Compact(pools) {
		list, err := mgr.ListVolumes(ctx, pool)
		if err != nil {
			errs = append(errs, fmt.Errorf("adopt volume directories: list pool %q on node %q: %w", pool, p.cfg.Node, err))
			continue
		}
		vols := make(map[string]*managerapi.Volume, len(list.Items))
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
		for _, pv := range multihost[pool] {
			if err := p.markMultihost(ctx, mgr, pv, vols[pv.Annotations[hostpathv1.AnnotationDirectory]]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// markMultihost marks vol, this node's copy of the multihost PV pv, as
// multihost in its owner record, when the record names pv but does not say
// so (written before records kept the mode): a manager lets the instance
// elected for pv on another node, and the host definer, change only
// multihost volumes, and this instance is the only caller with this node's
// authority over it. A missing directory, one without a record or of
// another owner is left to the fan-out and the sweeper.
func (p *Provisioner) markMultihost(ctx context.Context, mgr VolumeManager, pv *v1.PersistentVolume, vol *managerapi.Volume) error {
	if vol == nil || vol.Owner != pv.Name || vol.Multihost {
		return nil
	}
	_, err := mgr.SetOwner(ctx, vol.Pool, vol.Name, managerapi.SetOwnerRequest{Owner: pv.Name, Previous: pv.Name, Retained: vol.Retained, Multihost: true})
	if err != nil {
		return fmt.Errorf("mark %s as multihost in its owner record: %w", p.where(vol.Pool, vol.Name), err)
	}
	klog.FromContext(ctx).Info("Marked a multihost volume's owner record", "pv", pv.Name, "node", p.cfg.Node, "pool", vol.Pool, "directory", vol.Name)
	return nil
}

// adopt makes pv the owner of vol, a directory without an owner record,
// when names (the PVs that name the directory) holds no other PV; the
// record keeps pv's claim namespace, the one it may be reused from.
func (p *Provisioner) adopt(ctx context.Context, mgr VolumeManager, pv *v1.PersistentVolume, vol *managerapi.Volume, names []string) error {
	pool := pv.Annotations[hostpathv1.AnnotationPool]
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
	_, err := mgr.SetOwner(ctx, pool, vol.Name, managerapi.SetOwnerRequest{Owner: pv.Name, Previous: "", ClaimNamespace: hostpathv1.ClaimNamespaceOf(pv)})
	if owner, conflict := managerapi.OwnerOf(err); conflict && owner == pv.Name {
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
	if !named || k.node != p.cfg.Node || !p.cfg.Names.Has(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]) ||
		pv.Annotations[hostpathv1.AnnotationMode] == hostpathv1.ModeMultihost {
		return "", "", false
	}
	return k.pool, k.dir, true
}
