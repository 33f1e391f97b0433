// Package nodes is how an instance knows the Nodes of the cluster without
// watching them all. Every Node's status is rewritten at least every 5
// minutes by its kubelet, so a watch of every Node in every instance grows
// as the square of the cluster: at 1,000 nodes, each instance would take
// over 3 Node updates a second and the API server would send about 12
// million an hour. So an instance watches only its own Node (by field
// selector, as the kubelet does), and learns of the others on demand:
//
//   - whether a Node exists (Lookup.Exists): yes when an instance of the
//     provisioner runs on it (its pod, which the instance's peer cache
//     holds; a DaemonSet pod is deleted with its Node), else what the API
//     server says, a Node found kept for a short while (a missing one is
//     asked about each time);
//   - a Node itself (Lookup.Get, for the labels of a node that runs no
//     instance): from the API server, kept for a short while.
//
// So Exists asks the API server only about a Node that runs no instance:
// one deleted, one without a kubelet, or a control-plane node. A Node that
// is deleted takes its instance's pod with it, and the instances are told
// by their peer cache (package app tells package reclaim, which calls
// Forget then); of a Node that runs no instance, the instance elected for
// each of its PVs asks afresh every few seconds (package reclaim).
//
// The answers kept expire after a TTL (client-go's expiration store,
// cache.TTLPolicy), so a Node that comes back without an instance is seen
// again within it.
package nodes

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"hostpath.dev/provisioner/internal/responsibility"
)

// DefaultTTL is how long a Lookup keeps an answer of the API server.
const DefaultTTL = 30 * time.Second

// getTimeout bounds one GET of a Node: the callers (listers' Get) have no
// context.
const getTimeout = 10 * time.Second

// Config is what a Lookup reads.
type Config struct {
	// Node is this instance's node, found in Own.
	Node string
	// Own is the cache of this instance's own Node (a watch of that one
	// Node).
	Own corelisters.NodeLister
	// API gets the other Nodes from the API server.
	API typedcorev1.NodesGetter
	// Peers are the instances, by node (only OnNode is asked).
	Peers responsibility.Instances
	// Transform is applied to a Node got from the API server before it is
	// kept (the stub of the Node cache); nil keeps it whole.
	Transform cache.TransformFunc
	// TTL is how long an answer of the API server is kept; 0 means
	// DefaultTTL.
	TTL time.Duration
	// Clock times the answers kept; nil means the real clock.
	Clock clock.Clock
}

// Lookup answers for the Nodes of the cluster as described in the package
// doc. Its Get is a lister's Get, but it lists nothing: no part of the
// provisioner (nor the library, since v13) needs every Node.
type Lookup struct {
	cfg   Config
	found cache.Store
}

// answer is what the API server said of one Node: node is nil when it was
// NotFound.
type answer struct {
	name string
	node *v1.Node
}

// New returns the Lookup of cfg.
func New(cfg Config) *Lookup {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	key := func(obj any) (string, error) { return obj.(*answer).name, nil }
	return &Lookup{cfg: cfg, found: cache.NewExpirationStore(key, &cache.TTLPolicy{TTL: cfg.TTL, Clock: cfg.Clock})}
}

// Get returns the Node name: this instance's from its cache, another's
// from the answers kept, else from the API server (the answer kept, a
// NotFound too). A Node that does not exist is a NotFound error, as from a
// lister; so is a name no Node can have, without a question.
func (l *Lookup) Get(name string) (*v1.Node, error) {
	if name == l.cfg.Node {
		return l.cfg.Own.Get(name)
	}
	if a, ok := l.kept(name); ok {
		return a.result()
	}
	if !validName(name) {
		return (&answer{name: name}).result()
	}
	ctx, cancel := context.WithTimeout(context.Background(), getTimeout)
	defer cancel()
	node, err := l.cfg.API.Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return nil, fmt.Errorf("get Node %q: %w", name, err)
	case l.cfg.Transform != nil:
		obj, err := l.cfg.Transform(node)
		if err != nil {
			return nil, fmt.Errorf("trim Node %q: %w", name, err)
		}
		node = obj.(*v1.Node)
	}
	a := &answer{name: name, node: node}
	if err := l.found.Add(a); err != nil {
		return nil, fmt.Errorf("keep Node %q: %w", name, err)
	}
	return a.result()
}

// Exists reports whether the Node name exists: this instance's from its
// cache; another when an instance runs on it, else from a Node kept or
// the API server (Get). It says a Node is missing only on the API
// server's answer of now, never on one kept: a Node may have come back
// since, and the writes that act on a Node being gone (package reclaim:
// a mark, a PV deleted, a finalizer removed without the directory's
// removal) read Exists.
func (l *Lookup) Exists(name string) (bool, error) {
	if !validName(name) {
		return false, nil
	}
	if name != l.cfg.Node {
		if running, err := l.cfg.Peers.OnNode(name); err != nil || running {
			return running, err
		}
		if a, ok := l.kept(name); ok && a.node == nil {
			l.Forget(name)
		}
	}
	_, err := l.Get(name)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// Forget drops the answer kept for name, so that the next question asks
// the API server again: package app calls it when an instance's pod comes
// or goes on that node.
func (l *Lookup) Forget(name string) {
	_ = l.found.Delete(&answer{name: name})
}

// validName reports whether a Node may have name: a claim's annotation
// may say anything ("../x", ""), and the API server is not asked about a
// name no Node can have.
func validName(name string) bool {
	return len(validation.NameIsDNSSubdomain(name, false)) == 0
}

// kept returns the unexpired answer kept for name.
func (l *Lookup) kept(name string) (*answer, bool) {
	obj, ok, err := l.found.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*answer), true
}

// result is the answer as a lister's Get gives it.
func (a *answer) result() (*v1.Node, error) {
	if a.node == nil {
		return nil, apierrors.NewNotFound(v1.Resource("node"), a.name)
	}
	return a.node, nil
}
