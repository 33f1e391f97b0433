// Package managertest is a fake of the managers' Go client for tests only:
// the managers of a cluster, one per node, kept in memory. Each Manager
// has every call method of *managerapi.Client (Host, PreparePool,
// ListVolumes, ListVolumesPage, GetVolume, CreateVolume, CloneVolume,
// SetOwner, SetSize, DeleteVolume), so it satisfies the small Manager
// interfaces that the provisioner and the host definer declare, and it
// answers by the manager's rules: owner records compared and swapped,
// OwnerConflict naming the owner, NotFound for a missing volume,
// PoolNotFound for a missing pool, volumes that never shrink, a delete of
// a missing volume that succeeds. Its errors are *managerapi.Error
// wrapped as the client wraps them ("PUT /v1/pools/p/volumes/v: ..."), so
// managerapi.Classify, ReasonOf and OwnerOf read them as they read a real
// manager's.
//
// A Fake records every call (Calls, Take), answers scripted errors per
// node, per call and per volume (Fail), can run code at each call
// (OnCall), and can have no manager on a node (FailForNode). It is safe for
// concurrent use: multihost fan-outs and backfills call it from several
// goroutines.
//
// Only _test.go files import it (make verify keeps packages whose name
// ends in "test" out of the binaries); it is exported, beside the client,
// because the tests of the provisioner and of the host definer share it.
package managertest

import (
	"fmt"
	"slices"
	"sync"

	"hostpath.dev/api/managerapi"
)

// Method names a call of the client, as Call.Method and Failure.Method
// do.
type Method string

// The calls of the client.
const (
	Host            Method = "Host"
	PreparePool     Method = "PreparePool"
	ListVolumes     Method = "ListVolumes"
	ListVolumesPage Method = "ListVolumesPage"
	GetVolume       Method = "GetVolume"
	CreateVolume    Method = "CreateVolume"
	CloneVolume     Method = "CloneVolume"
	SetOwner        Method = "SetOwner"
	SetSize         Method = "SetSize"
	DeleteVolume    Method = "DeleteVolume"
)

// Call is one call made to a Manager.
type Call struct {
	// Node is the manager's node.
	Node string
	// Method is the call.
	Method Method
	// Pool and Name are the pool and the volume called ("" where the call
	// has none).
	Pool, Name string
	// Request is what the call sent besides them: a
	// managerapi.CreateVolumeRequest, CloneVolumeRequest, SetOwnerRequest,
	// SetSizeRequest, DeleteOptions or ListOptions; nil for the others.
	Request any
}

// String is "node Method pool/name", without what is empty: "node-a Host",
// "node-a ListVolumes default", "node-a SetSize default/pv-1-dir".
func (c Call) String() string {
	s := c.Node + " " + string(c.Method)
	switch {
	case c.Name != "":
		s += " " + c.Pool + "/" + c.Name
	case c.Pool != "":
		s += " " + c.Pool
	}
	return s
}

// Failure scripts an error: the calls it matches answer Err and change
// nothing (they are recorded). Empty fields match anything.
type Failure struct {
	// Node, Method, Pool and Name select the calls.
	Node   string
	Method Method
	Pool   string
	Name   string
	// Err is the answer. A bare *managerapi.Error (managerapi.Errorf's)
	// is wrapped as the client wraps a manager's answer ("PUT
	// /v1/pools/default/volumes/x: manager answered ..."); any other error
	// (a refused connection, an answer the test wrapped itself) is
	// answered as it is.
	Err error
	// Times is how many calls fail; 0 is every call until ClearFailures.
	Times int
}

// matches reports whether the failure applies to c.
func (fl *Failure) matches(c Call) bool {
	return (fl.Node == "" || fl.Node == c.Node) && (fl.Method == "" || fl.Method == c.Method) &&
		(fl.Pool == "" || fl.Pool == c.Pool) && (fl.Name == "" || fl.Name == c.Name)
}

// NoManagerError is ForNode's error for a node without a manager, as the
// provisioner's resolver answers for a node without a Ready manager pod.
type NoManagerError struct {
	// Node is the node without a manager.
	Node string
}

func (e *NoManagerError) Error() string {
	return fmt.Sprintf("no Ready manager pod on node %q", e.Node)
}

// Fake is the managers of a cluster, one per node. The zero value is not
// usable: call New.
type Fake struct {
	mu       sync.Mutex
	nodes    map[string]*node
	down     map[string]error
	calls    []Call
	failures []*Failure
	onCall   []func(Call)
}

