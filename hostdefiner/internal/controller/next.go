package controller

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/hostdefiner/internal/placement"
)

// Facts are what the next step for a (node, pool) is decided from, read
// from the caches once per sync: the definition, its node and the node's
// manager pods, and the little else the decision needs.
type Facts struct {
	// Key is the (node, pool).
	Key Key
	// Definition is the HostDefinition of Key; nil when there is none.
	Definition *hostpathv1.HostDefinition
	// Node is the Node; nil when it is deleted.
	Node *v1.Node
	// ManagerPods are the manager pods on the node, in any state.
	ManagerPods []*v1.Pod
	// DaemonSet is the manager DaemonSet; nil when it is missing, and then
	// nothing is decided.
	DaemonSet *appsv1.DaemonSet
	// PoolNamed says that a StorageClass of the provisioner names the pool.
	PoolNamed bool
	// Unlisted says that a multihost volume of the pool does not list the
	// node among the nodes that hold its directory.
	Unlisted bool
	// Now is the controller clock's time.
	Now time.Time
}

// Action is what a Step does.
type Action string

// The actions of a Step.
const (
	// ActNothing writes nothing (the key is synced again after Step.After
	// when it is positive).
	ActNothing Action = "Nothing"
	// ActCreate creates the definition; then the next step is decided on it.
	ActCreate Action = "Create"
	// ActCopyLabel sets the definition's AvoidDeletionLabel to Step.Label
	// (removes it when empty), the node's; then the next step is decided
	// on the updated definition.
	ActCopyLabel Action = "CopyLabel"
	// ActClearBlocked drops the UndefineBlocked condition of a definition
	// whose node is wanted again (and syncs again after Step.After).
	ActClearBlocked Action = "ClearUndefineBlocked"
	// ActWaitForManager records Step.Status, PendingForCreation, with
	// reason ManagerNotReady and Step.Message in the Defined condition: the
	// node has no manager pod yet, and no try is counted.
	ActWaitForManager Action = "WaitForManager"
	// ActTry makes one define try from Step.Status, calling Step.Pod.
	ActTry Action = "Try"
	// ActBlockUndefine records the UndefineBlocked condition (Step.Reason,
	// Step.Message) of a node that left, whose definition a guard keeps.
	ActBlockUndefine Action = "BlockUndefine"
	// ActUndefine deletes the definition of a node that left (Step.Reason,
	// Step.Message: why); a failure is counted from Step.Status.
	ActUndefine Action = "Undefine"
)

// Step is what a sync does next.
type Step struct {
	Action Action
	// After, when positive, is when the key is synced again: the next try
	// time, or the next re-verify.
	After time.Duration
	// Status is the status a try, an undefine or a wait for the manager
	// starts from: the definition's (a copy), with the tries of a new round
	// reset and the retry annotation's value recorded.
	Status hostpathv1.HostDefinitionStatus
	// Pod is the manager pod a try calls: a serving one on the node; nil
	// when none serves (the try then fails with ManagerNotReady).
	Pod *v1.Pod
	// Label is the value of AvoidDeletionLabel for ActCopyLabel.
	Label string
	// Reason and Message say why: the node leaves (ActUndefine), a guard
	// keeps its definition (ActBlockUndefine), the node has no manager pod
	// (ActWaitForManager, Message only).
	Reason, Message string
	// Retry says that a new value of the RetryAnnotation started this
	// round.
	Retry bool
}

// NextStep decides what a sync of in.Key does next, with no side effect:
//
//   - The node is wanted for the pool when a class names the pool, the
//     Node exists and the manager DaemonSet runs there (wanted). Without
//     the DaemonSet nothing is decided.
//   - Not wanted: nothing without a definition; else undefine, unless a
//     guard keeps it (leave).
//   - Wanted: create the definition if missing, copy the node's
//     AvoidDeletionLabel onto it, then a define try when one is due, or
//     a wait (define).
func NextStep(cfg Config, in Facts) Step {
	def := in.Definition
	stay, why := wanted(cfg, in)
	switch {
	case why.unknown, !stay && def == nil:
		return Step{Action: ActNothing}
	case !stay:
		return leave(cfg, in, why)
	case def == nil:
		return Step{Action: ActCreate}
	}
	if want := in.Node.Labels[hostpathv1.AvoidDeletionLabel]; def.Labels[hostpathv1.AvoidDeletionLabel] != want {
		return Step{Action: ActCopyLabel, Label: want}
	}
	return define(cfg, in)
}

// leaving says why a node is not (or no longer) wanted for a pool.
type leaving struct {
	reason, message string
	// unknown: the manager DaemonSet is missing, so nothing is decided.
	unknown bool
}

