// Package usage keeps the annotation hostpathv1.AnnotationSizeUsed
// (hostpath.dev/size-used) of each node's PersistentVolumes up to date, so
// that operators see what a volume uses with kubectl describe pv or
// kubectl get pv -o custom-columns=USED:.metadata.annotations.hostpath\.dev/size-used,
// watches the health of their directories (hostpathv1.AnnotationHealth, with an
// event at each change), and exports their usage as metrics (Metrics).
//
// Each instance of the provisioner runs one Refresher for its own node.
// Every Config.Interval it:
//
//  1. lists, from the PersistentVolume cache, the PVs of this provisioner
//     that are not under deletion, name a pool and a directory, and are on
//     the instance's own node: a node-mode PV (annotation hostpath.dev/mode
//     absent or "node") whose hostpath.dev/node is it, or a multihost PV
//     whose hostpath.dev/nodes lists it;
//  2. asks the node's manager for its pools (GET /v1/host, which says
//     which are read-only), then for the volumes of each of the PVs' pools,
//     one call per pool (GET /v1/pools/{pool}/volumes);
//  3. for each node-mode PV whose volume reports usedBytes (its pool
//     enforces its size, so a quota counts what it uses), sets the
//     annotation when it is absent, unreadable, or at least 1 MiB away
//     from the used bytes;
//  4. for each PV whose directory is looked at (checksHealth), finds its
//     condition on this node (see health.go): PoolMissing (the list
//     answered PoolNotFound), DirectoryMissing (the list succeeded without
//     the directory), PoolReadOnly (GET /v1/host says readOnly), UsageHigh
//     (usedBytes at least Config.WarningThreshold percent of sizeBytes),
//     or healthy; when it differs from the one hostpathv1.AnnotationHealth records,
//     writes the new one and emits one event on the PV and, while Bound, on
//     its claim: a Warning (VolumeUsageHigh, VolumeDirectoryMissing,
//     PoolReadOnly, PoolMissing) or, back to healthy, a Normal
//     VolumeHealthy;
//  5. replaces the series of Metrics with the usage of the Bound PVs.
//
// Steps 3 and 4 write one merge patch per PV, and only when something
// changed: an idle, healthy volume costs no write at all, and an event
// goes with each change of condition, not with each refresh. As the
// condition is kept on the PV, a restarted instance that finds the
// condition recorded says nothing again.
//
// The value of hostpathv1.AnnotationSizeUsed is the used bytes rounded up to a
// whole MiB, as a resource.Quantity in binary SI canonical form: "0",
// "24Mi", "1536Mi", "2Gi". Once written it stays until the usage moves
// 1 MiB or more away from it, so the annotation is always less than 1 MiB
// off the usage seen at the last refresh.
//
// A PV whose volume reports no usage (its size is not enforced) gets no
// hostpathv1.AnnotationSizeUsed, and one it already has is left as it is.
// Multihost PVs get none either: their directory is a different one on
// each node, with its own usage, which one annotation cannot state. Their
// health is per node: each node's instance looks at its own copy, records
// its condition as a "node=condition" entry of hostpathv1.AnnotationHealth, and its
// events name the node. As several instances write that one annotation,
// their patches carry the resourceVersion the cache saw; a conflict is
// tried again at the next refresh.
//
// A failure (no manager, a pool that cannot be listed, a patch refused) is
// logged, and the refresh goes on with the other pools and PVs; the next
// one comes on time. Without an answer from GET /v1/host, no condition
// changes in that refresh (read-only pools cannot be told apart). A pool
// whose list fails for another reason than PoolNotFound leaves the
// conditions of its PVs as recorded.
package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// DefaultInterval is the default time between two refreshes.
const DefaultInterval = time.Minute

// mebibyte is the unit the annotation's values are rounded up to.
const mebibyte = 1 << 20

// threshold is how far, in bytes, the used bytes must be from the value of
// the annotation for a refresh to write it again.
const threshold = mebibyte

// Manager is what a Refresher needs of a node's manager (*managerapi.Client).
type Manager interface {
	// Host describes the node's pools (GET /v1/host), read-only ones
	// included.
	Host(ctx context.Context) (*managerapi.Host, error)
	// ListVolumes lists the volumes of a pool, with their usage.
	ListVolumes(ctx context.Context, pool string) (*managerapi.VolumeList, error)
}

