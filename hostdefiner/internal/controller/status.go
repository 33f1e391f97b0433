package controller

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
)

// Event reasons on HostDefinitions.
const (
	EventDefined           = "Defined"
	EventWaitingForManager = "WaitingForManager"
	EventDefinePending     = "DefinePending"
	EventDefineError       = "DefineError"
	EventRebooted          = "Rebooted"
	EventBackfilled        = "Backfilled"
	EventUndefined         = "Undefined"
	EventUndefineBlocked   = "UndefineBlocked"
	EventUndefinePending   = "UndefinePending"
	EventUndefineError     = "UndefineError"
)

// Condition reasons set by outcomes other than a failed try.
const (
	ReasonDefined           = "Defined"
	ReasonUndefineFailed    = "UndefineFailed"
	ReasonAllowDeleteFalse  = "AllowDeleteFalse"
	ReasonAvoidDeletion     = "AvoidDeletionLabel"
	retryHint               = "to try again: kubectl annotate hostdefinition %s %s=\"$(date +%%s)\" --overwrite"
	conditionMessageMaximum = 32 * 1024
)

// defined records a successful try: Ready, with the node recorded in the
// multihost volumes of the pool.
func (c *Controller) defined(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus) error {
	was := st.Phase
	st.Phase, st.Tries, st.NextTryTime = hostpathv1.PhaseReady, 0, nil
	if was != hostpathv1.PhaseReady {
		st.DefinedTime = st.LastTryTime
	}
	msg := fmt.Sprintf("Node %s is defined on pool %s: manager pod %s, host ID %s, %d of %d bytes free, %d multihost volumes",
		def.Spec.NodeName, def.Spec.Pool, st.ManagerPod, st.HostID, st.FreeBytes, st.CapacityBytes, st.MultihostVolumes)
	c.setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined, msg)
	meta.RemoveStatusCondition(&st.Conditions, hostpathv1.ConditionUndefineBlocked)
	if err := c.writeStatus(ctx, def, st); err != nil {
		return err
	}
	if was != hostpathv1.PhaseReady {
		c.event(def, v1.EventTypeNormal, EventDefined, "%s", msg)
	}
	if created := st.BackfilledVolumes - def.Status.BackfilledVolumes; created > 0 {
		c.event(def, v1.EventTypeNormal, EventBackfilled, "Created %d missing multihost directories of pool %s on node %s",
			created, def.Spec.Pool, def.Spec.NodeName)
	}
	if c.cfg.ReverifyPeriod > 0 {
		c.queue.AddAfter(keyOf(def), c.cfg.ReverifyPeriod)
	}
	return c.recordNode(ctx, def.Spec.NodeName, def.Spec.Pool)
}

// failed records a try that did not complete: PendingForCreation with a
// next try after the backoff, or Error after the last try (or at once for a
// final error).
func (c *Controller) failed(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus, te *tryError) error {
	st.Tries++
	klog.FromContext(ctx).Info("Define try did not complete", "try", st.Tries, "reason", te.reason, "message", te.message)
	c.setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionFalse, te.reason, te.message)
	if te.final || st.Tries >= c.cfg.MaxTries {
		st.Phase, st.NextTryTime = hostpathv1.PhaseError, nil
		if err := c.writeStatus(ctx, def, st); err != nil {
			return err
		}
		c.event(def, v1.EventTypeWarning, EventDefineError, "Gave up defining node %s on pool %s after %d tries: %s: %s; "+retryHint,
			def.Spec.NodeName, def.Spec.Pool, st.Tries, te.reason, te.message, def.Name, hostpathv1.RetryAnnotation)
		return nil
	}
	wait := c.backoff(st.Tries)
	next := metav1.NewTime(st.LastTryTime.Add(wait))
	st.Phase, st.NextTryTime = hostpathv1.PhasePendingForCreation, &next
	if err := c.writeStatus(ctx, def, st); err != nil {
		return err
	}
	c.event(def, v1.EventTypeWarning, EventDefinePending, "Try %d of %d to define node %s on pool %s did not complete: %s: %s; next try in %s",
		st.Tries, c.cfg.MaxTries, def.Spec.NodeName, def.Spec.Pool, te.reason, te.message, wait)
	c.queue.AddAfter(keyOf(def), wait)
	return nil
}

// undefine removes the definition of a node that left, unless a guard
// keeps it.
func (c *Controller) undefine(ctx context.Context, def *hostpathv1.HostDefinition, node *v1.Node, why leaving) error {
	st := def.Status
	if reason, msg := c.undefineBlocked(def, node, why); reason != "" {
		cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionUndefineBlocked)
		if cond != nil && cond.Reason == reason && cond.Message == msg {
			return nil
		}
		c.setCondition(&st, hostpathv1.ConditionUndefineBlocked, metav1.ConditionTrue, reason, msg)
		if err := c.writeStatus(ctx, def, st); err != nil {
			return err
		}
		c.event(def, v1.EventTypeWarning, EventUndefineBlocked, "%s", msg)
		return nil
	}
	if wait, stop := c.undefineWaits(def); stop {
		if wait > 0 {
			c.queue.AddAfter(keyOf(def), wait)
		}
		return nil
	}
	c.metrics.tries.WithLabelValues("undefine").Inc()
	msg := fmt.Sprintf("Node %s left pool %s (%s: %s): removing its HostDefinition. Its directories and PersistentVolumes are kept",
		def.Spec.NodeName, def.Spec.Pool, why.reason, why.message)
	uid := def.UID
	err := c.hostpath.HostpathV1().HostDefinitions().Delete(ctx, def.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err == nil || apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("Undefined the node", "reason", why.reason, "message", why.message)
		c.event(def, v1.EventTypeNormal, EventUndefined, "%s", msg)
		return nil
	}
	return c.undefineFailed(ctx, def, st, fmt.Errorf("delete HostDefinition %s: %w", def.Name, err))
}

