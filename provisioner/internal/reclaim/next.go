package reclaim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/fanout"
)

// Path says who asks for a PV's next step.
type Path int

const (
	// ControllerPath is the Controller's pass over a PV of its cache.
	ControllerPath Path = iota
	// LibraryPath is the library's Delete of a Released PV
	// (Controller.Reclaim), on the instance its DeletionGuard chose: the
	// library DELETEs the PV itself once the step says it may go.
	LibraryPath
)

// Facts are what the next step for a PV is decided from, read once per
// pass (Controller.facts): the PV, what the rule of who acts says of it,
// its node, whether Reclaim finished it moments ago and, once the fan-out
// ran, the holders' answers.
type Facts struct {
	// Path is who asks.
	Path Path
	// PV is the PersistentVolume.
	PV *v1.PersistentVolume
	// Ours says that PV is a volume of this provisioner; Loc is where its
	// directory lives.
	Ours bool
	Loc  location
	// Self is this instance's node.
	Self string
	// Acts says that this instance acts for PV now (package
	// responsibility: Finalize under deletion, RecordPolicy otherwise;
	// in the library's path its DeletionGuard asked Delete). Read only
	// when the step depends on it.
	Acts bool
	// NodeGone says that the Node of a node-mode PV is gone (read only
	// when the step depends on it).
	NodeGone bool
	// MarksNodeGone says that this instance marks, unmarks and deletes the
	// PV as of a gone node (responsibility.MarkNodeGone).
	MarksNodeGone bool
	// Remembered says that Reclaim took the directory to its final state
	// in this process moments ago (finishedSet).
	Remembered bool
	// Answers are the holders' states after the fan-out of the step
	// before (ActFanOut); nil until it ran.
	Answers []nodeResult
	// Grace is Config.NodeGoneGrace (0: node-gone handling is off).
	Grace time.Duration
	// Now is the controller clock's time.
	Now time.Time
}

// Action is what a Step does.
type Action string

// The actions of a Step.
const (
	// ActNothing writes nothing (the PV is synced again after Step.After
	// when it is positive; Step.Why, when set, is logged).
	ActNothing Action = "Nothing"
	// ActFanOut makes Step.Op's call on every node that may hold the
	// directory; the next step is decided on their answers.
	ActFanOut Action = "FanOut"
	// ActRelease lets the PV go, its directory in its final state
	// (Step.Outcome): the Controller removes the finalizer, then reports;
	// Reclaim reports, remembers the PV and returns nil, and the library
	// DELETEs it.
	ActRelease Action = "Release"
	// ActWait keeps the PV, and its finalizer, while a node that holds the
	// directory is not done: a Warning (Step.Outcome), and the PV is
	// retried.
	ActWait Action = "Wait"
	// ActRemoveFinalizer removes the finalizer of a PV whose directory
	// Reclaim took to its final state moments ago, without a fan-out.
	ActRemoveFinalizer Action = "RemoveFinalizer"
	// ActAddFinalizer adds the finalizer to a PV of this node made
	// without it.
	ActAddFinalizer Action = "AddFinalizer"
	// ActRecordPolicy says on the PV that every holder records its
	// reclaim policy (hostpathv1.AnnotationRecordedPolicy).
	ActRecordPolicy Action = "RecordPolicy"
	// ActPolicyPending: a holder has not recorded the policy: a Warning
	// ReclaimPolicyPending (Step.Message), and the PV is retried.
	ActPolicyPending Action = "PolicyPending"
	// ActMarkNodeGone marks the PV with the time its Node was first seen
	// missing (from Facts.Now) and says what will happen.
	ActMarkNodeGone Action = "MarkNodeGone"
	// ActUnmarkNodeGone removes the mark of a PV whose Node is back; the
	// next step is decided on the PV without it.
	ActUnmarkNodeGone Action = "UnmarkNodeGone"
	// ActDeleteNodeGone deletes a PV whose Node has been gone since
	// Step.Since, longer than the grace period.
	ActDeleteNodeGone Action = "DeleteNodeGone"
)

// Step is what a pass does next.
type Step struct {
	Action Action
	// Op is the call of ActFanOut.
	Op operation
	// Outcome is what ActRelease and ActWait report.
	Outcome outcome
	// After, with ActNothing, is when the PV is synced again.
	After time.Duration
	// Why, with ActNothing, is logged (V(4)).
	Why string
	// Message is the Warning of ActPolicyPending.
	Message string
	// Nodes are the nodes that recorded the policy (ActRecordPolicy).
	Nodes []string
	// Since is when the Node went (ActDeleteNodeGone).
	Since time.Time
}

