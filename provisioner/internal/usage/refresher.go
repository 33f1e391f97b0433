// Package usage keeps the annotation annotations.SizeUsed
// (hostpath.dev/size-used) of each node's PersistentVolumes up to date, so
// that operators see what a volume uses with kubectl describe pv or
// kubectl get pv -o custom-columns=USED:.metadata.annotations.hostpath\.dev/size-used.
//
// Each instance of the provisioner runs one Refresher for its own node.
// Every Config.Interval it:
//
//  1. lists, from the PersistentVolume cache, the PVs of this provisioner in
//     node mode (annotation hostpath.dev/mode absent or "node") whose node
//     is the instance's own, that are not under deletion and that name a
//     pool and a directory;
//  2. asks the node's manager for the volumes of each of their pools, one
//     call per pool (GET /v1/pools/{pool}/volumes);
//  3. for each PV whose volume reports usedBytes (its pool enforces its
//     size, so a quota counts what it uses), merge-patches the annotation
//     when it is absent, unreadable, or at least 1 MiB away from the used
//     bytes.
//
// The value is the used bytes rounded up to a whole MiB, as a
// resource.Quantity in binary SI canonical form: "0", "24Mi", "1536Mi",
// "2Gi". Once written it stays until the usage moves 1 MiB or more away
// from it, so the annotation is always less than 1 MiB off the usage seen
// at the last refresh, and an idle volume costs no write at all.
//
// A PV whose volume reports no usage (its size is not enforced) gets no
// annotation, and one it already has is left as it is. Multihost PVs are
// skipped: their directory is a different one on each node, with its own
// usage, which one annotation cannot state. A failure (no manager, a pool
// that cannot be listed, a patch refused) is logged, and the refresh goes
// on with the other pools and PVs; the next one comes on time.
package usage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
)

// DefaultInterval is the default time between two refreshes.
const DefaultInterval = time.Minute

// mebibyte is the unit the annotation's values are rounded up to.
const mebibyte = 1 << 20

// threshold is how far, in bytes, the used bytes must be from the value of
// the annotation for a refresh to write it again.
const threshold = mebibyte

// Manager is what a Refresher needs of a node's manager (*client.Client).
type Manager interface {
	// ListVolumes lists the volumes of a pool, with their usage.
	ListVolumes(ctx context.Context, pool string) (*client.VolumeList, error)
}

// Config holds what a Refresher depends on.
type Config struct {
	// ProvisionerNames are the provisioner names: only PVs whose
	// pv.kubernetes.io/provisioned-by says one of them are refreshed.
	ProvisionerNames hostpathv1.ProvisionerNames
	// Node is the node this instance runs on: only PVs whose
	// hostpath.dev/node says it are refreshed.
	Node string
	// FieldManager is the field manager of the PV patches.
	FieldManager string
	// Client patches PVs.
	Client kubernetes.Interface
	// Volumes lists the PVs, from the shared PersistentVolume cache.
	Volumes corelisters.PersistentVolumeLister
	// Synced are the caches to wait for before the first refresh (that of
	// Volumes).
	Synced []cache.InformerSynced
	// Managers returns the manager of a node (only Node is asked for).
	Managers func(node string) (Manager, error)
	// Interval is the time from the start of one refresh to the start of
	// the next; 0 turns the Refresher off.
	Interval time.Duration
	// Clock tells the time (the real clock when nil).
	Clock clock.Clock
}

// Refresher keeps the annotation annotations.SizeUsed of the PVs of one
// node up to date (see the package doc).
type Refresher struct {
	cfg Config
}

// New returns the Refresher of cfg.Node, with the real clock when
// cfg.Clock is nil.
func New(cfg Config) *Refresher {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Refresher{cfg: cfg}
}

// Run returns at once when Interval is 0. Otherwise it waits for the caches,
// refreshes right away, and then every Interval until ctx is done. A failed
// refresh is logged and the next one comes on time. Run returns nil when
// ctx is done, even while it waits for the caches (that is a shutdown).
func (r *Refresher) Run(ctx context.Context) error {
	if r.cfg.Interval <= 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting the usage refresher", "interval", r.cfg.Interval, "annotation", annotations.SizeUsed)
	if !cache.WaitForCacheSync(ctx.Done(), r.cfg.Synced...) {
		logger.Info("Stopped the usage refresher before the caches synced")
		return nil
	}
	for {
		// The timer starts before the refresh: one starts every Interval
		// however long it takes (at once after one that took longer).
		timer := r.cfg.Clock.NewTimer(r.cfg.Interval)
		if err := r.refresh(ctx); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Failed to refresh the used size of volumes", "annotation", annotations.SizeUsed)
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			logger.Info("Stopped the usage refresher")
			return nil
		case <-timer.C():
		}
	}
}

