// Package auth decides who may call the manager's /v1 API, the way the
// kubelet guards its own API and NodeRestriction guards nodes: the caller's
// bearer token is checked with a TokenReview for the manager's own audience
// (managerapi.TokenAudience, so a token meant for the API server is refused),
// the call is authorised with a SubjectAccessReview on the hostpath.dev API
// group (see hostpath.dev/api/managerapi for the resources and verbs), and a write is then
// held to the authority of what the token is bound to.
//
// # Node-scoped authority
//
// A projected service account token is bound to its pod: TokenReview's
// status.user.extra carries the pod's name and UID and its node's name
// (managerapi.ExtraPodName, managerapi.ExtraPodUID, managerapi.ExtraNodeName). Reads
// (get, list) need only the route's permission. A write (create, update,
// resize, delete) is decided by what the token is bound to:
//
//  1. A pod: the pod must be live, checked with a GET of the pod in the
//     service account's namespace (cached for Options.PodTTL): it exists
//     with the token's UID and service account, runs on the token's node
//     and has not finished. A token whose pod is gone is refused at once,
//     although TokenReview's answer stays cached for AuthenticatedTTL. This
//     is checked for every write, not only across nodes: writes are rare
//     (a claim, a deletion, a resize), the cache makes a burst cost one
//     GET, and it bounds what a token copied off a node before its pod was
//     deleted is worth there too. Reads skip it (the usage refresher and
//     the sweeper read often, and reading changes nothing).
//  2. A pod, or a Node object, on this manager's node: the write has this
//     node's authority, which the route's permission alone decides.
//  3. A pod, or a Node object, on another node: a volume write
//     (pools/volumes) also needs a SubjectAccessReview of
//     pools/multihostvolumes (same verb, name the pool), and even then may
//     change only multihost volumes: Decision.Remote names the caller's
//     node, and the disk Store refuses, under the volume's lock, a create
//     that is not multihost and any write on an owner record that does not
//     say multihost (managerapi.ReasonForbidden, naming both nodes). PUT
//     /v1/pools/{pool} is not node-scoped: it only makes the pool's
//     directory, never touches a volume, and the host definer sends it to
//     every node.
//  4. Nothing (`kubectl create token SA` without --bound-object-kind, a
//     token bound to a Secret, a legacy Secret token): an operator's
//     debugging token. It reads with the route's permission; a write also
//     needs a SubjectAccessReview of hosts/admin (same verb, name the
//     node), which only the ClusterRole managerapi.AdminClusterRole grants,
//     and then has this node's authority.
//
// Why the mode lives in the owner record: the multihost fan-out (the
// provisioner instance elected for a multihost claim creates, grows,
// re-owns and deletes its directory on every node) and the host definer's
// backfill (it creates, or adopts, the multihost directories of the nodes
// it defines) are the only writes one node makes on another. Giving the
// permission pools/multihostvolumes to those callers alone would still let
// either reach every node-mode volume of every node; so the record says
// which volumes are multihost (the create request says so for a new one,
// managerapi.CreateVolumeRequest.Multihost, from the PV's hostpath.dev/mode;
// the adoption request for a directory without a record), and only those
// can be reached from another node. Records written before the mode existed
// count as node mode until the provisioner of their own node marks them at
// start (same-node authority).
//
// # Threat model
//
// docs/security.md has the threat model: who holds what, what it reaches
// through the managers, and the test of each row. In short, a
// node's root reaches every volume of its node and only the multihost
// volumes of the others; the host definer's token deletes nothing; a token
// of a deleted pod writes nothing; a token bound to no pod writes only as
// an admin.
//
// What stays open: a node's root can delete the multihost volumes of every
// node with its provisioner's token (the fan-out needs exactly that; the
// manager cannot tell the instance elected for a claim, an election with
// no API of its own), and adopt, then delete, a directory without an owner
// record on another node (made before owner records existed; the
// provisioner of its node adopts those at start).
//
// # Caches and limits
//
// TokenReviews and SubjectAccessReviews go through pkg/review: cached
// (denials included, per user and attributes) and bounded per address, per
// user and for strangers together, with the product's own callers (service
// accounts of the manager's namespace) in a lane of their own; see that
// package. A sixth cache here holds what the pod GETs found.
package auth

