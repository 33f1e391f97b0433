package reclaim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// TestGoneScan: the scan of the API server marks the node-mode PVs of
// deleted Nodes that the cache does not hold, of any phase and under
// deletion too (no other instance watches them until marked), on the
// elected instance only, and nothing else: not a PV of a Node that exists
// (in the cache, or only on the API server yet), not one marked already,
// not a multihost PV, not one the cache holds (the cached steps look after
// those). The nodes of PVs whose Node exists and runs no instance become
// suspects; a node with an instance does not.
func TestGoneScan(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	gone, back := "gone-node", "back-node"
	bound := hostpathtest.Phase(v1.VolumeBound)
	listed := []*v1.PersistentVolume{
		newPV("gone-bound", notDeleting, bound, hostpathtest.OnNode(gone)),
		newPV("gone-retain", notDeleting, bound, hostpathtest.OnNode(gone), withPolicy(v1.PersistentVolumeReclaimRetain)),
		newPV("other-bound", notDeleting, bound, hostpathtest.OnNode(otherNode)),
		newPV("back-bound", notDeleting, bound, hostpathtest.OnNode(back)),
		newPV("gone-marked", notDeleting, bound, hostpathtest.OnNode(gone), hostpathtest.Annotation(hostpathv1.AnnotationNodeGoneSince, "2026-11-27T11:00:00Z")),
		newPV("gone-released", notDeleting, hostpathtest.OnNode(gone)),
		newPV("gone-deleting", bound, hostpathtest.OnNode(gone)),
		multihostPV("shared", gone, "", notDeleting, bound),
	}
	cached := newPV("gone-cached", notDeleting, bound, hostpathtest.OnNode(gone))
	for _, tc := range []struct {
		name         string
		elected      bool
		wantMarked   []string
		wantSuspects []string
	}{
		{name: "elected", elected: true, wantMarked: []string{"gone-bound", "gone-deleting", "gone-released", "gone-retain"}, wantSuspects: []string{back}},
		{name: "not elected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newControllerFixture(t, responsibilitytest.Instances{Wins: tc.elected, On: []string{selfNode, otherNode}}, nil, []*v1.PersistentVolume{cached}, selfNode, otherNode)
			f.ctrl.cfg.NodeGoneGrace = time.Hour
			f.ctrl.clock = testingclock.NewFakePassiveClock(now)
			for _, pv := range listed {
				if _, err := f.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// A Node that came back: on the API server, once kept as
			// missing by Config.Nodes.
			if _, err := f.kube.CoreV1().Nodes().Create(ctx, hostpathtest.Node(back), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.ctrl.nodes.(*fakeNodes).exist[back] = false
			if err := f.ctrl.scanGoneNodes(ctx); err != nil {
				t.Fatal(err)
			}
			var marked []string
			pvs, err := f.kube.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, pv := range pvs.Items {
				if since := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]; since == now.Format(time.RFC3339) {
					marked = append(marked, pv.Name)
				}
			}
			slices.Sort(marked)
			if !slices.Equal(marked, tc.wantMarked) {
				t.Errorf("marked %q, want %q", marked, tc.wantMarked)
			}
			if n := len(f.recorder.Events); n != len(tc.wantMarked) {
				t.Errorf("%d events, want %d", n, len(tc.wantMarked))
			}
			for range tc.wantMarked {
				if e := <-f.recorder.Events; !strings.HasPrefix(e, "Warning "+ReasonNodeGone) {
					t.Errorf("event %q, want a Warning %s", e, ReasonNodeGone)
				}
			}
			for _, pv := range pvs.Items {
				if slices.Contains(tc.wantMarked, pv.Name) && pv.Labels[hostpathv1.LabelNode] != hostpathv1.NodeLabelNodeGone {
					t.Errorf("PV %s marked with label %s=%q, want %q", pv.Name, hostpathv1.LabelNode, pv.Labels[hostpathv1.LabelNode], hostpathv1.NodeLabelNodeGone)
				}
			}
			got := f.ctrl.suspectList()
			slices.Sort(got)
			if !slices.Equal(got, tc.wantSuspects) {
				t.Errorf("suspects %q, want %q", got, tc.wantSuspects)
			}
		})
	}
}