// undefineBlocked returns the reason and message when a guard keeps the
// definition of a node that left.
func (c *Controller) undefineBlocked(def *hostpathv1.HostDefinition, node *v1.Node, why leaving) (string, string) {
	left := fmt.Sprintf("Node %s left pool %s (%s: %s)", def.Spec.NodeName, def.Spec.Pool, why.reason, why.message)
	if !c.cfg.AllowDelete {
		return ReasonAllowDeleteFalse, left + ", but the host definer runs with --allow-delete=false: the HostDefinition is kept"
	}
	if def.Labels[hostpathv1.AvoidDeletionLabel] == "true" || (node != nil && node.Labels[hostpathv1.AvoidDeletionLabel] == "true") {
		return ReasonAvoidDeletion, left + fmt.Sprintf(", but the node has the label %s=true: the HostDefinition is kept", hostpathv1.AvoidDeletionLabel)
	}
	return "", ""
}

// undefineWaits says whether an undefine try must wait (the backoff of a
// failed one) or must not happen (the round ended in Error).
func (c *Controller) undefineWaits(def *hostpathv1.HostDefinition) (time.Duration, bool) {
	st := def.Status
	cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionDefined)
	if cond == nil || cond.Reason != ReasonUndefineFailed || def.Annotations[hostpathv1.RetryAnnotation] != st.Retry {
		return 0, false
	}
	if st.Phase == hostpathv1.PhaseError {
		return 0, true
	}
	if st.NextTryTime != nil {
		if wait := st.NextTryTime.Sub(c.clock.Now()); wait > 0 {
			return wait, true
		}
	}
	return 0, false
}

// undefineFailed records an undefine try that did not complete.
func (c *Controller) undefineFailed(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus, err error) error {
	cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionDefined)
	if cond == nil || cond.Reason != ReasonUndefineFailed || def.Annotations[hostpathv1.RetryAnnotation] != st.Retry {
		st.Tries, st.Retry = 0, def.Annotations[hostpathv1.RetryAnnotation]
	}
	st.Tries++
	now := metav1.NewTime(c.clock.Now())
	st.LastTryTime = &now
	c.setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonUndefineFailed, err.Error())
	if st.Tries >= c.cfg.MaxTries {
		st.Phase, st.NextTryTime = hostpathv1.PhaseError, nil
		if werr := c.writeStatus(ctx, def, st); werr != nil {
			return werr
		}
		c.event(def, v1.EventTypeWarning, EventUndefineError, "Gave up undefining node %s after %d tries: %v; "+retryHint,
			def.Spec.NodeName, st.Tries, err, def.Name, hostpathv1.RetryAnnotation)
		return nil
	}
	wait := c.backoff(st.Tries)
	next := metav1.NewTime(now.Add(wait))
	st.Phase, st.NextTryTime = hostpathv1.PhasePendingForDeletion, &next
	if werr := c.writeStatus(ctx, def, st); werr != nil {
		return werr
	}
	c.event(def, v1.EventTypeWarning, EventUndefinePending, "Try %d of %d to undefine node %s did not complete: %v; next try in %s",
		st.Tries, c.cfg.MaxTries, def.Spec.NodeName, err, wait)
	c.queue.AddAfter(keyOf(def), wait)
	return nil
}

// backoff is the wait after the tries-th failed try: InitialBackoff doubled
// for each earlier failure, at most MaxBackoff.
func (c *Controller) backoff(tries int32) time.Duration {
	d := c.cfg.InitialBackoff
	for i := int32(1); i < tries && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.cfg.MaxBackoff)
}

// setCondition sets a condition, stamped with the controller's clock.
func (c *Controller) setCondition(st *hostpathv1.HostDefinitionStatus, typ string, status metav1.ConditionStatus, reason, msg string) {
	if len(msg) > conditionMessageMaximum {
		msg = msg[:conditionMessageMaximum]
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
}

// writeStatus writes st through the status subresource.
func (c *Controller) writeStatus(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus) error {
	def = def.DeepCopy()
	def.Status = st
	_, err := c.hostpath.HostpathV1().HostDefinitions().UpdateStatus(ctx, def, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("update the status of HostDefinition %s: %w", def.Name, err)
	}
	return nil
}

// event records an event on a definition.
func (c *Controller) event(def *hostpathv1.HostDefinition, typ, reason, format string, args ...any) {
	c.recorder.Eventf(def, typ, reason, format, args...)
}

// keyOf is the key of a definition.
func keyOf(def *hostpathv1.HostDefinition) Key {
	return Key{Node: def.Spec.NodeName, Pool: def.Spec.Pool}
}
