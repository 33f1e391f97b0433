package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
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

// define runs a define try when one is due: for a definition not Ready yet
// when its next try time has come (or a manager pod serves since the last
// try), for a Ready one when it must be verified again. No try is made, and
// none counted, while the node has no manager pod at all: the DaemonSet has
// not started it yet.
func (c *Controller) define(ctx context.Context, def *hostpathv1.HostDefinition) error {
	st := def.Status
	serving, err := c.managerPod(def.Spec.NodeName, true)
	if err != nil {
		return err
	}
	if retry := def.Annotations[hostpathv1.RetryAnnotation]; retry != st.Retry {
		klog.FromContext(ctx).Info("Retry requested: starting a new round of tries", "annotation", hostpathv1.RetryAnnotation, "value", retry)
		st.Retry = retry
		return c.newRound(ctx, def, st)
	}
	switch st.Phase {
	case hostpathv1.PhaseError:
		if !c.errorEnds(def, serving) {
			return c.clearUndefineBlocked(ctx, def)
		}
		return c.newRound(ctx, def, st)
	case hostpathv1.PhaseReady:
		if due, wait := c.verifyDue(def, serving); !due {
			if wait > 0 {
				c.queue.AddAfter(keyOf(def), wait)
			}
			return c.clearUndefineBlocked(ctx, def)
		}
		return c.try(ctx, def, st)
	case hostpathv1.PhasePendingForCreation:
		// A manager pod that serves since the last try is tried at once.
		if st.NextTryTime != nil && (serving == nil || serving.UID == st.ManagerPodUID) {
			if wait := st.NextTryTime.Sub(c.clock.Now()); wait > 0 {
				c.queue.AddAfter(keyOf(def), wait)
				return c.clearUndefineBlocked(ctx, def)
			}
		}
		return c.tryWhenManaged(ctx, def, st)
	}
	// New, or wanted again while PendingForDeletion.
	return c.newRound(ctx, def, st)
}

// errorEnds says whether a definition in Error starts a new round by
// itself: when it was given up for want of a Ready or answering manager and
// a new manager pod serves now, or when it was an undefine that failed and
// the node is wanted again.
func (c *Controller) errorEnds(def *hostpathv1.HostDefinition, serving *v1.Pod) bool {
	cond := meta.FindStatusCondition(def.Status.Conditions, hostpathv1.ConditionDefined)
	switch {
	case cond == nil:
		return false
	case cond.Reason == ReasonUndefineFailed:
		return true
	case cond.Reason == ReasonManagerNotReady || cond.Reason == ReasonManagerFailed:
		return serving != nil && serving.UID != def.Status.ManagerPodUID
	}
	return false
}

// newRound starts a round of tries from the first.
func (c *Controller) newRound(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus) error {
	st.Tries, st.NextTryTime = 0, nil
	if st.Phase != hostpathv1.PhaseReady {
		st.Phase = hostpathv1.PhasePendingForCreation
	}
	return c.tryWhenManaged(ctx, def, st)
}

// tryWhenManaged tries, unless the node has no manager pod at all: then
// the definition waits for one (PendingForCreation, reason
// ManagerNotReady, no try counted; the pod's events sync it again).
func (c *Controller) tryWhenManaged(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus) error {
	pod, err := c.managerPod(def.Spec.NodeName, false)
	if err != nil || pod != nil {
		if err != nil {
			return err
		}
		return c.try(ctx, def, st)
	}
	msg := fmt.Sprintf("no manager pod on node %q yet: waiting for the DaemonSet %s to start one", def.Spec.NodeName, c.cfg.ManagerDaemonSet)
	cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionDefined)
	if st.Phase == hostpathv1.PhasePendingForCreation && st.NextTryTime == nil && cond != nil && cond.Message == msg {
		return nil
	}
	st.Phase, st.NextTryTime = hostpathv1.PhasePendingForCreation, nil
	c.setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonManagerNotReady, msg)
	if err := c.writeStatus(ctx, def, st); err != nil {
		return err
	}
	c.event(def, v1.EventTypeNormal, EventWaitingForManager, "Node %s is to be defined on pool %s: %s", def.Spec.NodeName, def.Spec.Pool, msg)
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

// verifyDue says whether a Ready definition must be verified again: a new
// manager pod serves on the node, a multihost volume of the pool does not
// list the node, or the re-verify period has passed (else wait is when it
// will have). While no manager pod serves, a Ready definition waits.
func (c *Controller) verifyDue(def *hostpathv1.HostDefinition, pod *v1.Pod) (bool, time.Duration) {
	if pod == nil {
		return false, 0
	}
	if pod.UID != def.Status.ManagerPodUID {
		return true, 0
	}
	// The same pod, Ready again since the last try: its manager restarted
	// (a container restart, or a reboot of the node, whose pods stay while
	// their containers start again), which only a new look at the host
	// tells.
	if last := def.Status.LastTryTime; last != nil && readySince(pod, last.Time) {
		return true, 0
	}
	if vols, err := c.multihostVolumes(def.Spec.Pool); err == nil {
		for _, m := range vols {
			if !m.holds(def.Spec.NodeName) {
				return true, 0
			}
		}
	}
	if c.cfg.ReverifyPeriod <= 0 || def.Status.LastTryTime == nil {
		return def.Status.LastTryTime == nil, 0
	}
	wait := def.Status.LastTryTime.Add(c.cfg.ReverifyPeriod).Sub(c.clock.Now())
	return wait <= 0, wait
}

// readySince reports whether the pod became Ready after t: its Ready
// condition is True and last changed after t (the kubelet's clock against
// the host definer's, give or take their skew). The condition is what the
// informer cache keeps of a pod's status (see cachetrim), not the
// containers' statuses.
func readySince(pod *v1.Pod, t time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue && c.LastTransitionTime.Time.After(t)
		}
	}
	return false
}

// try makes one define try from status st and records its outcome.
func (c *Controller) try(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus) error {
	c.metrics.tries.WithLabelValues("define").Inc()
	err := c.attempt(ctx, def, &st)
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

// attempt is the work of a define try; it fills st with what it found.
func (c *Controller) attempt(ctx context.Context, def *hostpathv1.HostDefinition, st *hostpathv1.HostDefinitionStatus) error {
	node, pool := def.Spec.NodeName, def.Spec.Pool
	pod, err := c.managerPod(node, true)
	if err != nil {
		return err
	}
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
		st.SizeEnforcement = "none"
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
