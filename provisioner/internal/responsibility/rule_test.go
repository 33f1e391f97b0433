package responsibility_test

import (
	"errors"
	"slices"
	"testing"

	"hostpath.dev/provisioner/internal/responsibility"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// nodes are the Nodes that exist.
type nodes []string

func (n nodes) Exists(name string) (bool, error) { return slices.Contains(n, name), nil }

// failingNodes cannot say.
type failingNodes struct{}

func (failingNodes) Exists(string) (bool, error) { return false, errors.New("API server away") }

// TestActs is the rule, seen from the instance on node-a: node-b exists
// and runs an instance, node-c exists and runs none, node-gone is gone.
func TestActs(t *testing.T) {
	var (
		mine      = responsibility.Object{Key: "uid", Node: "node-a"}
		served    = responsibility.Object{Key: "uid", Node: "node-b"}
		unserved  = responsibility.Object{Key: "uid", Node: "node-c"}
		gone      = responsibility.Object{Key: "uid", Node: "node-gone"}
		noNode    = responsibility.Object{Key: "uid"}
		multihost = responsibility.Object{Key: "uid", Multihost: true}
	)
	const (
		own       = responsibility.ReasonOwnNode
		other     = responsibility.ReasonOtherNode
		mh        = responsibility.ReasonMultihost
		none      = responsibility.ReasonNoNode
		goneNode  = responsibility.ReasonNodeGone
		noInst    = responsibility.ReasonNoInstance
		electVerb = responsibility.ReasonElectedVerb
	)
	tests := []struct {
		name    string
		verb    responsibility.Verb
		obj     responsibility.Object
		wins    bool
		want    bool
		reason  responsibility.Reason
		nodeErr bool
		wantErr bool
	}{
		// A node's instance acts for its node, for every verb but the
		// node-gone handling.
		{name: "provision: own node", verb: responsibility.Provision, obj: mine, want: true, reason: own},
		{name: "delete: own node", verb: responsibility.Delete, obj: mine, want: true, reason: own},
		{name: "finalize: own node", verb: responsibility.Finalize, obj: mine, want: true, reason: own},
		{name: "record policy: own node", verb: responsibility.RecordPolicy, obj: mine, want: true, reason: own},
		{name: "grow: own node", verb: responsibility.Grow, obj: mine, want: true, reason: own},
		{name: "watch: own node", verb: responsibility.Watch, obj: mine, want: true, reason: own},
		{name: "speak: own node", verb: responsibility.Speak, obj: mine, want: true, reason: own},
		// Another node's instance acts for its node, elected or not.
		{name: "provision: other node", verb: responsibility.Provision, obj: served, wins: true, reason: other},
		{name: "delete: other node", verb: responsibility.Delete, obj: served, wins: true, reason: other},
		{name: "finalize: other node", verb: responsibility.Finalize, obj: served, wins: true, reason: other},
		{name: "record policy: other node", verb: responsibility.RecordPolicy, obj: served, wins: true, reason: other},
		{name: "grow: other node", verb: responsibility.Grow, obj: served, wins: true, reason: other},
		{name: "watch: other node served: not cached", verb: responsibility.Watch, obj: served, reason: other},
		{name: "speak: other node served", verb: responsibility.Speak, obj: served, wins: true, reason: other},
		// No node owns a multihost object: the elected instance acts.
		{name: "provision: multihost elected", verb: responsibility.Provision, obj: multihost, wins: true, want: true, reason: mh},
		{name: "provision: multihost not elected", verb: responsibility.Provision, obj: multihost, reason: mh},
		{name: "delete: multihost elected", verb: responsibility.Delete, obj: multihost, wins: true, want: true, reason: mh},
		{name: "delete: multihost not elected", verb: responsibility.Delete, obj: multihost, reason: mh},
		{name: "finalize: multihost elected", verb: responsibility.Finalize, obj: multihost, wins: true, want: true, reason: mh},
		{name: "grow: multihost elected", verb: responsibility.Grow, obj: multihost, wins: true, want: true, reason: mh},
		{name: "grow: multihost not elected", verb: responsibility.Grow, obj: multihost, reason: mh},
		{name: "watch: multihost cached by every instance", verb: responsibility.Watch, obj: multihost, want: true, reason: mh},
		// A gone Node: taken over by the elected instance for the verbs
		// that finish without it; never for those that need its disk or
		// that the node-gone grace period guards.
		{name: "finalize: node gone, elected", verb: responsibility.Finalize, obj: gone, wins: true, want: true, reason: goneNode},
		{name: "finalize: node gone, not elected", verb: responsibility.Finalize, obj: gone, reason: goneNode},
		{name: "record policy: node gone, elected", verb: responsibility.RecordPolicy, obj: gone, wins: true, want: true, reason: goneNode},
		{name: "delete: node gone, left to the node-gone grace period", verb: responsibility.Delete, obj: gone, wins: true, reason: other},
		{name: "grow: node gone, nothing to grow", verb: responsibility.Grow, obj: gone, wins: true, reason: other},
		{name: "provision: node gone", verb: responsibility.Provision, obj: gone, wins: true, reason: other},
		{name: "finalize: Node there without an instance is not taken over", verb: responsibility.Finalize, obj: unserved, wins: true, reason: other},
		{name: "finalize: the Node cannot be looked up", verb: responsibility.Finalize, obj: served, wins: true, nodeErr: true, reason: goneNode, wantErr: true},
		// A node without an instance: the elected instance speaks for the
		// claim (writes to the claim only); every instance watches.
		{name: "speak: no instance on the node, elected", verb: responsibility.Speak, obj: unserved, wins: true, want: true, reason: noInst},
		{name: "speak: no instance on the node, not elected", verb: responsibility.Speak, obj: unserved, reason: noInst},
		{name: "speak: node gone, elected", verb: responsibility.Speak, obj: gone, wins: true, want: true, reason: noInst},
		{name: "watch: no instance on the node: cached", verb: responsibility.Watch, obj: unserved, want: true, reason: noInst},
		// An object that names no node.
		{name: "finalize: no node, elected", verb: responsibility.Finalize, obj: noNode, wins: true, want: true, reason: none},
		{name: "speak: no node, elected", verb: responsibility.Speak, obj: noNode, wins: true, want: true, reason: none},
		{name: "provision: no node", verb: responsibility.Provision, obj: noNode, wins: true, reason: none},
		{name: "delete: no node", verb: responsibility.Delete, obj: noNode, wins: true, reason: none},
		{name: "grow: no node", verb: responsibility.Grow, obj: noNode, wins: true, reason: none},
		{name: "watch: no node: cached", verb: responsibility.Watch, obj: noNode, want: true, reason: none},
		// The node-gone handling is the elected instance's, whatever the
		// node: two instances never undo each other's mark.
		{name: "mark node gone: elected", verb: responsibility.MarkNodeGone, obj: gone, wins: true, want: true, reason: electVerb},
		{name: "mark node gone: not elected", verb: responsibility.MarkNodeGone, obj: gone, reason: electVerb},
		{name: "mark node gone: own node, not elected", verb: responsibility.MarkNodeGone, obj: mine, reason: electVerb},
		{name: "mark node gone: served node, elected", verb: responsibility.MarkNodeGone, obj: served, wins: true, want: true, reason: electVerb},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n responsibility.Nodes = nodes{"node-a", "node-b", "node-c"}
			if tt.nodeErr {
				n = failingNodes{}
			}
			rule := responsibility.New("node-a", responsibilitytest.Instances{Wins: tt.wins, On: []string{"node-b"}}, n)
			got, err := rule.Acts(tt.verb, tt.obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Acts(%s) error = %v, want error %t", tt.verb, err, tt.wantErr)
			}
			if got.Acts != tt.want || got.Reason != tt.reason {
				t.Errorf("Acts(%s, %+v) = %+v, want acts %t for %s", tt.verb, tt.obj, got, tt.want, tt.reason)
			}
		})
	}
}

// TestActsAsksOnlyWhatItNeeds: a verb that never takes over asks nothing
// about the node, and an answer that is not the election's elects nobody.
func TestActsAsksOnlyWhatItNeeds(t *testing.T) {
	broken := responsibilitytest.Instances{Err: errors.New("no pod cache")}
	rule := responsibility.New("node-a", broken, failingNodes{})
	for _, tc := range []struct {
		verb responsibility.Verb
		obj  responsibility.Object
	}{
		{responsibility.Provision, responsibility.Object{Key: "uid", Node: "node-b"}},
		{responsibility.Grow, responsibility.Object{Key: "uid", Node: "node-a"}},
		{responsibility.Delete, responsibility.Object{Key: "uid", Node: "node-gone"}},
	} {
		if _, err := rule.Acts(tc.verb, tc.obj); err != nil {
			t.Errorf("Acts(%s, %+v) asked: %v", tc.verb, tc.obj, err)
		}
	}
	if _, err := rule.Acts(responsibility.Provision, responsibility.Object{Key: "uid", Multihost: true}); err == nil {
		t.Error("Acts(Provision, multihost) with a failing election: no error")
	}
}