// New returns a Fake without managers: Node adds them.
func New() *Fake {
	return &Fake{nodes: map[string]*node{}, down: map[string]error{}}
}

// Node returns the manager of node, adding it (with no pool, and a Host
// naming the node) when it has none yet.
func (f *Fake) Node(name string) *Manager {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node(name)
	return &Manager{f: f, node: name}
}

// node returns the state of node name, adding it. f.mu is held.
func (f *Fake) node(name string) *node {
	n, ok := f.nodes[name]
	if !ok {
		n = &node{host: managerapi.Host{NodeName: name}, pools: map[string]*pool{}}
		f.nodes[name] = n
	}
	return n
}

// ForNode returns the manager of node as a resolver would: the error that
// FailForNode set for the node, a *NoManagerError for a node that Node
// never added, else its Manager.
func (f *Fake) ForNode(node string) (*Manager, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.down[node]; err != nil {
		return nil, err
	}
	if _, ok := f.nodes[node]; !ok {
		return nil, &NoManagerError{Node: node}
	}
	return &Manager{f: f, node: node}, nil
}

// For returns f.ForNode as the func(node) (M, error) that the programs'
// configurations take, M being the consumer's Manager interface, which
// *Manager must satisfy (else For panics, at the first call).
func For[M any](f *Fake) func(node string) (M, error) {
	return func(node string) (M, error) {
		m, err := f.ForNode(node)
		if err != nil {
			var none M
			return none, err
		}
		return any(m).(M), nil
	}
}

// FailForNode makes ForNode(node) answer err from now on (a
// *NoManagerError when err is nil), whether the node has a manager or
// not; the manager keeps its state. Restore undoes it.
func (f *Fake) FailForNode(node string, err error) {
	if err == nil {
		err = &NoManagerError{Node: node}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[node] = err
}

// Restore makes ForNode(node) answer the node's manager again, adding it
// if it has none, after FailForNode.
func (f *Fake) Restore(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.down, node)
	f.node(node)
}

// Fail scripts an error for the calls that fl matches. The failures apply
// in the order they were scripted: the first that matches a call answers
// it.
func (f *Fake) Fail(fl Failure) {
	if fl.Err == nil {
		panic("managertest: a Failure needs an Err")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, &fl)
}

// ClearFailures drops every scripted failure.
func (f *Fake) ClearFailures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = nil
}

// OnCall makes fn run at every call, once it is recorded and before it is
// answered, without the Fake's lock held (fn may call the Fake, or change
// the cluster the test watches meanwhile). fn runs on the caller's
// goroutine.
func (f *Fake) OnCall(fn func(Call)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onCall = append(f.onCall, fn)
}

// Calls returns the calls made so far to every manager, in the order they
// were made.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Take returns the calls made so far, as Calls does, and forgets them.
func (f *Fake) Take() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// Strings returns the String of each call.
func Strings(calls []Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.String()
	}
	return out
}

// begin records c, runs the OnCall functions, and returns the scripted
// error that answers c, nil when none does.
func (f *Fake) begin(c Call) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	hooks := slices.Clone(f.onCall)
	f.mu.Unlock()
	for _, fn := range hooks {
		fn(c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fl := range f.failures {
		if !fl.matches(c) {
			continue
		}
		if fl.Times > 0 {
			if fl.Times--; fl.Times == 0 {
				f.failures = slices.Delete(f.failures, i, i+1)
			}
		}
		if e, ok := fl.Err.(*managerapi.Error); ok {
			return wrap(c, e)
		}
		return fl.Err
	}
	return nil
}

// Answer returns the error a client call returns when the manager answers
// reason with the message format, args (a call on volume x of pool
// default): for the tests of code that is handed a manager's answer
// without a Fake, and for Fail.
func Answer(reason managerapi.Reason, format string, args ...any) error {
	return wrap(Call{Method: CreateVolume, Pool: "default", Name: "x"}, managerapi.Errorf(reason, format, args...))
}

// OwnerConflict is Answer's OwnerConflict naming owner ("" for a directory
// without an owner record), as managerapi.OwnerOf reads it.
func OwnerConflict(owner string) error {
	e := managerapi.Errorf(managerapi.ReasonOwnerConflict, "the directory belongs to %q", owner)
	e.Owner = owner
	return wrap(Call{Method: CreateVolume, Pool: "default", Name: "x"}, e)
}
