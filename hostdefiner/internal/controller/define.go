package controller

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// Condition reasons of a define try that did not complete.
const (
	ReasonManagerNotReady   = "ManagerNotReady"
	ReasonManagerFailed     = "ManagerFailed"
	ReasonClonedHost        = "ClonedHost"
	ReasonPoolNotPrepared   = "PoolNotPrepared"
	ReasonInsufficientSpace = "InsufficientSpace"
	ReasonBackfillFailed    = "BackfillFailed"
)

// tryError is a define try that did not complete: the condition reason
// and a message for the condition and the event. final ends the round at
// once (a cloned host: more tries cannot help).
type tryError struct {
	reason, message string
	final           bool
}

func (e *tryError) Error() string { return e.reason + ": " + e.message }

// waitForManager records that the node has no manager pod yet (the
// pod's events sync the definition again).
func (c *Controller) waitForManager(ctx context.Context, def *hostpathv1.HostDefinition, step Step) error {
	st := step.Status
	setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonManagerNotReady, step.Message, c.clock.Now())
	if err := c.writeStatus(ctx, def, st); err != nil {
		return err
	}
	c.event(def, v1.EventTypeNormal, EventWaitingForManager, "Node %s is to be defined on pool %s: %s", def.Spec.NodeName, def.Spec.Pool, step.Message)
	return nil
}

// clearUndefineBlocked drops the UndefineBlocked condition of a definition
// whose node is wanted again.
func (c *Controller) clearUndefineBlocked(ctx context.Context, def *hostpathv1.HostDefinition) error {
	if meta.FindStatusCondition(def.Status.Conditions, hostpathv1.ConditionUndefineBlocked) == nil {
		return nil
	}
	st := *def.Status.DeepCopy()
	meta.RemoveStatusCondition(&st.Conditions, hostpathv1.ConditionUndefineBlocked)
	return c.writeStatus(ctx, def, st)
}

// try makes one define try from status st, calling the manager of pod,
// and records its outcome.
func (c *Controller) try(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus, pod *v1.Pod) error {
	c.metrics.tries.WithLabelValues("define").Inc()
	err := c.attempt(ctx, def, &st, pod)
	now := metav1.NewTime(c.clock.Now())
	st.LastTryTime = &now
	if err == nil {
		return c.defined(ctx, def, st)
	}
	te, ok := err.(*tryError)
	if !ok {
		te = &tryError{reason: ReasonManagerFailed, message: err.Error()}
	}
	return c.failed(ctx, def, st, te)
}

// attempt is the work of a define try, on the manager of pod (nil: no
// manager pod serves); it fills st with what it found.
func (c *Controller) attempt(ctx context.Context, def *hostpathv1.HostDefinition, st *hostpathv1.HostDefinitionStatus, pod *v1.Pod) error {
	node, pool := def.Spec.NodeName, def.Spec.Pool
	if pod == nil {
		return &tryError{reason: ReasonManagerNotReady, message: fmt.Sprintf(
			"no Ready manager pod (%s) on node %q; check `kubectl -n %s get pods -o wide -l %s`",
			c.cfg.ManagerSelector, node, c.namespace, c.cfg.ManagerSelector)}
	}
	st.ManagerPod, st.ManagerPodUID = pod.Name, pod.UID
	mgr, err := c.managerFor(pod)
	if err != nil {
		return &tryError{reason: ReasonManagerFailed, message: fmt.Sprintf("manager pod %s: %v", pod.Name, err)}
	}
	host, err := mgr.Host(ctx)
	if err != nil {
		return &tryError{reason: ReasonManagerFailed, message: fmt.Sprintf("GET /v1/host on manager pod %s: %v", pod.Name, err)}
	}
	if err := c.checkClone(def, host.HostID, host.MachineID); err != nil {
		return err
	}
	if st.BootID != "" && host.BootID != "" && st.BootID != host.BootID {
		c.event(def, v1.EventTypeNormal, EventRebooted, "Node %s rebooted (boot ID %s, was %s): verifying the host again", node, host.BootID, st.BootID)
	}
	st.HostID, st.MachineID, st.BootID = host.HostID, host.MachineID, host.BootID
	p, err := mgr.PreparePool(ctx, pool)
	if err != nil {
		return &tryError{reason: ReasonPoolNotPrepared, message: fmt.Sprintf("PUT /v1/pools/%s on manager pod %s: %v", pool, pod.Name, err)}
	}
	st.PoolPath, st.CapacityBytes, st.FreeBytes, st.MinFreeBytes = p.Path, p.CapacityBytes, p.FreeBytes, c.cfg.MinFreeBytes
	st.SizeEnforcement, st.SizeEnforcementReason = p.Enforcement, p.EnforcementReason
	if st.SizeEnforcement == "" {
		st.SizeEnforcement = hostpathv1.EnforcementNone
	}
	if p.FreeBytes < c.cfg.MinFreeBytes {
		return &tryError{reason: ReasonInsufficientSpace, message: fmt.Sprintf(
			"pool %q at %s on node %q has %d bytes free, less than the %d the host definer requires (--min-free-bytes)",
			pool, p.Path, node, p.FreeBytes, c.cfg.MinFreeBytes)}
	}
	return c.backfill(ctx, def, mgr, st)
}

// checkClone fails with a final tryError when another node's definition
// recorded hostID or machineID first. The definition that reports an
// identity already recorded by another node is the newer one, the clone;
// when both recorded it, the younger definition is.
func (c *Controller) checkClone(def *hostpathv1.HostDefinition, hostID, machineID string) error {
	defs, err := c.definitions.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list HostDefinitions from the cache: %w", err)
	}
	for _, o := range defs {
		if o.Spec.NodeName == def.Spec.NodeName {
			continue
		}
		what, id := "", ""
		switch {
		case hostID != "" && o.Status.HostID == hostID:
			what, id = "host ID", hostID
		case machineID != "" && o.Status.MachineID == machineID:
			what, id = "machine ID", machineID
		default:
			continue
		}
		recordedHere := def.Status.HostID == hostID && (machineID == "" || def.Status.MachineID == machineID)
		if recordedHere && olderThan(def, o) {
			c.queue.Add(Key{Node: o.Spec.NodeName, Pool: o.Spec.Pool})
			continue
		}
		return &tryError{reason: ReasonClonedHost, final: true, message: fmt.Sprintf(
			"node %q reports %s %s, which node %q reported first: node %q is a clone of node %q. "+
				"Give node %q an identity of its own (remove the host-id file from its manager's state directory, "+
				"regenerate /etc/machine-id if that is what clashes, restart its manager pod), "+
				"then set the annotation %s on HostDefinition %s to a new value",
			def.Spec.NodeName, what, id, o.Spec.NodeName, def.Spec.NodeName, o.Spec.NodeName,
			def.Spec.NodeName, hostpathv1.RetryAnnotation, def.Name)}
	}
	return nil
}

// olderThan orders definitions by creation time, then name.
func olderThan(a, b *hostpathv1.HostDefinition) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return strings.Compare(a.Name, b.Name) < 0
}
