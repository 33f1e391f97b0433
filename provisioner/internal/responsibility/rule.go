// Package responsibility answers, for every part of the provisioner, one
// question: does this instance act for this object now, and why.
//
// One provisioner instance runs on each node, with no leader. The rule
// (Rule.Acts):
//
//   - A node's instance acts for the objects of its node (a node-mode claim
//     or PV names its node).
//   - An object of no single node (a multihost one) is the elected
//     instance's: rendezvous hashing of the object's key over the live
//     instances (Winner), which every instance computes alike.
//   - Another node's object is taken over by the elected instance only
//     when its node cannot act, and only for the verbs for which that is
//     safe (Verb): the verbs that finish without the node's disk take over
//     a node whose Node object is gone (Finalize, RecordPolicy) or that
//     runs no instance and gets no write (Speak); the verbs that need the
//     node's disk (Provision, Grow) or that a grace period guards (Delete:
//     the node-gone handling deletes such a PV after its grace period) are
//     never taken over.
//   - The node-gone handling (MarkNodeGone) is the elected instance's
//     whatever the node, so that two instances never undo each other's
//     mark.
//   - A cache keeps (Watch) every object some verb may let this instance
//     act for: all but another node's objects while an instance serves
//     that node.
//
// Before any of it, an object is hostpath's at all or another
// provisioner's (ForeignClaim, ForeignVolume): no instance acts for
// another provisioner's claim or PV. The election itself (Winner,
// PodInstances) is in election.go; the fake instances of tests are in
// package responsibilitytest.
package responsibility

import (
	"errors"
	"fmt"
)

// Instances are the live provisioner instances, one a node, named by
// their node (*PodInstances is the one over the provisioner pods).
type Instances interface {
	// Elected reports whether this instance is the one that rendezvous
	// hashing of key elects among the live instances.
	Elected(key string) (bool, error)
	// OnNode reports whether an instance runs on node (Ready or not, not
	// terminating).
	OnNode(node string) (bool, error)
}

// Nodes says whether a Node exists (nodes.Lookup: missing only on the API
// server's answer of now, as every write made because a Node is gone
// acts on it).
type Nodes interface {
	// Exists reports whether the Node name exists; a NotFound is not an
	// error.
	Exists(name string) (bool, error)
}

// Object is what the rule reads of a claim or a PV.
type Object struct {
	// Key is what the election hashes: the object's UID.
	Key string
	// Multihost says that the object is of no single node.
	Multihost bool
	// Node is the node of a node-mode object; "" when it names none.
	Node string
}

// takeover says when another node's object becomes the elected
// instance's for a verb.
type takeover int

const (
	// never: only the node's instance acts.
	never takeover = iota
	// whenGone: the elected instance, once the Node object is gone.
	whenGone
	// whenUnserved: the elected instance, while no instance runs on the
	// node.
	whenUnserved
	// always: the elected instance, whatever the node.
	always
	// watched: every instance, while no instance runs on the node (each
	// may be elected as instances come and go).
	watched
)

// Verb is what an instance would do for an object.
type Verb struct {
	name     string
	takeover takeover
}

// String names the verb in logs.
func (v Verb) String() string { return v.name }

// The verbs.
var (
	// Provision creates a claim's directory: on its node, by its node's
	// instance (the elected one for a multihost claim).
	Provision = Verb{"Provision", never}
	// Speak reports the problem of a claim that no instance provisions,
	// or gives it back to the scheduler: it writes to the claim only, so
	// the elected instance speaks for a node that runs no instance (or a
	// claim that names none).
	Speak = Verb{"Speak", whenUnserved}
	// Delete is the library's Delete of a Released PV (the
	// DeletionGuard). A PV of a gone node is not taken over: the node-gone
	// handling deletes it once its grace period is over (and never without
	// one), then Finalize finishes it.
	Delete = Verb{"Delete", never}
	// Finalize takes the directory of a PV under deletion to its final
	// state and removes the finalizer: of a gone node, the elected instance
	// skips the node (its directory went with it) and lets the PV go.
	Finalize = Verb{"Finalize", whenGone}
	// RecordPolicy records a PV's reclaim policy with its directory; of a
	// gone node there is nothing to record.
	RecordPolicy = Verb{"RecordPolicy", whenGone}
	// Grow grows a claim's directory: it needs the node's disk.
	Grow = Verb{"Grow", never}
	// MarkNodeGone marks, unmarks and deletes the PVs of a gone node, and
	// scans for them: the elected instance's, whatever the node.
	MarkNodeGone = Verb{"MarkNodeGone", always}
	// Watch keeps an object in an instance's caches.
	Watch = Verb{"Watch", watched}
)

// Reason says why an instance acts or not; it is a log value.
type Reason string

