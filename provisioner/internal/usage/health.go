package usage

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// Reasons of the events this package emits, on the PV and, while it is
// Bound, on its claim. One goes with each change of the PV's condition on
// this node (hostpathv1.AnnotationHealth), never one per refresh.
const (
	// ReasonUsageHigh (Warning): the volume uses at least
	// Config.WarningThreshold percent of its enforced size.
	ReasonUsageHigh = "VolumeUsageHigh"
	// ReasonDirectoryMissing (Warning): the pool is there, the volume's
	// directory is not.
	ReasonDirectoryMissing = "VolumeDirectoryMissing"
	// ReasonPoolReadOnly (Warning): the pool's filesystem is read-only.
	ReasonPoolReadOnly = "PoolReadOnly"
	// ReasonPoolMissing (Warning): the manager answers PoolNotFound for
	// the pool.
	ReasonPoolMissing = "PoolMissing"
	// ReasonHealthy (Normal): none of the above holds any more.
	ReasonHealthy = "VolumeHealthy"
)

// DefaultWarningThreshold is the default Config.WarningThreshold, in
// percent.
const DefaultWarningThreshold = 90

// usageHysteresis is how many percentage points below the threshold the
// usage of a volume recorded as UsageHigh must fall for it to be healthy
// again (never more than half the threshold), so that a volume whose usage
// hovers around the threshold does not raise an event pair every refresh.
const usageHysteresis = 5

// reasons maps each condition to the reason of its event.
var reasons = map[string]string{
	hostpathv1.HealthPoolMissing:      ReasonPoolMissing,
	hostpathv1.HealthDirectoryMissing: ReasonDirectoryMissing,
	hostpathv1.HealthPoolReadOnly:     ReasonPoolReadOnly,
	hostpathv1.HealthUsageHigh:        ReasonUsageHigh,
}

// poolState is what one refresh saw of a pool of this node.
type poolState struct {
	name string
	// info is the pool in the manager's GET /v1/host; nil when the host
	// did not list it.
	info *managerapi.Pool
	// missing holds the manager's PoolNotFound answer to the list; nil
	// when the list succeeded.
	missing error
	// volumes are the listed volumes by name, when the list succeeded.
	volumes map[string]managerapi.Volume
}

// healthChange is a change of a PV's condition on this node: the new value
// of hostpathv1.AnnotationHealth (nil removes it) and the event that says so.
type healthChange struct {
	previous, condition string
	value               *string
	eventType, reason   string
	message             string
}

// checksHealth reports whether the condition of pv's directory is looked
// at: not for a PV whose directory is about to go (Released or Failed with
// reclaim policy Delete: the library is deleting it, and its directory may
// be gone already).
func checksHealth(pv *v1.PersistentVolume) bool {
	switch pv.Status.Phase {
	case v1.VolumeReleased, v1.VolumeFailed:
		return pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete
	}
	return true
}

// healthChange returns the change of pv's condition on this node, given
// what the refresh saw of its pool (ps) and of its volume (vol, found), or
// nil when the condition is the one recorded.
func (r *Refresher) healthChange(pv *v1.PersistentVolume, ps *poolState, vol managerapi.Volume, found bool) *healthChange {
	conds := readHealth(pv)
	previous := conds[r.cfg.Node]
	condition := r.condition(ps, vol, found, previous)
	if condition == previous {
		return nil
	}
	if condition == "" {
		delete(conds, r.cfg.Node)
	} else {
		conds[r.cfg.Node] = condition
	}
	c := &healthChange{previous: previous, condition: condition}
	if v := healthValue(pv, conds); v != "" {
		c.value = &v
	}
	c.eventType, c.reason, c.message = v1.EventTypeNormal, ReasonHealthy, r.healthyMessage(pv, ps, previous)
	if condition != "" {
		c.eventType, c.reason, c.message = v1.EventTypeWarning, reasons[condition], r.warningMessage(pv, ps, vol, condition)
	}
	return c
}

// condition is the condition of a volume on this node, the most severe
// first: PoolMissing, DirectoryMissing, PoolReadOnly, UsageHigh; "" when
// healthy. previous is the recorded one (for the hysteresis of UsageHigh).
func (r *Refresher) condition(ps *poolState, vol managerapi.Volume, found bool, previous string) string {
	switch {
	case ps.missing != nil:
		return hostpathv1.HealthPoolMissing
	case !found:
		return hostpathv1.HealthDirectoryMissing
	case ps.info != nil && ps.info.ReadOnly:
		return hostpathv1.HealthPoolReadOnly
	case vol.UsedBytes != nil && usageHigh(*vol.UsedBytes, vol.SizeBytes, r.cfg.WarningThreshold, previous == hostpathv1.HealthUsageHigh):
		return hostpathv1.HealthUsageHigh
	}
	return ""
}

// usageHigh reports whether used bytes of a volume of size bytes reach
// threshold percent of it (never with a threshold of 0 or a volume without
// a size). A volume that was high stays so until it falls usageHysteresis
// points below the threshold, or below half of it for thresholds under
// 2×usageHysteresis.
func usageHigh(used, size int64, threshold int, was bool) bool {
	if threshold <= 0 || size <= 0 {
		return false
	}
	level := float64(threshold)
	if was {
		level = max(level-usageHysteresis, level/2)
	}
	return float64(max(used, 0))*100 >= level*float64(size)
}

