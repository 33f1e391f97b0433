package provisioner

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// claimCase is a claim as one instance (on selfNode) sees it, with what its
// Qualifier answers and what its claim sync does.
type claimCase struct {
	name    string
	claim   []string // class name, then annotations as key=value
	elected bool     // this instance is elected for claims no node owns
	// want is the Qualifier's answer.
	want bool
	// wantEvents are the claim sync's events, as "Type Reason" prefixes.
	wantEvents []string
	// wantPatch says that the claim sync sets selected-node to selfNode.
	wantPatch bool
}

// setUp returns the claim of tc in the caches of a fixture whose instance
// is elected as tc says, with instances on selfNode and otherNode.
func (tc claimCase) setUp(t *testing.T) (context.Context, *fixture, *v1.PersistentVolumeClaim) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	c := claim(tc.claim[0], tc.claim[1:]...)
	f := newFixture(t, responsibilitytest.Instances{Wins: tc.elected, On: []string{selfNode, otherNode}},
		append(append(testNodes(), testClasses()...), c)...)
	return ctx, f, c
}

// claimCases are shared by TestShouldProvision and TestClaimSync.
var claimCases = []claimCase{
	{name: "class of another provisioner", claim: []string{"other", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode}, elected: true},
	{name: "missing class", claim: []string{"nonexistent", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode}, elected: true},
	{name: "own node by hostpath.dev annotation", claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode}, want: true},
	{name: "own node by kubevirt annotation", claim: []string{"immediate", hostpathv1.AnnotationKubevirtProvisionOnNode + "=" + selfNode}, want: true},
	{name: "own node by selected-node", claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=" + selfNode}, want: true},
	// The capacity-aware name is served like the configured one.
	{name: "capacity-aware class, own node by selected-node", claim: []string{"capacity", storagehelpers.AnnSelectedNode + "=" + selfNode}, want: true},
	{name: "capacity-aware class, other node by selected-node", claim: []string{"capacity", storagehelpers.AnnSelectedNode + "=" + otherNode}, elected: true},
	{name: "capacity-aware class, deleted selected node, elected instance reschedules", claim: []string{"capacity", storagehelpers.AnnSelectedNode + "=ghost"}, elected: true, want: true, wantEvents: []string{"Warning " + ReasonRescheduling}},
	{name: "other node by annotation", claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + otherNode}, elected: true},
	{name: "other node by selected-node", claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=" + otherNode}, elected: true},
	{
		name:       "annotation wins over selected-node on the annotated node",
		claim:      []string{"wffc", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode, storagehelpers.AnnSelectedNode + "=" + otherNode},
		want:       true,
		wantEvents: []string{"Warning " + ReasonNodeConflict},
	},
	{
		name:  "annotation wins over selected-node: the selected node does nothing",
		claim: []string{"wffc", hostpathv1.AnnotationProvisionOnNode + "=" + otherNode, storagehelpers.AnnSelectedNode + "=" + selfNode}, elected: true,
	},
	{
		name:       "hostpath.dev annotation wins over kubevirt annotation",
		claim:      []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode, hostpathv1.AnnotationKubevirtProvisionOnNode + "=" + otherNode},
		want:       true,
		wantEvents: []string{"Warning " + ReasonNodeConflict},
	},
	{
		name:       "pinned WaitForFirstConsumer claim gets selected-node from the owner",
		claim:      []string{"wffc", hostpathv1.AnnotationKubevirtProvisionOnNode + "=" + selfNode},
		wantEvents: []string{"Normal " + ReasonNodeSelected},
		wantPatch:  true,
	},
	{
		name:       "pinned WaitForFirstConsumer claim with conflicting annotations",
		claim:      []string{"wffc", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode, hostpathv1.AnnotationKubevirtProvisionOnNode + "=" + otherNode},
		wantEvents: []string{"Warning " + ReasonNodeConflict, "Normal " + ReasonNodeSelected},
		wantPatch:  true,
	},
	{name: "pinned WaitForFirstConsumer claim of another node", claim: []string{"wffc", hostpathv1.AnnotationProvisionOnNode + "=" + otherNode}, elected: true},
	{name: "WaitForFirstConsumer claim waits for the scheduler", claim: []string{"wffc"}, elected: true},
	{name: "Immediate claim without node, elected instance warns", claim: []string{"immediate"}, elected: true, wantEvents: []string{"Warning " + ReasonNoNode}},
	{name: "Immediate claim without node, other instances are silent", claim: []string{"immediate"}},
	{name: "nonexistent node, elected instance warns", claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=ghost"}, elected: true, wantEvents: []string{"Warning " + ReasonNodeNotFound}},
	{name: "nonexistent node, other instances are silent", claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=ghost"}},
	// A node the scheduler selected that is gone: the elected instance
	// gives the claim back to the scheduler (the library removes
	// selected-node), the others do nothing.
	{name: "deleted selected node, elected instance reschedules", claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=ghost"}, elected: true, want: true, wantEvents: []string{"Warning " + ReasonRescheduling}},
	{name: "deleted selected node, other instances are silent", claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=ghost"}},
	{name: "selected node without provisioner, elected instance reschedules", claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=" + idleNode}, elected: true, want: true, wantEvents: []string{"Warning " + ReasonRescheduling}},
	{name: "selected node without provisioner, other instances are silent", claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=" + idleNode}},
	// A pinned node is never replaced, only reported.
	{name: "pinned WaitForFirstConsumer claim of a deleted node, elected instance warns", claim: []string{"wffc", hostpathv1.AnnotationProvisionOnNode + "=ghost", storagehelpers.AnnSelectedNode + "=ghost"}, elected: true, wantEvents: []string{"Warning " + ReasonNodeNotFound}},
	{name: "pinned WaitForFirstConsumer claim of a node without provisioner, elected instance warns", claim: []string{"wffc", hostpathv1.AnnotationKubevirtProvisionOnNode + "=" + idleNode, storagehelpers.AnnSelectedNode + "=" + idleNode}, elected: true, wantEvents: []string{"Warning " + ReasonNoInstance}},
	{name: "node without provisioner, elected instance warns", claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + idleNode}, elected: true, wantEvents: []string{"Warning " + ReasonNoInstance}},
	{name: "node without provisioner, other instances are silent", claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + idleNode}},
	{name: "multihost claim, elected instance owns it", claim: []string{"multihost"}, elected: true, want: true},
	{name: "multihost claim, other instances do not", claim: []string{"multihost", hostpathv1.AnnotationProvisionOnNode + "=" + selfNode}},
}

// TestShouldProvision checks the Qualifier's answer, and that it writes
// nothing: no API call, no event, whatever the claim.
func TestShouldProvision(t *testing.T) {
	for _, tc := range claimCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, f, c := tc.setUp(t)
			for range 2 {
				if got := f.prov.ShouldProvision(ctx, c); got != tc.want {
					t.Errorf("ShouldProvision = %v, want %v", got, tc.want)
				}
			}
			if events := hostpathtest.Events(f.recorder); len(events) > 0 {
				t.Errorf("events = %q, want none", events)
			}
			if actions := f.kube.Actions(); len(actions) > 0 {
				t.Errorf("API actions = %v, want none", actions)
			}
		})
	}
}