// NextStep decides what a pass over a PV does next, with no side effect.
// The deletion invariant holds by its rows: a PV's directory is removed
// only by a fan-out of its own reclaim policy Delete, and a PV goes
// (ActRelease, ActRemoveFinalizer) only once no node that holds its
// directory is waiting.
//
//   - Not this provisioner's PV: nothing (the library's path lets it go).
//   - The library's path: the final state (finalStep), unless Reclaim
//     finished it moments ago.
//   - A PV not under deletion: node-gone handling, the finalizer of a PV
//     made without it, the reclaim policy in the owner records (liveStep).
//   - A PV under deletion: nothing without the finalizer, while Bound or
//     on an instance that does not act for it; the finalizer alone when
//     Reclaim finished it moments ago (remembered); else the final state.
func NextStep(f Facts) Step {
	switch {
	case !f.Ours && f.Path == LibraryPath:
		return Step{Action: ActRelease, Outcome: release("", "", "not a volume of this provisioner")}
	case !f.Ours:
		return Step{Action: ActNothing}
	case f.Path == LibraryPath && f.Remembered:
		return Step{Action: ActNothing, Why: "The directory reached its final state here already; the library deletes the PersistentVolume"}
	case f.Path == LibraryPath:
		return finalStep(f)
	case f.PV.DeletionTimestamp != nil:
		return deletionStep(f)
	}
	return liveStep(f)
}

// deletionStep is the Controller's step for a PV under deletion: nothing
// without the finalizer, while Bound or on an instance that does not act
// for it; the finalizer alone when Reclaim finished it moments ago; else
// the final state.
func deletionStep(f Facts) Step {
	pv := f.PV
	switch {
	case !hasFinalizer(pv):
		return Step{Action: ActNothing}
	case pv.Status.Phase == v1.VolumeBound:
		return Step{Action: ActNothing, Why: "Waiting for the claim to release the PersistentVolume before reclaiming its directory"}
	case !f.Acts:
		return Step{Action: ActNothing}
	case f.Remembered:
		return rememberedStep(f)
	}
	return finalStep(f)
}

// pvProtectionFinalizer is kube-controller-manager's finalizer on every PV
// (the StorageObjectInUseProtection admission plugin adds it), which its
// pv-protection controller removes once the PV is not Bound.
const pvProtectionFinalizer = "kubernetes.io/pv-protection"

// pvProtectionWait bounds how long a pass leaves the finalizer of a
// remembered PV on for pvProtectionFinalizer to go first.
const pvProtectionWait = 30 * time.Second

// rememberedStep removes the finalizer of a PV that Reclaim finished
// moments ago, once kube-controller-manager's finalizer
// kubernetes.io/pv-protection is gone, or pvProtectionWait after the
// deletion: the controller removes its finalizer with an update, which a
// patch of ours landing first would make conflict and repeat (343 more PV
// updates in 1,000 deletions, 2026-11-27). Its update changes the PV,
// which brings the PV back.
func rememberedStep(f Facts) Step {
	pv := f.PV
	if slices.Contains(pv.Finalizers, pvProtectionFinalizer) {
		if wait := pvProtectionWait - f.Now.Sub(pv.DeletionTimestamp.Time); wait > 0 {
			return Step{Action: ActNothing, After: wait}
		}
	}
	return Step{Action: ActRemoveFinalizer}
}

// finalStep takes the directory to its final state: a PV that names no
// directory, or no node in node mode, goes with a Warning; else one
// fan-out of its policy's call, and the answers summed up (finalOutcome):
// the PV goes when no node is waiting, else waits.
func finalStep(f Facts) Step {
	loc := f.Loc
	switch {
	case loc.Pool == "" || loc.Directory == "":
		return Step{Action: ActRelease, Outcome: release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The PersistentVolume names no pool or directory (annotations %s, %s): nothing was removed",
			hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory))}
	case !loc.Multihost && loc.Node == "":
		return Step{Action: ActRelease, Outcome: release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The PersistentVolume names no node (annotation %s): no directory was removed", hostpathv1.AnnotationNode))}
	}
	op := finalOperation(f.PV)
	if f.Answers == nil {
		return Step{Action: ActFanOut, Op: op}
	}
	o := finalOutcome(op, loc, f.Answers)
	if !o.release {
		return Step{Action: ActWait, Outcome: o}
	}
	return Step{Action: ActRelease, Outcome: o}
}

