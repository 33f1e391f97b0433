package reclaim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

var pvResource = v1.SchemeGroupVersion.WithResource("persistentvolumes")

// libraryDelete does to the PV name what the library's DELETE does to a
// PV with finalizers, in the API server and in the Controller's cache: it
// gets a deletionTimestamp (then change, when not nil, changes it more).
// The fake clientset's actions are cleared.
func (f *controllerFixture) libraryDelete(t *testing.T, name string, change func(*v1.PersistentVolume)) {
	t.Helper()
	obj, err := f.kube.Tracker().Get(pvResource, "", name)
	if err != nil {
		t.Fatal(err)
	}
	pv := obj.(*v1.PersistentVolume).DeepCopy()
	now := metav1.Now()
	pv.DeletionTimestamp = &now
	if change != nil {
		change(pv)
	}
	if err := f.kube.Tracker().Update(pvResource, pv, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.pvCache.Update(pv); err != nil {
		t.Fatal(err)
	}
	f.kube.ClearActions()
}

// patches returns the PV patches among the writes of the fake clientset.
func (f *controllerFixture) patches() []k8stesting.PatchActionImpl {
	return hostpathtest.Patches(f.kube.Actions(), pvResource.Resource)
}

// TestReclaimThenFinalize: the library's path (Reclaim, which
// provisioner.Provisioner.Delete calls before the library DELETEs the PV)
// takes the directory to its final state and writes nothing to the PV;
// the Controller's pass after the library's DELETE removes the finalizer
// with one patch, without calling the managers again when this process
// remembers the PV, and through the full path when it does not.
func TestReclaimThenFinalize(t *testing.T) {
	deleteCall := "delete default/pv-1-dir owner=pv-1 ifEmpty=false"
	removed := `DirectoryRemoved Removed the directory "pv-1-dir" in pool "default" on node "node-a"`
	kept := []string{otherFinalizer, hostpathv1.FinalizerDirectoryProtection}
	released := []string{otherFinalizer}
	tests := []struct {
		name string
		// pv is the PV as the library hands it to Delete: Released, not
		// under deletion (newPV's defaults otherwise).
		pv          *v1.PersistentVolume
		deleteErr   error
		managersErr error
		// twice: the library syncs the PV again before its DELETE went
		// through, and calls Delete (Reclaim) a second time.
		twice bool
		// restart: the pass runs with nothing remembered (a restart, or
		// another instance).
		restart bool
		// later is how long after Reclaim the pass runs.
		later time.Duration
		// change changes the PV between Reclaim and the pass.
		change func(*v1.PersistentVolume)
		// dirBack puts the directory Reclaim removed back on its node's
		// manager before the pass, so that the pass's call finds it.
		dirBack bool

		wantReclaimErr    bool
		wantReclaimCalls  []string
		wantReclaimEvents []string
		wantReclaimLogged []string
		wantSyncErr       bool
		wantSyncCalls     []string
		wantSyncAsked     bool // the pass asked for a manager
		wantSyncEvents    []string
		wantSyncLogged    []string
		wantPatches       int
		wantFinalizers    []string
	}{
		{
			name:              "policy Delete: Reclaim deletes the directory and writes nothing; the pass removes the finalizer with one patch and no manager call",
			pv:                newPV("pv-1", notDeleting),
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimLogged: []string{removed},
			wantPatches:       1,
			wantFinalizers:    released,
		},
		{
			name:              "the library calls Delete again before its DELETE: no second fan-out",
			pv:                newPV("pv-1", notDeleting),
			twice:             true,
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimLogged: []string{removed},
			wantPatches:       1,
			wantFinalizers:    released,
		},
		{
			name:              "not remembered (restart): the pass asks the manager before the finalizer goes",
			pv:                newPV("pv-1", notDeleting),
			restart:           true,
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimLogged: []string{removed},
			wantSyncCalls:     []string{deleteCall},
			wantSyncAsked:     true,
			wantSyncLogged:    []string{removed},
			wantPatches:       1,
			wantFinalizers:    released,
		},
		{
			name:              "remembered no longer (expired): the pass asks the manager",
			pv:                newPV("pv-1", notDeleting),
			later:             finishedTTL,
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimLogged: []string{removed},
			wantSyncCalls:     []string{deleteCall},
			wantSyncAsked:     true,
			wantSyncLogged:    []string{removed},
			wantPatches:       1,
			wantFinalizers:    released,
		},
		{
			name:              "policy changed to Retain before the pass: the full path marks the directory retained",
			pv:                newPV("pv-1", notDeleting),
			change:            withPolicy(v1.PersistentVolumeReclaimRetain),
			dirBack:           true,
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimLogged: []string{removed},
			wantSyncCalls:     []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantSyncAsked:     true,
			wantSyncEvents:    []string{"Normal DirectoryRetained"},
			wantPatches:       1,
			wantFinalizers:    released,
		},
		{
			name:           "manager unreachable: Reclaim fails and remembers nothing; the pass asks again and the finalizer stays",
			pv:             newPV("pv-1", notDeleting),
			managersErr:    fmt.Errorf("no Ready manager pod"),
			wantReclaimErr: true,
			wantReclaimEvents: []string{
				`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not removed yet: no manager serves`,
			},
			wantSyncErr:    true,
			wantSyncAsked:  true,
			wantSyncEvents: []string{"Warning DirectoryNotRemoved Waiting before the PersistentVolume can go"},
			wantFinalizers: kept,
		},
		{
			name:              "manager error: Reclaim fails and remembers nothing; the pass calls again and the finalizer stays",
			pv:                newPV("pv-1", notDeleting),
			deleteErr:         managertest.Answer(managerapi.ReasonInternal, "test answer"),
			wantReclaimErr:    true,
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimEvents: []string{"Warning DirectoryNotRemoved Waiting before the PersistentVolume can go"},
			wantSyncErr:       true,
			wantSyncCalls:     []string{deleteCall},
			wantSyncAsked:     true,
			wantSyncEvents:    []string{"Warning DirectoryNotRemoved Waiting before the PersistentVolume can go"},
			wantFinalizers:    kept,
		},
		{
			name:              "directory of another PV: one Warning, from Reclaim; the pass removes the finalizer without a manager call",
			pv:                newPV("pv-1", notDeleting),
			deleteErr:         managertest.OwnerConflict("pv-other"),
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimEvents: []string{`Warning DirectoryNotRemoved The directory "pv-1-dir" in pool "default" on node "node-a" was left in place: it belongs to PersistentVolume "pv-other"`},
			wantPatches:       1,
			wantFinalizers:    released,
		},
		{
			name:              "legacy PV without the finalizer: Reclaim returns nil and nothing is written; the library's DELETE removes it",
			pv:                newPV("pv-1", notDeleting, hostpathtest.Finalizers(otherFinalizer)),
			wantReclaimCalls:  []string{deleteCall},
			wantReclaimLogged: []string{removed},
			wantFinalizers:    released,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, logged := logContext(t)
			f := newControllerFixture(t, responsibilitytest.Instances{}, tt.managersErr, []*v1.PersistentVolume{tt.pv}, selfNode, otherNode)
			failOn(f.managers, "", managertest.DeleteVolume, tt.deleteErr)
			clk := testingclock.NewFakePassiveClock(time.Now())
			f.ctrl.finished = newFinishedSet(clk)

			// The library's Delete.
			calls := 1
			if tt.twice {
				calls = 2
			}
			for range calls {
				if err := f.ctrl.Reclaim(ctx, tt.pv); (err != nil) != tt.wantReclaimErr {
					t.Fatalf("Reclaim() = %v, want error %t", err, tt.wantReclaimErr)
				}
			}
			if got := described(f.managers.Calls()); !slices.Equal(got, tt.wantReclaimCalls) {
				t.Errorf("manager calls of Reclaim = %q, want %q", got, tt.wantReclaimCalls)
			}
			if w := hostpathtest.Writes(f.kube.Actions()); len(w) > 0 {
				t.Errorf("API writes of Reclaim = %v, want none: the library deletes the PV", w)
			}
			if got := f.finalizers(t, tt.pv.Name); !slices.Equal(got, tt.pv.Finalizers) {
				t.Errorf("finalizers after Reclaim = %q, want %q", got, tt.pv.Finalizers)
			}
			hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), tt.wantReclaimEvents)
			reclaimLogged := logged()
			hostpathtest.CheckOutcomes(t, "logged outcome", reclaimLogged, tt.wantReclaimLogged)

			// The library's DELETE (or, after a failed Delete, a DELETE
			// by hand), then the Controller's pass.
			if tt.restart {
				f.ctrl.finished = newFinishedSet(clk)
			}
			clk.SetTime(clk.Now().Add(tt.later))
			f.libraryDelete(t, tt.pv.Name, tt.change)
			if tt.dirBack {
				f.managers.Node(selfNode).AddVolume(managerapi.Volume{Pool: testPool, Name: tt.pv.Name + "-dir", Owner: tt.pv.Name})
			}
			calledBefore, askedBefore := len(f.managers.Calls()), len(f.asked)
			err := f.ctrl.sync(ctx, tt.pv.Name)
			if (err != nil) != tt.wantSyncErr {
				t.Fatalf("sync() = %v, want error %t", err, tt.wantSyncErr)
			}
			if got := described(f.managers.Calls()[calledBefore:]); !slices.Equal(got, tt.wantSyncCalls) {
				t.Errorf("manager calls of the pass = %q, want %q", got, tt.wantSyncCalls)
			}
			if asked := len(f.asked) > askedBefore; asked != tt.wantSyncAsked {
				t.Errorf("the pass asked for a manager: %t, want %t", asked, tt.wantSyncAsked)
			}
			patches := f.patches()
			if len(patches) != tt.wantPatches || len(hostpathtest.Writes(f.kube.Actions())) != tt.wantPatches {
				t.Errorf("API writes of the pass = %v, want %d PV patches", hostpathtest.Writes(f.kube.Actions()), tt.wantPatches)
			}
			for _, p := range patches {
				if p.GetPatchType() != types.JSONPatchType {
					t.Errorf("patch = %s %s, want the JSON patch that removes the finalizer", p.GetPatchType(), p.GetPatch())
				}
			}
			if got := f.finalizers(t, tt.pv.Name); !slices.Equal(got, tt.wantFinalizers) {
				t.Errorf("finalizers after the pass = %q, want %q", got, tt.wantFinalizers)
			}
			hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), tt.wantSyncEvents)
			hostpathtest.CheckOutcomes(t, "logged outcome", logged()[len(reclaimLogged):], tt.wantSyncLogged)
		})
	}
}

