package controller

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
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
	msg := fmt.Sprintf("Node %s is defined on pool %s: manager pod %s, host ID %s, %d of %d bytes free, %d multihost volumes",
		def.Spec.NodeName, def.Spec.Pool, st.ManagerPod, st.HostID, st.FreeBytes, st.CapacityBytes, st.MultihostVolumes)
	st = definedStatus(st, msg, c.clock.Now())
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

// definedStatus is st after a define try that completed at now: Ready
// (since its last try, when it was not Ready), no tries counted, no next
// try, the Defined condition True with msg, no UndefineBlocked condition.
func definedStatus(st hostpathv1.HostDefinitionStatus, msg string, now time.Time) hostpathv1.HostDefinitionStatus {
	if st.Phase != hostpathv1.PhaseReady {
		st.DefinedTime = st.LastTryTime
	}
	st.Phase, st.Tries, st.NextTryTime = hostpathv1.PhaseReady, 0, nil
	setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined, msg, now)
	meta.RemoveStatusCondition(&st.Conditions, hostpathv1.ConditionUndefineBlocked)
	return st
}

// failed records a try that did not complete (failedStatus), with its
// event, and queues the next try.
func (c *Controller) failed(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus, te *tryError) error {
	st, wait := failedStatus(c.cfg, st, te, c.clock.Now())
	klog.FromContext(ctx).Info("Define try did not complete", "try", st.Tries, "reason", te.reason, "message", te.message)
	if err := c.writeStatus(ctx, def, st); err != nil {
		return err
	}
	if st.Phase == hostpathv1.PhaseError {
		c.event(def, v1.EventTypeWarning, EventDefineError, "Gave up defining node %s on pool %s after %d tries: %s: %s; "+retryHint,
			def.Spec.NodeName, def.Spec.Pool, st.Tries, te.reason, te.message, def.Name, hostpathv1.RetryAnnotation)
		return nil
	}
	c.event(def, v1.EventTypeWarning, EventDefinePending, "Try %d of %d to define node %s on pool %s did not complete: %s: %s; next try in %s",
		st.Tries, c.cfg.MaxTries, def.Spec.NodeName, def.Spec.Pool, te.reason, te.message, wait)
	c.queue.AddAfter(keyOf(def), wait)
	return nil
}

// failedStatus is st after a define try that did not complete at now (st
// has its LastTryTime): one more try counted, the reason in the Defined
// condition; Error after the last try of the round (at once for a final
// error), else PendingForCreation with the next try after wait, the
// backoff.
func failedStatus(cfg Config, st hostpathv1.HostDefinitionStatus, te *tryError, now time.Time) (_ hostpathv1.HostDefinitionStatus, wait time.Duration) {
	st.Tries++
	setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionFalse, te.reason, te.message, now)
	if te.final || st.Tries >= cfg.MaxTries {
		st.Phase, st.NextTryTime = hostpathv1.PhaseError, nil
		return st, 0
	}
	wait = backoff(cfg, st.Tries)
	next := metav1.NewTime(st.LastTryTime.Add(wait))
	st.Phase, st.NextTryTime = hostpathv1.PhasePendingForCreation, &next
	return st, wait
}

// blockUndefine records that a guard keeps the definition of a node that
// left.
func (c *Controller) blockUndefine(ctx context.Context, def *hostpathv1.HostDefinition, step Step) error {
	st := *def.Status.DeepCopy()
	setCondition(&st, hostpathv1.ConditionUndefineBlocked, metav1.ConditionTrue, step.Reason, step.Message, c.clock.Now())
	if err := c.writeStatus(ctx, def, st); err != nil {
		return err
	}
	c.event(def, v1.EventTypeWarning, EventUndefineBlocked, "%s", step.Message)
	return nil
}

// undefine removes the definition of a node that left; a failure is
// counted from step.Status.
func (c *Controller) undefine(ctx context.Context, def *hostpathv1.HostDefinition, step Step) error {
	c.metrics.tries.WithLabelValues("undefine").Inc()
	msg := fmt.Sprintf("Node %s left pool %s (%s: %s): removing its HostDefinition. Its directories and PersistentVolumes are kept",
		def.Spec.NodeName, def.Spec.Pool, step.Reason, step.Message)
	uid := def.UID
	err := c.hostpath.HostpathV1().HostDefinitions().Delete(ctx, def.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err == nil || apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("Undefined the node", "reason", step.Reason, "message", step.Message)
		c.event(def, v1.EventTypeNormal, EventUndefined, "%s", msg)
		return nil
	}
	return c.undefineFailed(ctx, def, step.Status, fmt.Errorf("delete HostDefinition %s: %w", def.Name, err))
}

// undefineFailed records an undefine try that did not complete
// (undefineFailedStatus), with its event, and queues the next try.
func (c *Controller) undefineFailed(ctx context.Context, def *hostpathv1.HostDefinition, st hostpathv1.HostDefinitionStatus, err error) error {
	st, wait := undefineFailedStatus(c.cfg, st, err, c.clock.Now())
	if werr := c.writeStatus(ctx, def, st); werr != nil {
		return werr
	}
	if st.Phase == hostpathv1.PhaseError {
		c.event(def, v1.EventTypeWarning, EventUndefineError, "Gave up undefining node %s after %d tries: %v; "+retryHint,
			def.Spec.NodeName, st.Tries, err, def.Name, hostpathv1.RetryAnnotation)
		return nil
	}
	c.event(def, v1.EventTypeWarning, EventUndefinePending, "Try %d of %d to undefine node %s did not complete: %v; next try in %s",
		st.Tries, c.cfg.MaxTries, def.Spec.NodeName, err, wait)
	c.queue.AddAfter(keyOf(def), wait)
	return nil
}

// undefineFailedStatus is st after an undefine try that failed with err
// at now: one more try counted, the error in the Defined condition (reason
// UndefineFailed); Error after the last try of the round, else
// PendingForDeletion with the next try after wait, the backoff.
func undefineFailedStatus(cfg Config, st hostpathv1.HostDefinitionStatus, err error, now time.Time) (_ hostpathv1.HostDefinitionStatus, wait time.Duration) {
	st.Tries++
	tried := metav1.NewTime(now)
	st.LastTryTime = &tried
	setCondition(&st, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonUndefineFailed, err.Error(), now)
	if st.Tries >= cfg.MaxTries {
		st.Phase, st.NextTryTime = hostpathv1.PhaseError, nil
		return st, 0
	}
	wait = backoff(cfg, st.Tries)
	next := metav1.NewTime(now.Add(wait))
	st.Phase, st.NextTryTime = hostpathv1.PhasePendingForDeletion, &next
	return st, wait
}

// backoff is the wait after the tries-th failed try of a round: the
// tries-th step of a wait.Backoff from InitialBackoff, doubling up to
// MaxBackoff.
func backoff(cfg Config, tries int32) time.Duration {
	b := wait.Backoff{Duration: cfg.InitialBackoff, Factor: 2, Cap: cfg.MaxBackoff, Steps: int(tries)}
	d := b.Step()
	for i := int32(1); i < tries; i++ {
		d = b.Step()
	}
	return min(d, cfg.MaxBackoff)
}

// setCondition sets a condition, stamped now when its status changes.
func setCondition(st *hostpathv1.HostDefinitionStatus, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	if len(msg) > conditionMessageMaximum {
		msg = msg[:conditionMessageMaximum]
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now),
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