// TestGoneScanOff: without a grace period there is no scan, and an
// instance leaving a node neither blocks nor is remembered.
func TestGoneScanOff(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newControllerFixture(t, responsibilitytest.Instances{Wins: true}, nil, nil, selfNode)
	f.ctrl.NodeLeft(otherNode)
	f.ctrl.NodeLeft(otherNode)
	if n := len(f.ctrl.suspects); n != 0 {
		t.Errorf("%d suspects kept, want none: no scan would take them", n)
	}
	f.ctrl.runGoneScans(ctx) // returns at once: no grace period
	if got := hostpathtest.Writes(f.kube.Actions()); len(got) > 0 {
		t.Errorf("writes %v, want none", got)
	}
}

// TestSuspectGone: an instance leaving a node asks for a scan, which the
// elected instance runs only when a Node left is gone (an instance's pod
// also goes in a rollout); every node left is forgotten, so that the next
// question about it asks the API server. A suspect whose Node is gone is
// dropped by the scanning instance (its scan marks the PVs); one whose
// Node exists stays, to be asked about again (runNodeChecks), until an
// instance runs on it again.
func TestSuspectGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		elected  bool
		left     []string
		want     bool
		wantKept []string
	}{
		{"a Node left is gone", true, []string{otherNode, goneNode}, true, []string{otherNode}},
		{"the Nodes left exist (a rollout)", true, []string{otherNode, otherNode}, false, []string{otherNode}},
		{"not elected", false, []string{goneNode}, false, []string{goneNode}},
		{"nothing left", true, nil, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newControllerFixture(t, responsibilitytest.Instances{Wins: tc.elected}, nil, nil, selfNode, otherNode)
			f.ctrl.cfg.NodeGoneGrace = time.Hour
			for _, n := range tc.left {
				f.ctrl.NodeLeft(n)
			}
			if got := f.ctrl.suspectGone(); got != tc.want {
				t.Errorf("suspectGone() = %v, want %v", got, tc.want)
			}
			if got := f.ctrl.suspectGone(); got {
				t.Error("suspectGone() again = true, want false: the gone Nodes were dropped")
			}
			if got := f.ctrl.suspectList(); !slices.Equal(got, tc.wantKept) {
				t.Errorf("suspects kept %q, want %q", got, tc.wantKept)
			}
			if got := f.ctrl.nodes.(*fakeNodes).forgotten; !slices.Equal(got, tc.left) {
				t.Errorf("forgotten %q, want %q", got, tc.left)
			}
		})
	}
}

// TestSuspectBack: a suspect on which an instance runs again is dropped.
func TestSuspectBack(t *testing.T) {
	f := newControllerFixture(t, responsibilitytest.Instances{Wins: true, On: []string{otherNode}}, nil, nil, selfNode, otherNode)
	f.ctrl.cfg.NodeGoneGrace = time.Hour
	f.ctrl.NodeLeft(otherNode)
	if f.ctrl.suspectGone() {
		t.Error("suspectGone() = true for a node whose instance is back")
	}
	if got := f.ctrl.suspectList(); len(got) > 0 {
		t.Errorf("suspects %q, want none", got)
	}
}

// TestNodeJoined: an instance coming to a node forgets it and queues the
// PVs marked as of a gone node of that name, only those.
func TestNodeJoined(t *testing.T) {
	marked := hostpathtest.Annotation(hostpathv1.AnnotationNodeGoneSince, "2026-11-27T11:00:00Z")
	pvs := []*v1.PersistentVolume{
		newPV("marked-back", notDeleting, hostpathtest.OnNode(goneNode), marked),
		newPV("marked-elsewhere", notDeleting, hostpathtest.OnNode(otherNode), marked),
		newPV("unmarked-back", notDeleting, hostpathtest.OnNode(goneNode)),
	}
	f := newControllerFixture(t, responsibilitytest.Instances{}, nil, pvs, selfNode, otherNode)
	f.ctrl.cfg.NodeGoneGrace = time.Hour
	f.ctrl.NodeJoined(goneNode)
	got := f.queued()
	if !slices.Equal(got, []string{"marked-back"}) {
		t.Errorf("queued %q, want [marked-back]", got)
	}
	if got := f.ctrl.nodes.(*fakeNodes).forgotten; !slices.Equal(got, []string{goneNode}) {
		t.Errorf("forgotten %q, want [%s]", got, goneNode)
	}
}