// TestFinalizeMultihostLocationChanged: a multihost PV that lists one more
// node by the Controller's pass (the host definer recorded that it gave
// the node the directory) is not taken as remembered: the pass calls every
// node again before the finalizer goes.
func TestFinalizeMultihostLocationChanged(t *testing.T) {
	ctx, _ := logContext(t)
	deleteCall := []string{"delete default/shared-dir owner=shared ifEmpty=false"}
	twice := slices.Concat(deleteCall, deleteCall)
	pv := multihostPV("shared", "node-a", "", notDeleting)
	managers := newManagers([]*v1.PersistentVolume{pv}, selfNode, otherNode)
	f := newMultihostFixture(t, true, managers, pv, selfNode, otherNode)
	if err := f.ctrl.Reclaim(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if w := hostpathtest.Writes(f.kube.Actions()); len(w) > 0 {
		t.Errorf("API writes of Reclaim = %v, want none", w)
	}
	f.libraryDelete(t, pv.Name, hostpathtest.Annotation(hostpathv1.AnnotationNodes, "node-a,node-b"))
	if err := f.ctrl.sync(ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string][]string{selfNode: twice, otherNode: twice} {
		if got := described(managers.Node(node).Calls()); !slices.Equal(got, want) {
			t.Errorf("calls on %s = %q, want %q", node, got, want)
		}
	}
	if got, want := f.finalizers(t, pv.Name), []string{otherFinalizer}; !slices.Equal(got, want) {
		t.Errorf("finalizers = %q, want %q", got, want)
	}
}

// TestFinishedSet: only a PV of policy Delete is remembered, under its
// UID, policy and location, for finishedTTL, and never more than
// finishedMax at once.
func TestFinishedSet(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Now())
	s := newFinishedSet(clk)
	pv := newPV("pv-1", notDeleting)
	loc, _ := locationOf(pv, testNames)

	s.add(newPV("pv-1", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain)), loc)
	if s.has(pv, loc) {
		t.Error("a PV of policy Retain was remembered")
	}
	s.add(pv, loc)
	if !s.has(pv, loc) {
		t.Fatal("the PV was not remembered")
	}
	if s.has(newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRetain)), loc) {
		t.Error("remembered after its policy changed to Retain")
	}
	other := loc
	other.Node = otherNode
	if s.has(pv, other) {
		t.Error("remembered at another location")
	}
	if s.has(newPV("pv-1", func(pv *v1.PersistentVolume) { pv.UID = "uid-new" }), loc) {
		t.Error("remembered under another UID")
	}
	clk.SetTime(clk.Now().Add(finishedTTL - time.Second))
	if !s.has(pv, loc) {
		t.Error("forgotten before finishedTTL")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if s.has(pv, loc) {
		t.Error("remembered after finishedTTL")
	}

	// Full: nothing more is remembered until entries expire, and expired
	// ones are dropped.
	for i := range finishedMax {
		s.add(newPV(fmt.Sprintf("pv-%d", i), notDeleting), loc)
	}
	extra := newPV("pv-extra", notDeleting)
	s.add(extra, loc)
	if s.has(extra, loc) || len(s.entries) != finishedMax {
		t.Errorf("%d remembered, the one past finishedMax too: %t; want %d, not it", len(s.entries), s.has(extra, loc), finishedMax)
	}
	clk.SetTime(clk.Now().Add(finishedTTL))
	s.add(extra, loc)
	if !s.has(extra, loc) || len(s.entries) != 1 {
		t.Errorf("after expiry: %d remembered, the new one: %t; want 1, it", len(s.entries), s.has(extra, loc))
	}
}

