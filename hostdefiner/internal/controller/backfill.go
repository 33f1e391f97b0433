package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// backfill gives the node every multihost directory of the pool it lacks,
// BackfillWorkers at a time, owned by the PV, with its class's dirMode and
// its reclaim policy, marked multihost (hostpathv1.NewCreateVolumeRequest reads
// the PV's mode): a manager lets the host definer, whose token is bound to
// a pod on another node, create and adopt nothing else. A directory of that
// name without an owner record is recorded as the PV's; one owned by
// another PV is a failure: pods of the volume would share someone else's
// data. Each create and each adoption names the PV's claim (claimNameOf),
// which a manager checks at the API server before it lets a caller bound
// to another node (the host definer, unless it runs on the node) make or
// adopt a directory; a create sends the PV's capacity now, which a grown
// owner record has too. It fills st's counts.
func (c *Controller) backfill(ctx context.Context, def *hostpathv1.HostDefinition, mgr Manager, st *hostpathv1.HostDefinitionStatus) error {
	node, pool := def.Spec.NodeName, def.Spec.Pool
	vols, err := c.multihostVolumes(pool)
	if err != nil {
		return err
	}
	list, err := mgr.ListVolumes(ctx, pool)
	if err != nil {
		return &tryError{reason: ReasonBackfillFailed, message: fmt.Sprintf("list the volumes of pool %q on node %q: %v", pool, node, err)}
	}
	owners := map[string]string{}
	for _, v := range list.Items {
		owners[v.Name] = v.Owner
	}
	errs := make([]error, len(vols))
	var missing []int
	for i, m := range vols {
		owner, ok := owners[m.directory]
		switch {
		case !ok:
			missing = append(missing, i)
		case owner == "":
			// Made before owner records: the PV's own name, so it is the
			// PV's; recorded (with its policy and claim namespace, as a
			// create would), as multihost (the only kind the host definer
			// may adopt on a node other than its own), so that its reclaim
			// removes it. It names the claim, as a create does: another
			// node's manager checks it before it lets the host definer
			// adopt a directory.
			req := managerapi.SetOwnerRequest{Owner: m.pv.Name, ReclaimPolicy: hostpathv1.RecordedReclaimPolicy(m.pv), ClaimNamespace: hostpathv1.ClaimNamespaceOf(m.pv),
				ClaimName: claimNameOf(m.pv), Multihost: true}
			if _, err := mgr.SetOwner(ctx, pool, m.directory, req); err != nil {
				errs[i] = fmt.Errorf("record PersistentVolume %s as the owner of directory %q: %w", m.pv.Name, m.directory, err)
			}
		case owner != m.pv.Name:
			errs[i] = fmt.Errorf("directory %q of PersistentVolume %s belongs to %s on node %q", m.directory, m.pv.Name, owner, node)
		}
	}
	workqueue.ParallelizeUntil(ctx, max(c.cfg.BackfillWorkers, 1), len(missing), func(j int) {
		m := vols[missing[j]]
		req := hostpathv1.NewCreateVolumeRequest(m.pv, c.dirMode(m.pv), c.enforceSize(m.pv))
		req.ClaimName = claimNameOf(m.pv)
		if _, err := mgr.CreateVolume(ctx, pool, m.directory, req); err != nil {
			errs[missing[j]] = fmt.Errorf("create directory %q of PersistentVolume %s: %w", m.directory, m.pv.Name, err)
			return
		}
		klog.FromContext(ctx).Info("Backfilled a multihost directory", "pv", klog.KObj(m.pv), "directory", m.directory, "mode", req.Mode)
	})
	failed := errors.Join(errs...)
	st.MultihostVolumes = 0
	for i := range vols {
		if errs[i] == nil {
			st.MultihostVolumes++
		}
	}
	created := int32(0)
	for _, j := range missing {
		if errs[j] == nil {
			created++
		}
	}
	st.BackfilledVolumes += created
	if failed != nil {
		n := len(vols) - int(st.MultihostVolumes)
		return &tryError{reason: ReasonBackfillFailed, message: fmt.Sprintf(
			"%d of the %d multihost volumes of pool %q have no directory on node %q: %v", n, len(vols), pool, node, failed)}
	}
	return nil
}

// claimNameOf is the name of the claim pv was made for: its
// hostpathv1.AnnotationClaimName, else its claimRef's; "" when it names
// none.
func claimNameOf(pv *v1.PersistentVolume) string {
	if name := pv.Annotations[hostpathv1.AnnotationClaimName]; name != "" {
		return name
	}
	if pv.Spec.ClaimRef != nil {
		return pv.Spec.ClaimRef.Name
	}
	return ""
}

// enforceSize says whether a PV's StorageClass asks for enforced sizes.
func (c *Controller) enforceSize(pv *v1.PersistentVolume) bool {
	class, err := c.classes.Get(pv.Spec.StorageClassName)
	return err == nil && class.Parameters[hostpathv1.ParamEnforceSize] == "true"
}

// dirMode is the dirMode of a PV's StorageClass, or the default.
func (c *Controller) dirMode(pv *v1.PersistentVolume) string {
	class, err := c.classes.Get(pv.Spec.StorageClassName)
	if err != nil {
		return hostpathv1.DefaultDirMode
	}
	m, err := managerapi.ParseMode(class.Parameters[hostpathv1.ParamDirMode])
	if err != nil {
		return hostpathv1.DefaultDirMode
	}
	return managerapi.FormatMode(m)
}

// recordNode lists node among the nodes of every multihost volume of the
// pool that does not list it yet (and takes it off their pending nodes),
// after a try found or made their directories there, BackfillWorkers
// patches at a time. Each patch carries the resourceVersion it was computed
// from, so a concurrent change is not lost: a conflict returns an error and
// the key is synced again.
func (c *Controller) recordNode(ctx context.Context, node, pool string) error {
	vols, err := c.multihostVolumes(pool)
	if err != nil {
		return err
	}
	vols = slices.DeleteFunc(vols, func(m multihostVolume) bool { return m.holds(node) })
	errs := make([]error, len(vols))
	workqueue.ParallelizeUntil(ctx, max(c.cfg.BackfillWorkers, 1), len(vols), func(i int) {
		errs[i] = c.recordNodeOn(ctx, vols[i], node)
	})
	return errors.Join(append(errs, ctx.Err())...)
}

// recordNodeOn patches m's PV to list node.
func (c *Controller) recordNodeOn(ctx context.Context, m multihostVolume, node string) error {
	nodes := append(slices.Clone(m.nodes), node)
	slices.Sort(nodes)
	pending := slices.DeleteFunc(slices.Clone(m.pending), func(n string) bool { return n == node })
	var pendingValue any
	if len(pending) > 0 {
		pendingValue = hostpathv1.JoinNodes(pending)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": m.pv.ResourceVersion,
		"annotations": map[string]any{
			hostpathv1.AnnotationNodes:        hostpathv1.JoinNodes(nodes),
			hostpathv1.AnnotationPendingNodes: pendingValue,
		},
	}})
	if err != nil {
		return err
	}
	if _, err := c.kube.CoreV1().PersistentVolumes().Patch(ctx, m.pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("record node %q in PersistentVolume %s: %w", node, m.pv.Name, err)
	}
	return nil
}