// finalOperation is the operation that takes pv's directory to its final
// state, by the PV's reclaim policy now.
func finalOperation(pv *v1.PersistentVolume) operation {
	if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		return opDelete
	}
	return opRetain
}

// liveStep looks after a PV not under deletion: in node mode, the
// node-gone marks (nodeGoneStep) and the finalizer of a PV of this node
// made without it; then, on the instance that acts for it, its reclaim
// policy in the owner records (policyStep).
//
// A Released (or Failed) PV is not given the finalizer: its claim is gone
// and the library reclaims it and deletes it at once; adding the
// finalizer now would race that for nothing (one more PATCH, and the PV
// would wait for a pass of the Controller).
func liveStep(f Facts) Step {
	pv, loc := f.PV, f.Loc
	if !loc.Multihost {
		if f.Grace > 0 && loc.Node != "" {
			if step, gone := nodeGoneStep(f); gone || step.Action != ActNothing {
				return step
			}
		}
		if loc.Node == f.Self && !hasFinalizer(pv) && pv.Status.Phase != v1.VolumeReleased && pv.Status.Phase != v1.VolumeFailed {
			return Step{Action: ActAddFinalizer}
		}
	}
	if !f.Acts || !loc.Multihost && (loc.Node == "" || f.NodeGone) || loc.Pool == "" || loc.Directory == "" {
		return Step{Action: ActNothing} // nothing to record on a node that is gone, or none
	}
	return policyStep(f)
}

// nodeGoneStep is the node-gone handling of a node-mode PV not under
// deletion (see nodegone.go): it reports whether the PV's node is gone
// (then nothing else is to be done with the PV). Only the instance that
// marks (Facts.MarksNodeGone) marks and unmarks: another may still keep
// the Node found (nodes.Lookup keeps a found Node for a while) after the
// marking one was told it is gone, and each would undo the other's write,
// over and over, with an event each time.
func nodeGoneStep(f Facts) (Step, bool) {
	pv := f.PV
	since, marked := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]
	switch {
	case !f.NodeGone && !marked, !f.MarksNodeGone:
		return Step{Action: ActNothing}, f.NodeGone
	case !f.NodeGone:
		return Step{Action: ActUnmarkNodeGone}, false
	case !marked:
		return Step{Action: ActMarkNodeGone}, true
	}
	t, err := time.Parse(time.RFC3339, since)
	if err != nil {
		return Step{Action: ActMarkNodeGone}, true // not ours to guess: marked again from now
	}
	if deadline := t.Add(f.Grace); f.Now.Before(deadline) {
		return Step{Action: ActNothing, After: deadline.Sub(f.Now)}, true
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete || pv.Status.Phase == v1.VolumeBound {
		return Step{Action: ActNothing}, true
	}
	return Step{Action: ActDeleteNodeGone, Since: t}, true
}

// hasFinalizer reports whether pv carries
// hostpathv1.FinalizerDirectoryProtection.
func hasFinalizer(pv *v1.PersistentVolume) bool {
	return slices.Contains(pv.Finalizers, hostpathv1.FinalizerDirectoryProtection)
}

// policyRecorded reports whether every node holding pv's directory is
// known to record pv's reclaim policy (hostpathv1.AnnotationRecordedPolicy
// says the policy they record).
func policyRecorded(pv *v1.PersistentVolume) bool {
	recorded, ok := pv.Annotations[hostpathv1.AnnotationRecordedPolicy]
	return ok && recorded == hostpathv1.RecordedReclaimPolicy(pv)
}