// Reasons a node leaves a pool.
const (
	ReasonNodeDeleted   = "NodeDeleted"
	ReasonNoClass       = "NoStorageClass"
	ReasonNoDaemonSet   = "NoManagerDaemonSet"
	leaveReasonNewNode  = "NotScheduled"
	defaultLeaveMessage = "the manager DaemonSet does not run on the node"
)

// wanted decides whether the node should have a definition of the pool:
// an existing one stays while the DaemonSet would keep its pod, a new one
// needs the DaemonSet to start a pod or a manager pod to be there.
func wanted(cfg Config, in Facts) (bool, leaving) {
	switch {
	case !in.PoolNamed:
		return false, leaving{reason: ReasonNoClass, message: fmt.Sprintf(
			"no StorageClass of the provisioner (%s) names pool %q any more", cfg.ProvisionerNames, in.Key.Pool)}
	case in.Node == nil:
		return false, leaving{reason: ReasonNodeDeleted, message: fmt.Sprintf("Node %q was deleted", in.Key.Node)}
	case in.DaemonSet == nil:
		return false, leaving{unknown: true}
	case in.Definition != nil:
		d := placement.ShouldRun(in.DaemonSet, in.Node)
		return d.Runs, leaving{reason: d.Reason, message: d.Message}
	}
	if d := placement.ShouldSchedule(in.DaemonSet, in.Node); d.Runs {
		return true, leaving{}
	}
	// A manager pod the DaemonSet would not keep (being evicted or deleted)
	// must not bring back the definition an existing one would lose.
	if d := placement.ShouldRun(in.DaemonSet, in.Node); !d.Runs {
		return false, leaving{reason: d.Reason, message: d.Message}
	}
	return liveManagerPod(in.ManagerPods, false) != nil, leaving{reason: leaveReasonNewNode, message: defaultLeaveMessage}
}

// liveManagerPod returns the first of pods that is not terminating (that also
// serves, when serving), or nil.
func liveManagerPod(pods []*v1.Pod, serving bool) *v1.Pod {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if !serving || (p.Status.PodIP != "" && component.PodServing(p)) {
			return p
		}
	}
	return nil
}

// leave is the step for the definition of a node that left: blocked by a
// guard, waiting for the next undefine try or given up, or an undefine.
func leave(cfg Config, in Facts, why leaving) Step {
	def := in.Definition
	st := *def.Status.DeepCopy()
	if reason, msg := undefineBlocked(cfg, def, in.Node, why); reason != "" {
		if cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionUndefineBlocked); cond != nil && cond.Reason == reason && cond.Message == msg {
			return Step{Action: ActNothing}
		}
		return Step{Action: ActBlockUndefine, Reason: reason, Message: msg}
	}
	retry := def.Annotations[hostpathv1.RetryAnnotation]
	cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionDefined)
	switch {
	case cond == nil || cond.Reason != ReasonUndefineFailed || retry != st.Retry:
		// A new round of undefine tries.
		st.Tries, st.Retry = 0, retry
	case st.Phase == hostpathv1.PhaseError:
		return Step{Action: ActNothing}
	case st.NextTryTime != nil && st.NextTryTime.Sub(in.Now) > 0:
		return Step{Action: ActNothing, After: st.NextTryTime.Sub(in.Now)}
	}
	return Step{Action: ActUndefine, Status: st, Reason: why.reason, Message: why.message}
}

// undefineBlocked returns the reason and message when a guard keeps the
// definition of a node that left.
func undefineBlocked(cfg Config, def *hostpathv1.HostDefinition, node *v1.Node, why leaving) (string, string) {
	left := fmt.Sprintf("Node %s left pool %s (%s: %s)", def.Spec.NodeName, def.Spec.Pool, why.reason, why.message)
	if !cfg.AllowDelete {
		return ReasonAllowDeleteFalse, left + ", but the host definer runs with --allow-delete=false: the HostDefinition is kept"
	}
	if def.Labels[hostpathv1.AvoidDeletionLabel] == "true" || (node != nil && node.Labels[hostpathv1.AvoidDeletionLabel] == "true") {
		return ReasonAvoidDeletion, left + fmt.Sprintf(", but the node has the label %s=true: the HostDefinition is kept", hostpathv1.AvoidDeletionLabel)
	}
	return "", ""
}