import (
	"context"
	"fmt"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
)

// Attributes are what a call does, checked against group hostpath.dev.
type Attributes struct {
	// Verb is the RBAC verb: get, list, create, update, resize or delete.
	Verb string
	// Resource is managerapi.ResourceHosts or managerapi.ResourcePools.
	Resource string
	// Subresource is managerapi.SubresourceVolumes for the volume routes.
	Subresource string
	// Name is the object's name: the node or the pool.
	Name string
}

// write reports whether the call changes something: verb create, update,
// resize or delete.
func (a Attributes) write() bool {
	return a.Verb == "create" || a.Verb == "update" || a.Verb == "resize" || a.Verb == "delete"
}

// volumeWrite reports whether the call changes a volume: a write of
// pools/volumes, the only kind that is node-scoped.
func (a Attributes) volumeWrite() bool {
	return a.write() && a.Resource == managerapi.ResourcePools && a.Subresource == managerapi.SubresourceVolumes
}

// resource is the resource as RBAC rules spell it, e.g. "pools/volumes".
func (a Attributes) resource() string {
	if a.Subresource == "" {
		return a.Resource
	}
	return a.Resource + "/" + a.Subresource
}

// access is the SubjectAccessReview of the attributes.
func (a Attributes) access() review.Access {
	return review.Access{Resource: &authzv1.ResourceAttributes{
		Group: managerapi.APIGroup, Resource: a.Resource, Subresource: a.Subresource, Verb: a.Verb, Name: a.Name,
	}}
}

// String renders the attributes for messages, e.g. `create pools/volumes
// in API group "hostpath.dev" (name "fast")`.
func (a Attributes) String() string {
	s := fmt.Sprintf("%s %s in API group %q", a.Verb, a.resource(), managerapi.APIGroup)
	if a.Name != "" {
		s += fmt.Sprintf(" (name %q)", a.Name)
	}
	return s
}

// Decision is an allowed call: who makes it, and how far its authority
// reaches.
type Decision struct {
	// User is the caller, as TokenReview reported it.
	User *review.User
	// Remote, for a volume write whose token is bound to a pod (or a
	// Node) on another node than this manager's, names that node: the
	// write may change only multihost volumes, which the Backend checks.
	// Empty for reads, for this node's callers and for admins.
	Remote string
}

// Authorizer decides whether caller may do attrs. It returns the
// Decision, a *review.Error when the call is refused (Forbidden also when
// the caller's authority does not reach), or another error when the
// decision could not be made (the API server is unreachable, say).
type Authorizer interface {
	Authorize(ctx context.Context, caller review.Caller, attrs Attributes) (*Decision, error)
}

// Options tune the Reviewer.
type Options struct {
	// Options are the review caches', the audience (managerapi.TokenAudience
	// when empty) and the Budget.
	review.Options
	// NodeName is the manager's node: a write whose token is bound to
	// another node's pod is held to multihost volumes (see the package
	// doc).
	NodeName string
	// PodTTL is how long what a GET found of a caller's pod is
	// remembered: that it is live, or that it is gone.
	PodTTL time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	opts := Options{Options: review.DefaultOptions(), PodTTL: 10 * time.Second}
	opts.Audience = managerapi.TokenAudience
	return opts
}

// PodGetter gets the pods of one namespace: what kube.Client's Pods
// returns, or a clientset's CoreV1().Pods(namespace).
type PodGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
}

// Pods returns the PodGetter of a namespace.
type Pods func(namespace string) PodGetter

// Reviewer is the Authorizer that asks the API server.
type Reviewer struct {
	review *review.Reviewer
	pods   Pods
	opts   Options
	// livePods is keyed "namespace/name/uid" of a caller's pod.
	livePods *cache.LRUExpireCache // -> podState
}

