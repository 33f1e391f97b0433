// Package managers finds the hostpath manager that serves a node: the Ready
// manager pod scheduled to the node, looked up by node in the pod cache
// (hostpathv1.NodeNameIndex, by podstub.IndexByNodeName), called over
// HTTPS on its pod IP and verified as the manager of that node (its
// certificate names the node, signed by a CA of the bundle), or one static
// URL for every node; and the nodes a multihost volume of a pool goes to,
// from the host definer's HostDefinitions (Resolver.Targets).
package managers

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/podstub"
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

// Resolver returns a client for the manager of a node. It is safe for
// concurrent use.
type Resolver struct {
	// pods are indexed by hostpathv1.NodeNameIndex, definitions by
	// hostpathv1.PoolIndex.
	pods, definitions cache.Indexer
	selector          labels.Selector
	port              int
	roots             func() *x509.CertPool
	static            *managerapi.Client
	opts              []managerapi.Option

	mu      sync.Mutex
	clients map[string]*managerapi.Client
}

// NewResolver returns a Resolver that finds manager pods in pods (the
// cache of the managers' namespace, of podstub.Pods, which holds the pods
// of selector and no other: the API server selects them; selector names
// them in NotFoundError) and calls them over HTTPS on port, trusting the
// CA certificates that roots returns at each TLS handshake (a
// trust.Bundle's Pool) for the certificate of managerapi.ServerName of
// the node, with opts (see managerapi.CallerOptions) for every client;
// and that reads the nodes of a pool (Targets) from definitions, the
// cache of the host definer's HostDefinitions. It adds the indexes it
// looks them up by (hostpathv1.NodeNameIndex to pods, hostpathv1.PoolIndex
// to definitions), so that a call costs the pods of one node and the
// definitions of one pool, not a list of all.
func NewResolver(pods, definitions cache.Indexer, selector labels.Selector, port int, roots func() *x509.CertPool, opts ...managerapi.Option) (*Resolver, error) {
	if err := pods.AddIndexers(cache.Indexers{hostpathv1.NodeNameIndex: podstub.IndexByNodeName}); err != nil {
		return nil, fmt.Errorf("index the manager pods by node: %w", err)
	}
	if err := definitions.AddIndexers(cache.Indexers{hostpathv1.PoolIndex: hostpathv1.IndexByPool}); err != nil {
		return nil, fmt.Errorf("index the HostDefinitions by pool: %w", err)
	}
	return &Resolver{pods: pods, definitions: definitions, selector: selector, port: port, roots: roots, opts: opts, clients: map[string]*managerapi.Client{}}, nil
}

// NewStaticResolver returns a Resolver that answers the manager at baseURL
// for every node (for one-node setups and debugging), with opts (for an
// https URL, managerapi.WithServerTLS).
func NewStaticResolver(baseURL string, opts ...managerapi.Option) (*Resolver, error) {
	c, err := managerapi.New(baseURL, opts...)
	if err != nil {
		return nil, err
	}
	return &Resolver{static: c}, nil
}

// ForNode returns a client for the manager on node: for
// https://<pod IP>:<port>, which accepts only a certificate for
// managerapi.ServerName(node), so a pod IP that another pod took since the
// cache saw it fails verification rather than being called. The client is
// kept while the pod IP stays. The error is a *NotFoundError when no Ready
// manager pod with an IP runs there.
func (r *Resolver) ForNode(node string) (*managerapi.Client, error) {
	if r.static != nil {
		return r.static, nil
	}
	pod, err := r.servingPod(node)
	if err != nil {
		return nil, err
	}
	if pod == nil {
		return nil, &NotFoundError{Node: node, Selector: r.selector.String()}
	}
	url := "https://" + net.JoinHostPort(pod.PodIP, strconv.Itoa(r.port))
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[node]; ok && c.BaseURL() == url {
		return c, nil
	}
	c, err := managerapi.New(url, slices.Concat(r.opts, []managerapi.Option{managerapi.WithServerTLS(r.roots, managerapi.ServerName(node))})...)
	if err != nil {
		return nil, err
	}
	r.clients[node] = c
	return c, nil
}

// servingPod returns the manager pod on node that ForNode calls, or nil.
func (r *Resolver) servingPod(node string) (*podstub.Pod, error) {
	objs, err := r.pods.ByIndex(hostpathv1.NodeNameIndex, node)
	if err != nil {
		return nil, fmt.Errorf("look the manager pods of node %q up: %w", node, err)
	}
	for _, obj := range objs {
		if p, ok := obj.(*podstub.Pod); ok && serving(p) {
			return p, nil
		}
	}
	return nil, nil
}

// serving reports whether ForNode calls manager pod p: scheduled, not
// terminating, Ready, and with an IP.
func serving(p *podstub.Pod) bool {
	return p.PodIP != "" && p.Serving()
}

// ErrNoTargets says that a Resolver with a fixed manager URL cannot list
// the nodes of a pool: multihost volumes need the manager pods and the
// HostDefinitions.
var ErrNoTargets = errors.New("the managers are not discovered (fixed --manager-url): multihost volumes need the manager pods and the HostDefinitions of every node")

// Targets returns, sorted, the nodes a multihost volume of pool goes to,
// as the host definer's HostDefinitions of the pool say. ready are the
// nodes whose definition is Ready and whose manager pod is serving (ForNode
// answers them); pending are those whose definition is PendingForCreation,
// or Ready while no manager pod serves: the host definer gives them the
// volume's directory once it (re)defines them. A node in ready is never in
// pending. Nodes without a definition of the pool are not targets, nor are
// those whose definition is in Error or PendingForDeletion, has no phase
// yet, or is being deleted. Both are empty, without an error, when no node
// is a target. A static Resolver returns ErrNoTargets.
func (r *Resolver) Targets(pool string) (ready, pending []string, err error) {
	if r.static != nil {
		return nil, nil, ErrNoTargets
	}
	defs, err := r.definitions.ByIndex(hostpathv1.PoolIndex, pool)
	if err != nil {
		return nil, nil, fmt.Errorf("look the HostDefinitions of pool %q up: %w", pool, err)
	}
	for _, obj := range defs {
		d, ok := obj.(*hostpathv1.HostDefinition)
		if !ok || d.Spec.Pool != pool || d.Spec.NodeName == "" || d.DeletionTimestamp != nil {
			continue
		}
		node := d.Spec.NodeName
		switch d.Status.Phase {
		case hostpathv1.PhaseReady:
			pod, err := r.servingPod(node)
			if err != nil {
				return nil, nil, err
			}
			if pod != nil {
				ready = append(ready, node)
			} else {
				pending = append(pending, node)
			}
		case hostpathv1.PhasePendingForCreation:
			pending = append(pending, node)
		}
	}
	slices.Sort(ready)
	ready = slices.Compact(ready)
	pending = slices.DeleteFunc(pending, func(n string) bool { _, found := slices.BinarySearch(ready, n); return found })
	slices.Sort(pending)
	return ready, slices.Compact(pending), nil
}
