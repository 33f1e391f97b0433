package reclaim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
)

// nextNow is the time of the facts in TestNextStep.
var nextNow = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// controllerFacts are the facts of the Controller's pass over pv on
// selfNode, on the instance that acts for it.
func controllerFacts(pv *v1.PersistentVolume, change ...func(*Facts)) Facts {
	loc, ours := locationOf(pv, testNames)
	f := Facts{Path: ControllerPath, PV: pv, Ours: ours, Loc: loc, Self: selfNode, Acts: true, Now: nextNow}
	for _, c := range change {
		c(&f)
	}
	return f
}

// Changes to the facts.
var (
	library    = func(f *Facts) { f.Path = LibraryPath }
	notActing  = func(f *Facts) { f.Acts = false }
	remembered = func(f *Facts) { f.Remembered = true }
	nodeIsGone = func(f *Facts) { f.NodeGone = true }
	marking    = func(f *Facts) { f.MarksNodeGone = true }
	withGrace  = func(f *Facts) { f.Grace = time.Hour }
	answered   = func(results ...nodeResult) func(*Facts) {
		return func(f *Facts) { f.Answers = append([]nodeResult{}, results...) }
	}
	deletedAgo = func(d time.Duration) func(*v1.PersistentVolume) {
		return func(pv *v1.PersistentVolume) {
			t := metav1.NewTime(nextNow.Add(-d))
			pv.DeletionTimestamp = &t
		}
	}
	goneSince = func(d time.Duration) func(*v1.PersistentVolume) {
		return hostpathtest.Annotation(hostpathv1.AnnotationNodeGoneSince, nextNow.Add(-d).Format(time.RFC3339))
	}
)

// Answers of the holders.
var (
	doneHere    = nodeResult{node: selfNode, state: nodeDone}
	absentHere  = nodeResult{node: selfNode, state: nodeAbsent}
	waitingHere = nodeResult{node: selfNode, state: nodeWaiting, detail: "the manager answered 500"}
	keptHere    = nodeResult{node: selfNode, state: nodeKept, detail: `it belongs to PersistentVolume "pv-other"`}
	goneThere   = nodeResult{node: goneNode, state: nodeSkipped, detail: detailGone}
)