// policyStep, for a PV whose reclaim policy is not recorded yet
// (policyRecorded), makes the owner record of the directory on every node that
// holds it say the PV's reclaim policy (a fan-out), then says so on the
// PV. While a node that holds it has not recorded it, a Warning names the
// nodes and the PV is retried: a directory whose PV went while its node
// was away is removed by its sweeper only if the record says Delete.
func policyStep(f Facts) Step {
	policy := hostpathv1.RecordedReclaimPolicy(f.PV)
	if recorded, ok := f.PV.Annotations[hostpathv1.AnnotationRecordedPolicy]; ok && recorded == policy {
		return Step{Action: ActNothing}
	}
	if f.Answers == nil {
		return Step{Action: ActFanOut, Op: opRecordPolicy}
	}
	var waiting, done []string
	for _, r := range f.Answers {
		switch {
		case r.state == nodeWaiting && f.Loc.Multihost:
			waiting = append(waiting, fmt.Sprintf("node %q: %s", r.node, r.detail))
		case r.state == nodeWaiting:
			waiting = append(waiting, r.detail)
		case r.state == nodeDone:
			done = append(done, r.node)
		}
	}
	if len(waiting) > 0 {
		return Step{Action: ActPolicyPending, Message: fmt.Sprintf("Reclaim policy %s is not recorded yet with the %s: %s (will retry)",
			policy, f.Loc, strings.Join(waiting, "; "))}
	}
	return Step{Action: ActRecordPolicy, Nodes: done}
}

// finalOutcome sums the holders' states up: retry while any is waiting,
// else release with a message saying where the directory went (or was
// already gone), where it was kept, and which gone nodes were skipped: a
// Warning event when some node kept it or was skipped, a Normal
// DirectoryRetained event when it was marked retained, and only a log
// line (reason DirectoryRemoved) when it was removed everywhere. A
// node-mode PV's messages name its one node once, in the location.
func finalOutcome(op operation, loc location, results []nodeResult) outcome {
	var done, absent, gone, kept, waiting []string
	item := func(r nodeResult) string {
		if !loc.Multihost {
			return r.detail
		}
		return fmt.Sprintf("node %q: %s", r.node, r.detail)
	}
	for _, r := range results {
		switch {
		case r.state == nodeDone:
			done = append(done, r.node)
		case r.state == nodeAbsent:
			absent = append(absent, r.node)
		case r.state == nodeKept:
			kept = append(kept, item(r))
		case r.state == nodeWaiting:
			waiting = append(waiting, item(r))
		case r.detail == detailGone:
			gone = append(gone, r.node)
		}
	}
	verb, failReason := "removed", ReasonDirectoryNotRemoved
	if op == opRetain {
		verb, failReason = "marked retained", ReasonDirectoryNotRetained
	}
	if len(waiting) > 0 {
		msg := fmt.Sprintf("the %s is not %s yet: %s", loc, verb, strings.Join(waiting, "; "))
		return outcome{err: errors.New(msg), eventType: v1.EventTypeWarning, reason: failReason, message: fmt.Sprintf(
			"Waiting before the PersistentVolume can go: %s; the finalizer %s stays until then (will retry)", msg, hostpathv1.FinalizerDirectoryProtection)}
	}
	msg := finalMessage(op, loc, verb, done, absent, kept, gone)
	switch {
	case len(kept) > 0 || len(gone) > 0:
		return release(v1.EventTypeWarning, failReason, msg)
	case op == opRetain && len(done) == 0:
		return release("", "", msg) // nothing was there to retain: logged only
	case op == opDelete:
		// Logged, not an event: the PV goes a moment later.
		return release("", ReasonDirectoryRemoved, msg)
	}
	return release(v1.EventTypeNormal, ReasonDirectoryRetained, msg)
}

// finalMessage says where the directory at loc went by op (verb), or was
// already gone, where it was kept, and which gone nodes were skipped.
func finalMessage(op operation, loc location, verb string, done, absent, kept, gone []string) string {
	on := func(nodes []string) string {
		if !loc.Multihost {
			return ""
		}
		return " on " + fanout.NodeList(nodes)
	}
	var parts []string
	switch {
	case len(done) > 0 && op == opDelete:
		parts = append(parts, fmt.Sprintf("removed the %s%s", loc, on(done)))
	case len(done) > 0:
		parts = append(parts, fmt.Sprintf("the %s keeps its data%s, marked retained: remove it by hand when done", loc, on(done)))
	}
	if len(absent) > 0 {
		parts = append(parts, fmt.Sprintf("the %s was already gone%s", loc, on(absent)))
	}
	if len(kept) > 0 {
		parts = append(parts, fmt.Sprintf("the %s was left in place: %s", loc, strings.Join(kept, "; ")))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("the %s was not %s on %s: the node no longer exists", loc, verb, fanout.NodeList(gone)))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("no node held the %s", loc))
	}
	msg := strings.Join(parts, "; ")
	return strings.ToUpper(msg[:1]) + msg[1:]
}