// refresh does one round (steps 1 to 3 of the package doc). The error joins
// every failure; the pools and PVs that did not fail are refreshed.
func (r *Refresher) refresh(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	pools, err := r.volumesByPool()
	if err != nil {
		return err
	}
	if len(pools) == 0 {
		logger.V(5).Info("Refreshed the used size of volumes: none on this node")
		return nil
	}
	mgr, err := r.cfg.Managers(r.cfg.Node)
	if err != nil {
		return fmt.Errorf("refresh the used size of the volumes of node %q: find the manager: %w", r.cfg.Node, err)
	}
	var (
		errs    []error
		written int
	)
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		list, err := mgr.ListVolumes(ctx, pool)
		if err != nil {
			errs = append(errs, fmt.Errorf("list the volumes of pool %q: %w", pool, err))
			continue
		}
		dirs := pools[pool]
		for _, vol := range list.Items {
			for _, pv := range dirs[vol.Name] {
				ok, err := r.update(ctx, pv, vol)
				if err != nil {
					errs = append(errs, err)
				} else if ok {
					written++
				}
			}
		}
	}
	logger.V(4).Info("Refreshed the used size of volumes", "pools", len(pools), "written", written, "failures", len(errs))
	return errors.Join(errs...)
}

// volumesByPool returns the PVs to refresh (step 1 of the package doc) by
// pool and directory. Two PVs can name one directory (a mistake the
// provisioner reports elsewhere); both get its usage.
func (r *Refresher) volumesByPool() (map[string]map[string][]*v1.PersistentVolume, error) {
	pvs, err := r.cfg.Volumes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes from the cache: %w", err)
	}
	pools := map[string]map[string][]*v1.PersistentVolume{}
	for _, pv := range pvs {
		if !r.refreshes(pv) {
			continue
		}
		pool, dir := pv.Annotations[annotations.Pool], pv.Annotations[annotations.Directory]
		if pools[pool] == nil {
			pools[pool] = map[string][]*v1.PersistentVolume{}
		}
		pools[pool][dir] = append(pools[pool][dir], pv)
	}
	return pools, nil
}

// refreshes reports whether pv is one whose usage this Refresher keeps: of
// this provisioner, in node mode, on this node, not under deletion, naming
// a pool and a directory. Multihost PVs are not (see the package doc).
func (r *Refresher) refreshes(pv *v1.PersistentVolume) bool {
	a := pv.Annotations
	if !r.cfg.ProvisionerNames.Has(a[annotations.ProvisionedBy]) || pv.DeletionTimestamp != nil {
		return false
	}
	if mode := a[annotations.Mode]; mode != "" && mode != annotations.ModeNode {
		return false
	}
	return a[annotations.Node] == r.cfg.Node && a[annotations.Pool] != "" && a[annotations.Directory] != ""
}

// update writes the usage of vol, pv's volume, into pv's annotation when
// needsUpdate says so, and reports whether it wrote. A PV deleted since the
// cache saw it is not an error.
func (r *Refresher) update(ctx context.Context, pv *v1.PersistentVolume, vol client.Volume) (bool, error) {
	if vol.UsedBytes == nil {
		return false, nil
	}
	current, has := pv.Annotations[annotations.SizeUsed]
	if has && !needsUpdate(current, *vol.UsedBytes) {
		return false, nil
	}
	value := sizeUsed(*vol.UsedBytes)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotations.SizeUsed, value)
	_, err := r.cfg.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: r.cfg.FieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("set %s of PersistentVolume %q to %s: %w", annotations.SizeUsed, pv.Name, value, err)
	}
	klog.FromContext(ctx).V(4).Info("Updated the used size of a volume", "pv", klog.KObj(pv), "used", value, "previous", current)
	return true, nil
}

// sizeUsed is the annotation's value for used bytes: rounded up to a whole
// MiB, as a resource.Quantity in binary SI canonical form ("0", "24Mi",
// "2Gi"). A negative count reads as 0, and one within 1 MiB of the largest
// int64 is rounded down instead.
func sizeUsed(used int64) string {
	used = max(used, 0)
	mib := used / mebibyte
	if used%mebibyte != 0 && mib < math.MaxInt64/mebibyte {
		mib++
	}
	return resource.NewQuantity(mib*mebibyte, resource.BinarySI).String()
}

// needsUpdate reports whether an annotation whose value is current must be
// written again for used bytes: when current is not a quantity, is
// negative, or is threshold (1 MiB) or more away from used, either way.
func needsUpdate(current string, used int64) bool {
	q, err := resource.ParseQuantity(current)
	if err != nil || q.Sign() < 0 {
		return true
	}
	d := q.Value() - max(used, 0)
	return d >= threshold || d <= -threshold
}