// TestForeignClaims checks that a claim whose storage-provisioner
// annotations name another provisioner is neither provisioned nor reported
// nor patched on the instance elected for it, whatever its class and node
// annotations say: the library would not provision it either (nor do the
// informers cache it: package cachetrim).
func TestForeignClaims(t *testing.T) {
	for _, tc := range claimCases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := claim(tc.claim[0], append(slices.Clone(tc.claim[1:]),
				storagehelpers.AnnStorageProvisioner+"=example.com/other", storagehelpers.AnnBetaStorageProvisioner+"=example.com/other")...)
			f := newFixture(t, responsibilitytest.Instances{Wins: true, On: []string{selfNode, otherNode}},
				append(append(testNodes(), testClasses()...), c)...)
			if f.prov.ShouldProvision(ctx, c) {
				t.Error("ShouldProvision = true, want false")
			}
			for range 2 {
				f.syncClaim(ctx, t, c, 0)
			}
			if events := hostpathtest.Events(f.recorder); len(events) > 0 {
				t.Errorf("events = %q, want none", events)
			}
			if actions := f.kube.Actions(); len(actions) > 0 {
				t.Errorf("API actions = %v, want none", actions)
			}
		})
	}
}

func TestShouldDelete(t *testing.T) {
	tests := []struct {
		name          string
		pvAnnotations map[string]string
		elected       bool
		want          bool
	}{
		{name: "own node", pvAnnotations: map[string]string{hostpathv1.AnnotationNode: selfNode, hostpathv1.AnnotationMode: "node"}, want: true},
		{name: "other node", pvAnnotations: map[string]string{hostpathv1.AnnotationNode: otherNode, hostpathv1.AnnotationMode: "node"}},
		{name: "no node annotation", pvAnnotations: nil},
		{name: "multihost volume, not elected", pvAnnotations: map[string]string{hostpathv1.AnnotationNode: selfNode, hostpathv1.AnnotationMode: "multihost"}},
		{name: "multihost volume, elected", pvAnnotations: map[string]string{hostpathv1.AnnotationMode: "multihost"}, elected: true, want: true},
		{name: "node volume of another node, elected", pvAnnotations: map[string]string{hostpathv1.AnnotationNode: otherNode, hostpathv1.AnnotationMode: "node"}, elected: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, responsibilitytest.Instances{Wins: tc.elected})
			pv := buildPV(pvInput{name: "pv", class: class("c", "Immediate", nil), claim: claim("c"), node: selfNode})
			pv.Annotations = tc.pvAnnotations
			if got := f.prov.ShouldDelete(ctx, pv); got != tc.want {
				t.Errorf("ShouldDelete = %v, want %v", got, tc.want)
			}
		})
	}
}
