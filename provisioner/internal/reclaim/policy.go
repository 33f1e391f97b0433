package reclaim

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// The policy record: the owner record of a PV's directory on every node
// that holds it says the PV's reclaim policy, so that a directory whose PV
// went while its node was away is removed by its sweeper only if the
// record says Delete. NextStep decides it (policyStep: a fan-out of
// opRecordPolicy, then the answers); recordPolicy carries its end out.

// recordPolicy carries out the end of the policy record: the annotation
// on the PV (a merge patch guarded by the resourceVersion) once every
// holder recorded it, else the Warning, and the PV is retried.
func (c *Controller) recordPolicy(ctx context.Context, pv *v1.PersistentVolume, step Step) error {
	if step.Action == ActPolicyPending {
		c.cfg.Recorder.Event(pv, v1.EventTypeWarning, ReasonReclaimPolicyPending, step.Message)
		return fmt.Errorf("PersistentVolume %q: %s", pv.Name, step.Message)
	}
	policy := hostpathv1.RecordedReclaimPolicy(pv)
	if err := patchAnnotation(ctx, c.cfg.Client, pv, c.cfg.FieldManager, hostpathv1.AnnotationRecordedPolicy, &policy); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Recorded the reclaim policy with the directory", "reclaimPolicy", policy, "nodes", step.Nodes)
	return nil
}