// TestNextStep is the deletion invariant, a row (or a few) per clause: a
// directory that holds data is removed only when no PV refers to it and
// the last reclaim policy of the PV that owned it was Delete; a PV
// disappears only after every node that holds its directory has reached
// its final state (removed for Delete, marked retained for Retain), but
// for a node gone for good; a directory of another PV is never touched;
// only the instance that acts for a PV writes. Then what keeps the
// invariant true as PVs live: the node-gone handling (a PV of a gone node
// goes only after the grace period), the policy that follows the PV, the
// finalizer on every PV of the node.
func TestNextStep(t *testing.T) {
	tests := []struct {
		name string
		in   Facts
		want Action
		// op is the call of ActFanOut.
		op operation
		// eventType and reason are the outcome's, of ActRelease and
		// ActWait.
		eventType, reason string
		// after: the PV is synced again later.
		after bool
	}{
		// Removed only when the last reclaim policy was Delete.
		{name: "removed only by policy Delete: a Delete PV's holders are sent a DELETE",
			in: controllerFacts(newPV("pv")), want: ActFanOut, op: opDelete},
		{name: "removed only by policy Delete: a Retain PV's directory is marked retained",
			in: controllerFacts(newPV("pv", withPolicy(v1.PersistentVolumeReclaimRetain))), want: ActFanOut, op: opRetain},
		{name: "removed only by policy Delete: Recycle counts as Retain",
			in: controllerFacts(newPV("pv", withPolicy(v1.PersistentVolumeReclaimRecycle))), want: ActFanOut, op: opRetain},
		{name: "removed only by policy Delete: the library's path asks by the PV's policy too",
			in: controllerFacts(newPV("pv", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain)), library), want: ActFanOut, op: opRetain},
		{name: "removed only by policy Delete: retained everywhere, a Normal event",
			in:   controllerFacts(newPV("pv", withPolicy(v1.PersistentVolumeReclaimRetain)), answered(doneHere)),
			want: ActRelease, eventType: v1.EventTypeNormal, reason: ReasonDirectoryRetained},

		// Removed only when no PV refers to it.
		{name: "removed only when no PV refers to it: a PV not under deletion is never reclaimed",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.Phase(v1.VolumeBound))), want: ActNothing},
		{name: "removed only when no PV refers to it: a Bound PV under deletion waits for its claim (no node strips a Bound PV's finalizer)",
			in: controllerFacts(newPV("pv", hostpathtest.Phase(v1.VolumeBound))), want: ActNothing},
		{name: "removed only when no PV refers to it: a PV under deletion without the finalizer is not ours to finish",
			in: controllerFacts(newPV("pv", hostpathtest.Finalizers(otherFinalizer))), want: ActNothing},

		// A PV disappears only after every holder reached its final state.
		{name: "a PV goes only once every holder is final: one waiting, the PV and its finalizer stay, a Warning",
			in:   controllerFacts(newPV("pv"), answered(waitingHere)),
			want: ActWait, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved},
		{name: "a PV goes only once every holder is final: one waiting to be marked retained",
			in:   controllerFacts(newPV("pv", withPolicy(v1.PersistentVolumeReclaimRetain)), answered(waitingHere)),
			want: ActWait, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRetained},
		{name: "a PV goes only once every holder is final: the library's path fails while one waits",
			in:   controllerFacts(newPV("pv", notDeleting), library, answered(waitingHere)),
			want: ActWait, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved},
		{name: "a PV goes only once every holder is final: removed everywhere, only logged",
			in: controllerFacts(newPV("pv"), answered(doneHere)), want: ActRelease, reason: ReasonDirectoryRemoved},
		{name: "a PV goes only once every holder is final: already gone is final",
			in: controllerFacts(newPV("pv"), answered(absentHere)), want: ActRelease, reason: ReasonDirectoryRemoved},
		{name: "a PV goes only once every holder is final: the library's path lets the library delete it",
			in: controllerFacts(newPV("pv", notDeleting), library, answered(doneHere)), want: ActRelease, reason: ReasonDirectoryRemoved},
		{name: "a PV goes only once every holder is final: the one Reclaim finished moments ago loses its finalizer without a second fan-out",
			in: controllerFacts(newPV("pv", hostpathtest.Finalizers(hostpathv1.FinalizerDirectoryProtection)), remembered), want: ActRemoveFinalizer},
		{name: "a PV goes only once every holder is final: the remembered PV waits for kube-controller-manager's pv-protection",
			in:   controllerFacts(newPV("pv", deletedAgo(time.Second), hostpathtest.Finalizers(hostpathv1.FinalizerDirectoryProtection, pvProtectionFinalizer)), remembered),
			want: ActNothing, after: true},
		{name: "a PV goes only once every holder is final: the remembered PV's wait for pv-protection ends",
			in:   controllerFacts(newPV("pv", deletedAgo(pvProtectionWait), hostpathtest.Finalizers(hostpathv1.FinalizerDirectoryProtection, pvProtectionFinalizer)), remembered),
			want: ActRemoveFinalizer},
		{name: "a PV goes only once every holder is final: the library's path, remembered, is done at once",
			in: controllerFacts(newPV("pv", notDeleting), library, remembered), want: ActNothing},

		// The one exception: a node gone for good.
		{name: "the one exception, a node gone for good: skipped, the PV goes with a Warning",
			in:   controllerFacts(newPV("pv", hostpathtest.OnNode(goneNode)), answered(goneThere)),
			want: ActRelease, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved},

		// Another PV's directory is never touched.
		{name: "another PV's directory is left in place: the PV goes with a Warning",
			in:   controllerFacts(newPV("pv"), answered(keptHere)),
			want: ActRelease, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved},
		{name: "a PV that names no directory removes nothing: it goes with a Warning",
			in:   controllerFacts(newPV("pv", hostpathtest.Annotation(hostpathv1.AnnotationDirectory, ""))),
			want: ActRelease, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved},
		{name: "a PV that names no node removes nothing: it goes with a Warning",
			in:   controllerFacts(newPV("pv", hostpathtest.OnNode(""))),
			want: ActRelease, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved},
		{name: "another provisioner's PV is not touched",
			in: controllerFacts(newPV("pv", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other"))), want: ActNothing},
		{name: "another provisioner's PV is not touched: the library's path lets it go",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other")), library), want: ActRelease},

		// Only the instance that acts for a PV writes.
		{name: "only the instance that acts writes: another does nothing for a PV under deletion",
			in: controllerFacts(newPV("pv", hostpathtest.OnNode(otherNode)), notActing), want: ActNothing},
		{name: "only the instance that acts writes: another does not record a changed policy",
			in:   controllerFacts(newPV("pv", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")), notActing),
			want: ActNothing},

		// A PV of a gone node goes only after the grace period.
		{name: "node gone, after the grace period only: off without a grace period",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode)), nodeIsGone, marking), want: ActNothing},
		{name: "node gone, after the grace period only: marked at first sight",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode)), withGrace, nodeIsGone, marking), want: ActMarkNodeGone},
		{name: "node gone, after the grace period only: an instance that does not mark writes nothing",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode)), withGrace, nodeIsGone), want: ActNothing},
		{name: "node gone, after the grace period only: within it, looked at again at its end",
			in:   controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode), goneSince(time.Minute)), withGrace, nodeIsGone, marking),
			want: ActNothing, after: true},
		{name: "node gone, after the grace period only: then a Released PV of policy Delete is deleted",
			in:   controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode), goneSince(2*time.Hour)), withGrace, nodeIsGone, marking),
			want: ActDeleteNodeGone},
		{name: "node gone, after the grace period only: a Bound PV is never deleted",
			in:   controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode), hostpathtest.Phase(v1.VolumeBound), goneSince(2*time.Hour)), withGrace, nodeIsGone, marking),
			want: ActNothing},
		{name: "node gone, after the grace period only: a Retain PV is never deleted",
			in:   controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode), withPolicy(v1.PersistentVolumeReclaimRetain), goneSince(2*time.Hour)), withGrace, nodeIsGone, marking),
			want: ActNothing},
		{name: "node gone, after the grace period only: a mark that is not a time is made again",
			in:   controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode), hostpathtest.Annotation(hostpathv1.AnnotationNodeGoneSince, "yesterday")), withGrace, nodeIsGone, marking),
			want: ActMarkNodeGone},
		{name: "node gone, after the grace period only: the node is back, the mark goes",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(otherNode), goneSince(2*time.Hour)), withGrace, marking), want: ActUnmarkNodeGone},
		{name: "node gone, after the grace period only: the node is back to an instance that does not mark, the mark stays",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(otherNode), goneSince(2*time.Hour)), withGrace), want: ActNothing},

		// The policy follows the PV.
		{name: "the policy follows the PV: a changed policy is recorded with every holder",
			in:   controllerFacts(newPV("pv", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete"))),
			want: ActFanOut, op: opRecordPolicy},
		{name: "the policy follows the PV: a holder that has not recorded it, a Warning and a retry",
			in:   controllerFacts(newPV("pv", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")), answered(waitingHere)),
			want: ActPolicyPending},
		{name: "the policy follows the PV: once every holder recorded it, the PV says so",
			in:   controllerFacts(newPV("pv", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")), answered(doneHere)),
			want: ActRecordPolicy},
		{name: "the policy follows the PV: nothing to record on a node that is gone",
			in:   controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(goneNode), withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")), nodeIsGone),
			want: ActNothing},

		// Every PV of the node carries the finalizer.
		{name: "the finalizer keeps the PV until its directory is final: added to a PV of this node made without it",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.Phase(v1.VolumeBound), hostpathtest.Finalizers(otherFinalizer))), want: ActAddFinalizer},
		{name: "the finalizer keeps the PV until its directory is final: not given back to a Released PV the library deletes",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.Finalizers(otherFinalizer))), want: ActNothing},
		{name: "the finalizer keeps the PV until its directory is final: another node's PV is its instance's",
			in: controllerFacts(newPV("pv", notDeleting, hostpathtest.OnNode(otherNode), hostpathtest.Finalizers(otherFinalizer))), want: ActNothing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextStep(tt.in)
			if got.Action != tt.want {
				t.Fatalf("NextStep() = %s, want %s (%+v)", got.Action, tt.want, got)
			}
			if tt.want == ActFanOut && got.Op != tt.op {
				t.Errorf("NextStep() fans out %d, want %d", got.Op, tt.op)
			}
			if o := got.Outcome; o.eventType != tt.eventType || o.reason != tt.reason {
				t.Errorf("outcome %s %s %q, want %s %s", o.eventType, o.reason, o.message, tt.eventType, tt.reason)
			}
			if (got.After > 0) != tt.after {
				t.Errorf("synced again after %s, want later: %t", got.After, tt.after)
			}
		})
	}
}