// The reasons.
const (
	// ReasonOwnNode: the object is of this instance's node.
	ReasonOwnNode Reason = "OwnNode"
	// ReasonOtherNode: the object is of another node, whose instance acts.
	ReasonOtherNode Reason = "OtherNode"
	// ReasonMultihost: the object is of no single node.
	ReasonMultihost Reason = "Multihost"
	// ReasonNoNode: the node-mode object names no node.
	ReasonNoNode Reason = "NoNode"
	// ReasonNodeGone: the object's Node object is gone.
	ReasonNodeGone Reason = "NodeGone"
	// ReasonNoInstance: no instance runs on the object's node.
	ReasonNoInstance Reason = "NoInstanceOnNode"
	// ReasonElectedVerb: the verb is the elected instance's for every
	// object.
	ReasonElectedVerb Reason = "ElectedVerb"
)

// Answer is the rule's answer for one instance.
type Answer struct {
	// Acts says whether this instance acts.
	Acts bool
	// Reason says why (or why not).
	Reason Reason
}

// actor is who acts for an object, before any election.
type actor int

const (
	nobody actor = iota
	thisInstance
	nodeInstance
	electedInstance
	everyInstance
)

// Rule is the rule, seen from the instance on one node.
type Rule struct {
	self      string
	instances Instances
	nodes     Nodes
}

// New returns the rule of the instance on self among instances; nodes
// says whether a Node exists, for the verbs that take over a gone node
// (nil: a caller that asks for none of them).
func New(self string, instances Instances, nodes Nodes) *Rule {
	return &Rule{self: self, instances: instances, nodes: nodes}
}

// Self is the node of this instance.
func (r *Rule) Self() string { return r.self }

// Acts answers whether this instance does v for o now, and why. It asks
// about the node only when the verb may take it over, and elects only
// when the answer is the election's.
func (r *Rule) Acts(v Verb, o Object) (Answer, error) {
	absent := false
	if needsNode(v, o, r.self) {
		var err error
		if absent, err = r.absent(v, o.Node); err != nil {
			return Answer{Reason: reasonAbsent(v)}, err
		}
	}
	who, why := decide(v, o, r.self, absent)
	switch who {
	case thisInstance, everyInstance:
		return Answer{Acts: true, Reason: why}, nil
	case electedInstance:
		elected, err := r.instances.Elected(o.Key)
		if err != nil {
			return Answer{Reason: why}, fmt.Errorf("elect the instance for %s: %w", o.Key, err)
		}
		return Answer{Acts: elected, Reason: why}, nil
	}
	return Answer{Reason: why}, nil
}

// Served reports whether an instance runs on node: this one, or another
// (Instances.OnNode).
func (r *Rule) Served(node string) (bool, error) {
	if node == r.self {
		return true, nil
	}
	return r.instances.OnNode(node)
}

// needsNode says whether deciding v for o needs to know whether o's node
// can act: another node's object, for a verb that may take it over.
func needsNode(v Verb, o Object, self string) bool {
	return !o.Multihost && o.Node != "" && o.Node != self && v.takeover != never && v.takeover != always
}

// absent reports whether node cannot act for v: its Node is gone
// (whenGone), or no instance runs on it (whenUnserved, watched).
func (r *Rule) absent(v Verb, node string) (bool, error) {
	if v.takeover == whenGone {
		if r.nodes == nil {
			return false, errors.New("no Nodes to say whether a Node exists")
		}
		exists, err := r.nodes.Exists(node)
		if err != nil {
			return false, fmt.Errorf("look Node %q up: %w", node, err)
		}
		return !exists, nil
	}
	served, err := r.instances.OnNode(node)
	return !served, err
}

// reasonAbsent is the reason of v's answer when its node was absent.
func reasonAbsent(v Verb) Reason {
	if v.takeover == whenGone {
		return ReasonNodeGone
	}
	return ReasonNoInstance
}

// decide is the rule, with no lookup: who does v for o, seen from the
// instance on self, when o's node is absent (gone or unserved, as v
// counts it).
func decide(v Verb, o Object, self string, absent bool) (actor, Reason) {
	taker := electedInstance
	if v.takeover == watched {
		taker = everyInstance
	}
	switch {
	case o.Multihost:
		return taker, ReasonMultihost
	case v.takeover == always:
		return electedInstance, ReasonElectedVerb
	case o.Node != "" && o.Node == self:
		return thisInstance, ReasonOwnNode
	case o.Node == "" && v.takeover == never:
		return nobody, ReasonNoNode
	case o.Node == "":
		return taker, ReasonNoNode
	case absent:
		return taker, reasonAbsent(v)
	}
	return nodeInstance, ReasonOtherNode
}