// percent is used as a whole percentage of size, rounded down (so that it
// never shows under a threshold it reached).
func percent(used, size int64) int64 {
	if size <= 0 {
		return 0
	}
	return int64(math.Floor(float64(max(used, 0)) * 100 / float64(size)))
}

// where says where pv's directory is on this node, for messages: `node
// "N", pool "P", directory "D" (PATH)`, the path when the manager gave it.
func (r *Refresher) where(pv *v1.PersistentVolume, ps *poolState, vol managerapi.Volume) string {
	dir := pv.Annotations[hostpathv1.AnnotationDirectory]
	p := vol.Path
	if p == "" && ps.info != nil && ps.info.Path != "" {
		p = path.Join(ps.info.Path, dir)
	}
	s := fmt.Sprintf("node %q, pool %q, directory %q", r.cfg.Node, ps.name, dir)
	if p != "" {
		s += " (" + p + ")"
	}
	return s
}

// warningMessage is the message of the Warning event of condition.
func (r *Refresher) warningMessage(pv *v1.PersistentVolume, ps *poolState, vol managerapi.Volume, condition string) string {
	where := r.where(pv, ps, vol)
	switch condition {
	case hostpathv1.HealthPoolMissing:
		return fmt.Sprintf("Volume %s cannot be reached on %s: the pool is missing (%v); restore the pool's directory, or its key pool.NAME in the ConfigMap hostpath-pools of the managers",
			pv.Name, where, ps.missing)
	case hostpathv1.HealthDirectoryMissing:
		return fmt.Sprintf("Volume %s has no directory on %s: pods using it there cannot start; find what removed it, restore the data, or delete the claim",
			pv.Name, where)
	case hostpathv1.HealthPoolReadOnly:
		return fmt.Sprintf("Volume %s cannot be written on %s: the pool's filesystem is read-only (mounted read-only, or remounted so after errors)",
			pv.Name, where)
	case hostpathv1.HealthUsageHigh:
		used := *vol.UsedBytes
		return fmt.Sprintf("Volume %s uses %s of its %s limit (%d%%, warning threshold %d%%) on %s; writes past the limit fail with EDQUOT: expand the claim or free space",
			pv.Name, formatBytes(used), formatBytes(vol.SizeBytes), percent(used, vol.SizeBytes), r.cfg.WarningThreshold, where)
	}
	return fmt.Sprintf("Volume %s is %s on %s", pv.Name, condition, where)
}

// healthyMessage is the message of the Normal event of a volume that is no
// longer in condition previous.
func (r *Refresher) healthyMessage(pv *v1.PersistentVolume, ps *poolState, previous string) string {
	return fmt.Sprintf("Volume %s is healthy again on %s (was %s)", pv.Name, r.where(pv, ps, managerapi.Volume{}), previous)
}

// readHealth reads hostpathv1.AnnotationHealth of pv: the recorded condition of
// each node that is not healthy. An entry without "node=" is the condition
// of the node of a node-mode PV.
func readHealth(pv *v1.PersistentVolume) map[string]string {
	conds := map[string]string{}
	for e := range strings.SplitSeq(pv.Annotations[hostpathv1.AnnotationHealth], ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		node, cond, ok := strings.Cut(e, "=")
		if !ok {
			node, cond = pv.Annotations[hostpathv1.AnnotationNode], e
		}
		if node != "" && cond != "" {
			conds[node] = cond
		}
	}
	return conds
}

// healthValue is the value of hostpathv1.AnnotationHealth for the conditions of
// pv's nodes: for a node-mode PV that of its node alone, for a multihost
// PV "node=condition" entries sorted by node; "" when all are healthy.
func healthValue(pv *v1.PersistentVolume, conds map[string]string) string {
	if !hostpathv1.IsMultihost(pv) {
		return conds[pv.Annotations[hostpathv1.AnnotationNode]]
	}
	nodes := make([]string, 0, len(conds))
	for n := range conds {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	entries := make([]string, len(nodes))
	for i, n := range nodes {
		entries[i] = n + "=" + conds[n]
	}
	return strings.Join(entries, ",")
}

// eventClaim is a reference to the claim of pv, for its condition events:
// the claim it was provisioned for, also before this instance's cache sees
// the PV Bound (a pool may go read-only in the first seconds of a volume;
// its first condition is a change, reported once), but not once the PV is
// Released or Failed (the claim is gone).
func eventClaim(pv *v1.PersistentVolume) *v1.ObjectReference {
	if pv.Status.Phase == v1.VolumeReleased || pv.Status.Phase == v1.VolumeFailed || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
		return nil
	}
	return claimReference(pv)
}

// boundClaim is a reference to the claim pv is bound to, for its events;
// nil unless pv is Bound.
func boundClaim(pv *v1.PersistentVolume) *v1.ObjectReference {
	if pv.Status.Phase != v1.VolumeBound {
		return nil
	}
	return claimReference(pv)
}

// claimReference is a reference to the claim pv's claimRef names, or nil.
func claimReference(pv *v1.PersistentVolume) *v1.ObjectReference {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name == "" {
		return nil
	}
	return &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
}

// formatBytes writes n in binary units as resource quantities do, with at
// most one decimal ("32Mi", "29.1Mi", "1.5Gi"), in bytes below 1Ki.
func formatBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d", n)
	}
	v, u := float64(n), ""
	for _, next := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"} {
		if math.Abs(v) < 1024 {
			break
		}
		v /= 1024
		u = next
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + u
}
