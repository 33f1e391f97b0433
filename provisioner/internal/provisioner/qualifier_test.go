package provisioner

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

func TestShouldProvision(t *testing.T) {
	all := []string{selfNode, otherNode}
	tests := []struct {
		name      string
		claim     []string // class name, then annotations
		elected   bool
		want      bool
		wantEvent string // "" for none; otherwise "Type Reason" prefix
		wantPatch bool
	}{
		{name: "class of another provisioner", claim: []string{"other", AnnProvisionOnNode + "=" + selfNode}, elected: true},
		{name: "missing class", claim: []string{"nonexistent", AnnProvisionOnNode + "=" + selfNode}, elected: true},
		{name: "own node by hostpath.dev annotation", claim: []string{"immediate", AnnProvisionOnNode + "=" + selfNode}, want: true},
		{name: "own node by kubevirt annotation", claim: []string{"immediate", AnnKubevirtProvisionOnNode + "=" + selfNode}, want: true},
		{name: "own node by selected-node", claim: []string{"wffc", AnnSelectedNode + "=" + selfNode}, want: true},
		{name: "other node by annotation", claim: []string{"immediate", AnnProvisionOnNode + "=" + otherNode}, elected: true},
		{name: "other node by selected-node", claim: []string{"wffc", AnnSelectedNode + "=" + otherNode}, elected: true},
		{
			name:      "annotation wins over selected-node on the annotated node",
			claim:     []string{"wffc", AnnProvisionOnNode + "=" + selfNode, AnnSelectedNode + "=" + otherNode},
			want:      true,
			wantEvent: "Warning " + ReasonNodeConflict,
		},
		{
			name:  "annotation wins over selected-node: the selected node does nothing",
			claim: []string{"wffc", AnnProvisionOnNode + "=" + otherNode, AnnSelectedNode + "=" + selfNode}, elected: true,
		},
		{
			name:      "hostpath.dev annotation wins over kubevirt annotation",
			claim:     []string{"immediate", AnnProvisionOnNode + "=" + selfNode, AnnKubevirtProvisionOnNode + "=" + otherNode},
			want:      true,
			wantEvent: "Warning " + ReasonNodeConflict,
		},
		{
			name:      "pinned WaitForFirstConsumer claim gets selected-node from the owner",
			claim:     []string{"wffc", AnnKubevirtProvisionOnNode + "=" + selfNode},
			wantEvent: "Normal " + ReasonNodeSelected,
			wantPatch: true,
		},
		{name: "pinned WaitForFirstConsumer claim of another node", claim: []string{"wffc", AnnProvisionOnNode + "=" + otherNode}, elected: true},
		{name: "WaitForFirstConsumer claim waits for the scheduler", claim: []string{"wffc"}, elected: true},
		{name: "Immediate claim without node, elected instance warns", claim: []string{"immediate"}, elected: true, wantEvent: "Warning " + ReasonNoNode},
		{name: "Immediate claim without node, other instances are silent", claim: []string{"immediate"}},
		{name: "nonexistent node, elected instance warns", claim: []string{"immediate", AnnProvisionOnNode + "=ghost"}, elected: true, wantEvent: "Warning " + ReasonNodeNotFound},
		{name: "nonexistent node, other instances are silent", claim: []string{"immediate", AnnProvisionOnNode + "=ghost"}},
		{name: "nonexistent selected node, elected instance warns", claim: []string{"wffc", AnnSelectedNode + "=ghost"}, elected: true, wantEvent: "Warning " + ReasonNodeNotFound},
		{name: "node without provisioner, elected instance warns", claim: []string{"immediate", AnnProvisionOnNode + "=" + idleNode}, elected: true, wantEvent: "Warning " + ReasonNoInstance},
		{name: "node without provisioner, other instances are silent", claim: []string{"immediate", AnnProvisionOnNode + "=" + idleNode}},
		{name: "multihost claim, elected instance owns it", claim: []string{"multihost"}, elected: true, want: true},
		{name: "multihost claim, other instances do not", claim: []string{"multihost", AnnProvisionOnNode + "=" + selfNode}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, fakeInstances{elected: tc.elected, nodes: all}, append(testNodes(), testClasses()...)...)
			c := claim(tc.claim[0], tc.claim[1:]...)
			if err := f.kube.Tracker().Add(c); err != nil {
				t.Fatal(err)
			}

			if got := f.prov.ShouldProvision(ctx, c); got != tc.want {
				t.Errorf("ShouldProvision = %v, want %v", got, tc.want)
			}
			events := f.events()
			switch {
			case tc.wantEvent == "" && len(events) > 0:
				t.Errorf("events = %q, want none", events)
			case tc.wantEvent != "" && (len(events) != 1 || !strings.HasPrefix(events[0], tc.wantEvent+" ")):
				t.Errorf("events = %q, want one %q", events, tc.wantEvent)
			}
			patches := patchActions(f.kube.Actions())
			if !tc.wantPatch {
				if len(f.kube.Actions()) > 0 {
					t.Errorf("API actions = %v, want none", f.kube.Actions())
				}
				return
			}
			if len(patches) != 1 {
				t.Fatalf("patches = %v, want one", patches)
			}
			p := patches[0]
			if p.Name != c.Name || p.Namespace != c.Namespace || p.PatchOptions.FieldManager != FieldManager {
				t.Errorf("patch of %s/%s with field manager %q, want %s/%s with %q", p.Namespace, p.Name, p.PatchOptions.FieldManager, c.Namespace, c.Name, FieldManager)
			}
			var body struct {
				Metadata struct {
					ResourceVersion string            `json:"resourceVersion"`
					Annotations     map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(p.Patch, &body); err != nil {
				t.Fatal(err)
			}
			if body.Metadata.Annotations[AnnSelectedNode] != selfNode || body.Metadata.ResourceVersion != c.ResourceVersion {
				t.Errorf("patch = %s, want selected-node %q at resourceVersion %q", p.Patch, selfNode, c.ResourceVersion)
			}
		})
	}
}

func TestShouldProvisionWarnsOncePerClaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, fakeInstances{elected: true}, append(testNodes(), testClasses()...)...)
	c := claim("immediate")
	for range 3 {
		f.prov.ShouldProvision(ctx, c)
	}
	if events := f.events(); len(events) != 1 {
		t.Errorf("events after 3 syncs = %q, want 1", events)
	}
	// A changed problem is reported again.
	c.Annotations[AnnProvisionOnNode] = "ghost"
	f.prov.ShouldProvision(ctx, c)
	if events := f.events(); len(events) != 1 || !strings.Contains(events[0], ReasonNodeNotFound) {
		t.Errorf("events after the change = %q, want one %s", events, ReasonNodeNotFound)
	}
	// Forgetting a deleted claim lets a new claim with the same UID warn.
	f.prov.Forget(c.UID)
	f.prov.ShouldProvision(ctx, c)
	if events := f.events(); len(events) != 1 {
		t.Errorf("events after Forget = %q, want 1", events)
	}
}

func TestShouldDelete(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{name: "own node", annotations: map[string]string{AnnNode: selfNode, AnnMode: "node"}, want: true},
		{name: "other node", annotations: map[string]string{AnnNode: otherNode, AnnMode: "node"}},
		{name: "no node annotation", annotations: nil},
		{name: "multihost volume", annotations: map[string]string{AnnNode: selfNode, AnnMode: "multihost"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, fakeInstances{})
			pv := buildPV(pvInput{name: "pv", class: class("c", "Immediate", nil), claim: claim("c"), node: selfNode})
			pv.Annotations = tc.annotations
			if got := f.prov.ShouldDelete(ctx, pv); got != tc.want {
				t.Errorf("ShouldDelete = %v, want %v", got, tc.want)
			}
		})
	}
}

func patchActions(actions []clienttesting.Action) []clienttesting.PatchActionImpl {
	var out []clienttesting.PatchActionImpl
	for _, a := range actions {
		if p, ok := a.(clienttesting.PatchActionImpl); ok {
			out = append(out, p)
		}
	}
	return slices.Clip(out)
}