// define is the step for the definition of a wanted node: a define try
// when one is due (for a definition not Ready yet when its next try time
// has come or a manager pod serves since the last try, for a Ready one when
// it must be verified again), else a wait. No try is made, and none
// counted, while the node has no manager pod at all: the DaemonSet has not
// started it yet.
func define(cfg Config, in Facts) Step {
	def := in.Definition
	st := *def.Status.DeepCopy()
	serving := liveManagerPod(in.ManagerPods, true)
	if retry := def.Annotations[hostpathv1.RetryAnnotation]; retry != st.Retry {
		st.Retry = retry
		step := newRound(cfg, in, st, serving)
		step.Retry = true
		return step
	}
	switch st.Phase {
	case hostpathv1.PhaseError:
		if errorEnds(def, serving) {
			return newRound(cfg, in, st, serving)
		}
		return waiting(def, 0)
	case hostpathv1.PhaseReady:
		if due, after := verifyDue(cfg, in, serving); !due {
			return waiting(def, after)
		}
		return Step{Action: ActTry, Status: st, Pod: serving}
	case hostpathv1.PhasePendingForCreation:
		// A manager pod that serves since the last try is tried at once.
		if st.NextTryTime != nil && (serving == nil || serving.UID == st.ManagerPodUID) {
			if after := st.NextTryTime.Sub(in.Now); after > 0 {
				return waiting(def, after)
			}
		}
		return tryWhenManaged(cfg, in, st, serving)
	}
	// New, or wanted again while PendingForDeletion.
	return newRound(cfg, in, st, serving)
}

// waiting is the step of a wanted definition that waits: nothing to do but
// drop its UndefineBlocked condition, if any, and sync again after after.
func waiting(def *hostpathv1.HostDefinition, after time.Duration) Step {
	if meta.FindStatusCondition(def.Status.Conditions, hostpathv1.ConditionUndefineBlocked) != nil {
		return Step{Action: ActClearBlocked, After: after}
	}
	return Step{Action: ActNothing, After: after}
}

// errorEnds says whether a definition in Error starts a new round by
// itself: when it was given up for want of a Ready or answering manager and
// a new manager pod serves now, or when it was an undefine that failed and
// the node is wanted again.
func errorEnds(def *hostpathv1.HostDefinition, serving *v1.Pod) bool {
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
func newRound(cfg Config, in Facts, st hostpathv1.HostDefinitionStatus, serving *v1.Pod) Step {
	st.Tries, st.NextTryTime = 0, nil
	if st.Phase != hostpathv1.PhaseReady {
		st.Phase = hostpathv1.PhasePendingForCreation
	}
	return tryWhenManaged(cfg, in, st, serving)
}

// tryWhenManaged tries, unless the node has no manager pod at all: then
// the definition waits for one (PendingForCreation, reason
// ManagerNotReady, no try counted; the pod's events sync it again).
func tryWhenManaged(cfg Config, in Facts, st hostpathv1.HostDefinitionStatus, serving *v1.Pod) Step {
	if liveManagerPod(in.ManagerPods, false) != nil {
		return Step{Action: ActTry, Status: st, Pod: serving}
	}
	msg := fmt.Sprintf("no manager pod on node %q yet: waiting for the DaemonSet %s to start one", in.Key.Node, cfg.ManagerDaemonSet)
	cond := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionDefined)
	if st.Phase == hostpathv1.PhasePendingForCreation && st.NextTryTime == nil && cond != nil && cond.Message == msg {
		return Step{Action: ActNothing}
	}
	st.Phase, st.NextTryTime = hostpathv1.PhasePendingForCreation, nil
	return Step{Action: ActWaitForManager, Status: st, Message: msg}
}

// verifyDue says whether a Ready definition must be verified again: a new
// manager pod serves on the node, the one that served the last try became
// Ready again since, a multihost volume of the pool does not list the
// node, or the re-verify period has passed (else after is when it will
// have). While no manager pod serves, a Ready definition waits.
func verifyDue(cfg Config, in Facts, pod *v1.Pod) (due bool, after time.Duration) {
	st := in.Definition.Status
	switch {
	case pod == nil:
		return false, 0
	case pod.UID != st.ManagerPodUID:
		return true, 0
	// The same pod, Ready again since the last try: its manager restarted
	// (a container restart, or a reboot of the node, whose pods stay while
	// their containers start again), which only a new look at the host
	// tells.
	case st.LastTryTime != nil && readySince(pod, st.LastTryTime.Time):
		return true, 0
	case in.Unlisted:
		return true, 0
	case cfg.ReverifyPeriod <= 0 || st.LastTryTime == nil:
		return st.LastTryTime == nil, 0
	}
	after = st.LastTryTime.Add(cfg.ReverifyPeriod).Sub(in.Now)
	return after <= 0, max(after, 0)
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