var _ Authorizer = &Reviewer{}

// NewReviewer returns a Reviewer that creates TokenReviews and
// SubjectAccessReviews with the given clients (the manager's service
// account needs the system:auth-delegator ClusterRole) and gets the pods
// of its callers with pods (it needs get pods in their namespaces).
func NewReviewer(tokens review.TokenReviews, sars review.SubjectAccessReviews, pods Pods, opts Options) *Reviewer {
	def := DefaultOptions()
	if opts.Audience == "" {
		opts.Audience = managerapi.TokenAudience
	}
	if opts.PodTTL <= 0 {
		opts.PodTTL = def.PodTTL
	}
	size := opts.CacheSize
	if size <= 0 {
		size = def.CacheSize
	}
	livePods := cache.NewLRUExpireCache(size)
	if opts.Clock != nil {
		livePods = cache.NewLRUExpireCacheWithClock(size, opts.Clock)
	}
	return &Reviewer{review: review.New(tokens, sars, opts.Options), pods: pods, opts: opts, livePods: livePods}
}

// Authorize implements Authorizer: TokenReview, the SubjectAccessReview of
// attrs and, for a write, the authority of what the token is bound to (see
// the package doc).
func (r *Reviewer) Authorize(ctx context.Context, caller review.Caller, attrs Attributes) (*Decision, error) {
	user, err := r.review.Authenticate(ctx, caller)
	if err != nil {
		return nil, err
	}
	if err := r.authorize(ctx, caller, user, need{attrs: attrs, role: routeRole(attrs)}); err != nil {
		return nil, err
	}
	if !attrs.write() {
		return &Decision{User: user}, nil
	}
	return r.scope(ctx, caller, user, attrs)
}

// need is a permission a call needs: its attributes, why it is needed
// (for the message; "" for the route's own permission) and the ClusterRole
// of manifests/ to suggest when it is missing.
type need struct {
	attrs Attributes
	why   string
	role  string
}

// routeRole is the ClusterRole to suggest for a route's own permission:
// the reader for reads, the admin (which has every permission) for writes.
func routeRole(attrs Attributes) string {
	if attrs.write() {
		return managerapi.AdminClusterRole
	}
	return managerapi.ReaderClusterRole
}

// authorize asks whether u has n's permission: a Forbidden *review.Error
// saying what it lacks and how to grant it when not.
func (r *Reviewer) authorize(ctx context.Context, caller review.Caller, u *review.User, n need) error {
	st, err := r.review.Review(ctx, caller, u, n.attrs.access())
	if err != nil {
		return err
	}
	if st.Allowed {
		return nil
	}
	klog.FromContext(ctx).V(3).Info("Call denied", "user", u.Name, "verb", n.attrs.Verb, "resource", n.attrs.resource(), "name", n.attrs.Name)
	return &review.Error{Reason: managerapi.ReasonForbidden, Message: n.why + denial(u, n.attrs, st, n.role)}
}

// denial says what the caller lacks and how to grant it: an RBAC rule, or
// the ClusterRole role.
func denial(u *review.User, attrs Attributes, st authzv1.SubjectAccessReviewStatus, role string) string {
	msg := fmt.Sprintf("user %q cannot %s; grant it an RBAC rule with apiGroups [%s], resources [%s], verbs [%s]",
		u.Name, attrs, managerapi.APIGroup, attrs.resource(), attrs.Verb)
	if attrs.Name != "" {
		msg += fmt.Sprintf(" (add resourceNames [%s] to grant only this one)", attrs.Name)
	}
	return msg + fmt.Sprintf(", or bind it to the ClusterRole %s, which has it", role) + review.Denial(st)
}

// AllowAll lets every call through as user "system:anonymous", with this
// node's authority. It is what --insecure-skip-auth installs; never use it
// outside a test bench.
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(context.Context, review.Caller, Attributes) (*Decision, error) {
	return &Decision{User: &review.User{Name: "system:anonymous"}}, nil
}
