// Package managers finds the hostpath manager that serves a node: the Ready
// manager pod scheduled to the node, read from a pod lister, or one static
// URL for every node.
package managers

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/manager/pkg/component"
)

// NotFoundError says that no Ready manager pod runs on a node.
type NotFoundError struct {
	// Node is the node without a manager.
	Node string
	// Selector is the label selector the manager pods were looked up with.
	Selector string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no Ready manager pod (selector %s) on node %q", e.Selector, e.Node)
}

// ClientOptions returns the options of every manager client: bearer tokens
// read from tokenFile at every call (none when it is empty), and the time
// limits of a call and of a delete (client.WithTimeouts; zero keeps the
// client's default).
func ClientOptions(tokenFile string, callTimeout, deleteTimeout time.Duration) []client.Option {
	opts := []client.Option{client.WithTimeouts(callTimeout, deleteTimeout)}
	if tokenFile != "" {
		opts = append(opts, client.WithToken(client.FileToken(tokenFile)))
	}
	return opts
}

// Resolver returns a client for the manager of a node. It is safe for
// concurrent use.
type Resolver struct {
	pods     corelisters.PodNamespaceLister
	selector labels.Selector
	port     int
	static   *client.Client
	opts     []client.Option

	// expected lists the nodes that should run a manager (ExpectOn).
	expected func() ([]string, error)

	mu      sync.Mutex
	clients map[string]*client.Client
}

// NewResolver returns a Resolver that finds manager pods matching selector
// through pods and calls them on port, with opts (see ClientOptions) for
// every client.
func NewResolver(pods corelisters.PodNamespaceLister, selector labels.Selector, port int, opts ...client.Option) *Resolver {
	return &Resolver{pods: pods, selector: selector, port: port, opts: opts, clients: map[string]*client.Client{}}
}

// NewStaticResolver returns a Resolver that answers the manager at baseURL
// for every node (for one-node setups and debugging).
func NewStaticResolver(baseURL string, opts ...client.Option) (*Resolver, error) {
	c, err := client.New(baseURL, opts...)
	if err != nil {
		return nil, err
	}
	return &Resolver{static: c}, nil
}

// ExpectOn makes Targets count every node that nodes returns and that has
// no Ready manager pod as pending: a node kept free of managers (or whose
// manager pod is gone) is then named, not silently left out. The provisioner
// passes the nodes of its live instances, which run wherever the product
// runs. Call it before the Resolver is used.
func (r *Resolver) ExpectOn(nodes func() ([]string, error)) { r.expected = nodes }

// ForNode returns a client for the manager on node. The error is a
// *NotFoundError when no Ready manager pod with an IP runs there.
func (r *Resolver) ForNode(node string) (*client.Client, error) {
	if r.static != nil {
		return r.static, nil
	}
	pods, err := r.pods.List(r.selector)
	if err != nil {
		return nil, fmt.Errorf("list manager pods: %w", err)
	}
	var ip string
	for _, p := range pods {
		if p.Spec.NodeName == node && p.Status.PodIP != "" && component.PodServing(p) {
			ip = p.Status.PodIP
			break
		}
	}
	if ip == "" {
		return nil, &NotFoundError{Node: node, Selector: r.selector.String()}
	}
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(r.port))
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[node]; ok && c.BaseURL() == url {
		return c, nil
	}
	c, err := client.New(url, r.opts...)
	if err != nil {
		return nil, err
	}
	r.clients[node] = c
	return c, nil
}

// ErrNoTargets says that a Resolver with a fixed manager URL cannot list
// the nodes that run a manager: multihost volumes need the manager pods.
var ErrNoTargets = errors.New("the managers are not discovered (fixed --manager-url): multihost volumes need the manager pods of every node")

// Targets returns the sorted nodes that run a manager pod that is not
// terminating: ready, those whose pod is Ready with an IP (ForNode answers
// them), and pending, the others, which get multihost directories once
// their manager is Ready. A node in ready is never in pending. The target
// set comes from the manager pods today; the host definer's
// HostDefinitions will take it over. A static Resolver returns
// ErrNoTargets.
func (r *Resolver) Targets() (ready, pending []string, err error) {
	if r.static != nil {
		return nil, nil, ErrNoTargets
	}
	var expected []string
	if r.expected != nil {
		if expected, err = r.expected(); err != nil {
			return nil, nil, fmt.Errorf("list the nodes that should run a manager: %w", err)
		}
	}
	pods, err := r.pods.List(r.selector)
	if err != nil {
		return nil, nil, fmt.Errorf("list manager pods: %w", err)
	}
	for _, p := range pods {
		switch {
		case p.Spec.NodeName == "" || p.DeletionTimestamp != nil:
		case p.Status.PodIP != "" && component.PodServing(p):
			ready = append(ready, p.Spec.NodeName)
		default:
			pending = append(pending, p.Spec.NodeName)
		}
	}
	slices.Sort(ready)
	ready = slices.Compact(ready)
	pending = append(pending, expected...)
	pending = slices.DeleteFunc(pending, func(n string) bool { _, found := slices.BinarySearch(ready, n); return found })
	slices.Sort(pending)
	return ready, slices.Compact(pending), nil
}