// Config holds what a Refresher depends on.
type Config struct {
	// ProvisionerNames are the provisioner names: only PVs whose
	// pv.kubernetes.io/provisioned-by says one of them are refreshed.
	ProvisionerNames hostpathv1.ProvisionerNames
	// Node is the node this instance runs on: only PVs whose
	// hostpath.dev/node says it (multihost: whose hostpath.dev/nodes lists
	// it) are refreshed.
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
	// the next; 0 turns the Refresher off, health and metrics included.
	Interval time.Duration
	// WarningThreshold is the usage, in percent of a volume's enforced
	// size, from which the volume is UsageHigh (0 to 100; 0 turns that
	// condition off).
	WarningThreshold int
	// Recorder emits the events of condition changes.
	Recorder record.EventRecorder
	// Metrics receives the usage of the node's Bound volumes at each
	// refresh (none when nil).
	Metrics *Metrics
	// Clock tells the time (the real clock when nil).
	Clock clock.Clock
}

// Refresher keeps the annotations hostpathv1.AnnotationSizeUsed and
// hostpathv1.AnnotationHealth of the PVs of one node up to date, with the events
// and metrics that go with them (see the package doc).
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
	logger.Info("Starting the usage refresher", "interval", r.cfg.Interval, "annotations", []string{hostpathv1.AnnotationSizeUsed, hostpathv1.AnnotationHealth},
		"warningThreshold", r.cfg.WarningThreshold)
	if !cache.WaitForCacheSync(ctx.Done(), r.cfg.Synced...) {
		logger.Info("Stopped the usage refresher before the caches synced")
		return nil
	}
	for {
		// The timer starts before the refresh: one starts every Interval
		// however long it takes (at once after one that took longer).
		timer := r.cfg.Clock.NewTimer(r.cfg.Interval)
		if err := r.refresh(ctx); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Failed to refresh the used size and health of volumes", "node", r.cfg.Node)
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

// round is what one refresh has done so far.
type round struct {
	// healthKnown says that GET /v1/host answered: conditions may change.
	healthKnown bool
	// samples are the new series of Metrics, by PV name.
	samples map[string]sample
	errs    []error
	written int
}

// refresh does one round (steps 1 to 5 of the package doc). The error joins
// every failure; the pools and PVs that did not fail are refreshed.
func (r *Refresher) refresh(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	pools, err := r.volumesByPool()
	if err != nil {
		return err
	}
	rd := &round{samples: map[string]sample{}}
	defer func() { r.cfg.Metrics.replace(rd.samples) }()
	if len(pools) == 0 {
		logger.V(5).Info("Refreshed the used size and health of volumes: none on this node")
		return nil
	}
	mgr, err := r.cfg.Managers(r.cfg.Node)
	if err != nil {
		r.keepSamples(rd, pools)
		return fmt.Errorf("refresh the used size of the volumes of node %q: find the manager: %w", r.cfg.Node, err)
	}
	infos := map[string]*managerapi.Pool{}
	host, err := mgr.Host(ctx)
	if err != nil {
		rd.errs = append(rd.errs, fmt.Errorf("describe the pools of node %q (no condition changes in this refresh): %w", r.cfg.Node, err))
	} else {
		rd.healthKnown = true
		for i := range host.Pools {
			infos[host.Pools[i].Name] = &host.Pools[i]
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		ps := &poolState{name: pool, info: infos[pool]}
		list, err := mgr.ListVolumes(ctx, pool)
		switch {
		case err == nil:
			ps.volumes = make(map[string]managerapi.Volume, len(list.Items))
			for _, vol := range list.Items {
				ps.volumes[vol.Name] = vol
			}
		case managerapi.Classify(err) == managerapi.AnswerPoolMissing:
			ps.missing = err
		default:
			rd.errs = append(rd.errs, fmt.Errorf("list the volumes of pool %q: %w", pool, err))
			r.keepSamples(rd, map[string]map[string][]*v1.PersistentVolume{pool: pools[pool]})
			continue
		}
		for _, dir := range slices.Sorted(maps.Keys(pools[pool])) {
			for _, pv := range pools[pool][dir] {
				r.refreshVolume(ctx, rd, pv, ps)
			}
		}
	}
	logger.V(4).Info("Refreshed the used size and health of volumes", "pools", len(pools), "written", rd.written, "failures", len(rd.errs))
	return errors.Join(rd.errs...)
}

// keepSamples carries the series of the PVs of pools, whose volumes could
// not be listed, over from the last refresh.
func (r *Refresher) keepSamples(rd *round, pools map[string]map[string][]*v1.PersistentVolume) {
	for _, dirs := range pools {
		for _, pvs := range dirs {
			for _, pv := range pvs {
				if s, ok := r.cfg.Metrics.previous(pv.Name); ok && boundClaim(pv) != nil {
					rd.samples[pv.Name] = s
				}
			}
		}
	}
}

// refreshVolume does steps 3 to 5 of the package doc for pv, whose pool
// the refresh saw as ps.
func (r *Refresher) refreshVolume(ctx context.Context, rd *round, pv *v1.PersistentVolume, ps *poolState) {
	vol, found := ps.volumes[pv.Annotations[hostpathv1.AnnotationDirectory]]
	if claim := boundClaim(pv); found && claim != nil && vol.UsedBytes != nil {
		rd.samples[pv.Name] = sample{namespace: claim.Namespace, claim: claim.Name, node: r.cfg.Node, used: *vol.UsedBytes, capacity: vol.SizeBytes}
	}
	set := map[string]*string{}
	if found && !hostpathv1.IsMultihost(pv) && vol.UsedBytes != nil {
		if current, has := pv.Annotations[hostpathv1.AnnotationSizeUsed]; !has || needsUpdate(current, *vol.UsedBytes) {
			set[hostpathv1.AnnotationSizeUsed] = ptr.To(sizeUsed(*vol.UsedBytes))
		}
	}
	var change *healthChange
	if rd.healthKnown && checksHealth(pv) {
		if change = r.healthChange(pv, ps, vol, found); change != nil {
			set[hostpathv1.AnnotationHealth] = change.value
		}
	}
	if len(set) == 0 {
		return
	}
	ok, err := r.patch(ctx, pv, set)
	if err != nil {
		rd.errs = append(rd.errs, err)
		return
	}
	if !ok {
		return
	}
	rd.written++
	if change != nil {
		r.emit(ctx, pv, change)
	}
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
		pool, dir := pv.Annotations[hostpathv1.AnnotationPool], pv.Annotations[hostpathv1.AnnotationDirectory]
		if pools[pool] == nil {
			pools[pool] = map[string][]*v1.PersistentVolume{}
		}
		pools[pool][dir] = append(pools[pool][dir], pv)
	}
	return pools, nil
}

// refreshes reports whether pv is one whose volume this Refresher looks
// at: of this provisioner, not under deletion, naming a pool and a
// directory, in node mode on this node or multihost with this node among
// its nodes.
func (r *Refresher) refreshes(pv *v1.PersistentVolume) bool {
	d, ok := hostpathv1.VolumeDirectoryOf(pv, r.cfg.ProvisionerNames)
	return ok && pv.DeletionTimestamp == nil && d.Pool != "" && d.Directory != "" && d.On(r.cfg.Node)
}

// patch merge-patches the annotations set (a nil value removes one) on pv,
// and reports whether it wrote. The patch of a multihost PV, whose
// hostpathv1.AnnotationHealth other nodes' instances write too, carries the
// resourceVersion of the cache: a conflict is left to the next refresh. A
// PV deleted since the cache saw it is not an error.
func (r *Refresher) patch(ctx context.Context, pv *v1.PersistentVolume, set map[string]*string) (bool, error) {
	meta := map[string]any{"annotations": set}
	if hostpathv1.IsMultihost(pv) {
		meta["resourceVersion"] = pv.ResourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return false, fmt.Errorf("update PersistentVolume %q: %w", pv.Name, err)
	}
	_, err = r.cfg.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: r.cfg.FieldManager})
	logger := klog.FromContext(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		logger.V(2).Info("A PersistentVolume changed since the cache saw it; its annotations are written at the next refresh", "pv", klog.KObj(pv), "set", describeSet(set))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("set %s of PersistentVolume %q: %w", describeSet(set), pv.Name, err)
	}
	logger.V(4).Info("Updated the annotations of a volume", "pv", klog.KObj(pv), "set", describeSet(set),
		"previousUsed", pv.Annotations[hostpathv1.AnnotationSizeUsed], "previousHealth", pv.Annotations[hostpathv1.AnnotationHealth])
	return true, nil
}

// describeSet writes the annotations of a patch for messages:
// "hostpath.dev/size-used to 1Mi, hostpath.dev/health removed".
func describeSet(set map[string]*string) string {
	parts := make([]string, 0, len(set))
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if v := set[k]; v != nil {
			parts = append(parts, fmt.Sprintf("%s to %s", k, *v))
		} else {
			parts = append(parts, k+" removed")
		}
	}
	return strings.Join(parts, ", ")
}

// emit records the event of change on pv and, unless it is Released or
// Failed, on its claim, and logs it.
func (r *Refresher) emit(ctx context.Context, pv *v1.PersistentVolume, c *healthChange) {
	r.cfg.Recorder.Event(pv, c.eventType, c.reason, c.message)
	claim := eventClaim(pv)
	if claim != nil {
		r.cfg.Recorder.Event(claim, c.eventType, c.reason, c.message)
	}
	klog.FromContext(ctx).Info("The condition of a volume changed", "pv", klog.KObj(pv), "claim", klog.KRef(pv.Annotations[hostpathv1.AnnotationClaimNamespace], pv.Annotations[hostpathv1.AnnotationClaimName]),
		"node", r.cfg.Node, "condition", c.condition, "previous", c.previous, "reason", c.reason, "message", c.message)
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