// TestFinalizeWaitsForPVProtection: a remembered PV keeps its finalizer
// while kube-controller-manager's kubernetes.io/pv-protection is still on
// it, for at most pvProtectionWait after its deletion, so that the two
// finalizers' removals do not conflict; without that finalizer, or once
// the wait is over, the finalizer comes off at once, without a manager
// call.
func TestFinalizeWaitsForPVProtection(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		finalizers []string
		deletedAgo time.Duration
		wantPatch  bool
	}{
		{name: "pv-protection still on: wait", finalizers: []string{hostpathv1.FinalizerDirectoryProtection, pvProtectionFinalizer},
			deletedAgo: time.Second},
		{name: "pv-protection still on after the wait: remove", finalizers: []string{hostpathv1.FinalizerDirectoryProtection, pvProtectionFinalizer},
			deletedAgo: pvProtectionWait, wantPatch: true},
		{name: "pv-protection gone: remove", finalizers: []string{hostpathv1.FinalizerDirectoryProtection},
			deletedAgo: time.Second, wantPatch: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			deleted := metav1.NewTime(now.Add(-tc.deletedAgo))
			pv := newPV("pv-1", hostpathtest.Finalizers(tc.finalizers...), func(pv *v1.PersistentVolume) { pv.DeletionTimestamp = &deleted })
			f := newControllerFixture(t, responsibilitytest.Instances{Wins: true}, nil, []*v1.PersistentVolume{pv}, selfNode)
			clk := testingclock.NewFakePassiveClock(now)
			f.ctrl.clock = clk
			f.ctrl.finished = newFinishedSet(clk)
			loc, _ := locationOf(pv, testNames)
			f.ctrl.finished.add(pv, loc)
			if err := f.ctrl.sync(ctx, pv.Name); err != nil {
				t.Fatal(err)
			}
			if got := len(hostpathtest.Writes(f.kube.Actions())) > 0; got != tc.wantPatch {
				t.Errorf("patched %v, want %v (writes %v)", got, tc.wantPatch, hostpathtest.Writes(f.kube.Actions()))
			}
			if !tc.wantPatch {
				// The wait is over (the requeue's time): it comes off.
				clk.SetTime(now.Add(pvProtectionWait))
				if err := f.ctrl.sync(ctx, pv.Name); err != nil || len(hostpathtest.Writes(f.kube.Actions())) != 1 {
					t.Errorf("after the wait: %v, writes %v; want one patch", err, hostpathtest.Writes(f.kube.Actions()))
				}
			}
			if calls := f.managers.Calls(); len(calls) > 0 {
				t.Errorf("manager calls %v, want none", calls)
			}
		})
	}
}
