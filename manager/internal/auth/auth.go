// Package auth decides who may call the manager's /v1 API, the way the
// kubelet guards its own API and NodeRestriction guards nodes: the caller's
// bearer token is checked with a TokenReview for the manager's own audience
// (client.TokenAudience, so a token meant for the API server is refused),
// the call is authorised with a SubjectAccessReview on the hostpath.dev API
// group (see pkg/client for the resources and verbs), and a write is then
// held to the authority of what the token is bound to.
//
// # Node-scoped authority
//
// A projected service account token is bound to its pod: TokenReview's
// status.user.extra carries the pod's name and UID and its node's name
// (client.ExtraPodName, client.ExtraPodUID, client.ExtraNodeName). Reads
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
//     say multihost (client.ReasonForbidden, naming both nodes). PUT
//     /v1/pools/{pool} is not node-scoped: it only makes the pool's
//     directory, never touches a volume, and the host definer sends it to
//     every node.
//  4. Nothing (`kubectl create token SA` without --bound-object-kind, a
//     token bound to a Secret, a legacy Secret token): an operator's
//     debugging token. It reads with the route's permission; a write also
//     needs a SubjectAccessReview of hosts/admin (same verb, name the
//     node), which only the ClusterRole client.AdminClusterRole grants,
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
// client.CreateVolumeRequest.Multihost, from the PV's hostpath.dev/mode;
// the adoption request for a directory without a record), and only those
// can be reached from another node. Records written before the mode existed
// count as node mode until the provisioner of their own node marks them at
// start (same-node authority).
//
// # Threat model
//
// Who holds what, and what it reaches through the managers (the README's
// "Security model" has the same table):
//
//	who                     holds                        reaches
//	----------------------  ---------------------------  ------------------------------------------
//	anyone on the network   nothing                      /healthz, /readyz, /metrics; /v1 is 401,
//	                                                     cheap, limited per address
//	any pod                 its own tokens               401, or 403 without a ClusterRole of
//	                                                     group hostpath.dev
//	root on node N          N's provisioner token (the   every volume of N (whose disks it owns
//	                        projected file)              anyway); of the other nodes only the
//	                                                     multihost volumes: create, grow, re-own,
//	                                                     delete, as the fan-out does; never
//	                                                     another node's node-mode volume
//	root on the host        the host definer's token     get hosts, prepare pools, list volumes on
//	definer's node                                       every node; create and adopt multihost
//	                                                     volumes off its node; delete nothing
//	whoever copied a        a token TokenReview still    reads until the token expires; no write
//	deleted pod's token     has cached                   (the pod GET refuses it within PodTTL)
//	an orphans report user  a hostpath-orphans token     get hosts, list and get volumes
//	                        (ClusterRole reader)
//	an operator             a token bound to no pod,     reads; writes on the nodes hosts/admin
//	                        ClusterRole admin            names (all with the ClusterRole)
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
// Answers are cached briefly in four bounded LRU caches: accepted tokens,
// rejected tokens, allowed calls and denied calls, each with its own
// lifetime, so a stream of junk tokens can evict only other junk, never a
// valid token or an allowed call. A fifth holds what the pod GETs found.
//
// Strangers cannot starve the manager: PerAddress bounds, per client
// address, the requests in flight (a counter that exists only while
// requests do) and the TokenReviews caused by tokens in neither cache (a
// token bucket from golang.org/x/time/rate, kept in an LRU table of bounded
// size whose entries expire once they would be full again). There is no
// global cap, so a flood from one address never refuses another address's
// freshly rotated token.
//
// Why not k8s.io/apiserver's delegating authenticator and authorizer
// (authenticatorfactory.DelegatingAuthenticatorConfig,
// authorizerfactory.DelegatingAuthorizerConfig), as the kubelet does: they
// have no per-address limits or 429, keep tokens in one unbounded expiring
// cache (accepted and rejected alike) and decisions in one shared LRU, refuse
// a token of the wrong audience without saying which token is needed, and
// cost size and memory. Measured with go1.26 and k8s.io/apiserver v0.34.4 on
// a throwaway copy of the manager whose main also builds both from a
// clientset (CGO_ENABLED=0 go build -trimpath -ldflags "-s -w", then
// stat -c %s): 38,600,866 bytes without them, 49,189,026 with (+10.6 MB,
// +27%); serving on 127.0.0.1 with a kubeconfig naming an unreachable API
// server, VmRSS in /proc/PID/status after one GET /v1/host: 28,232 to
// 29,048 kB without, 43,560 to 43,584 kB with (+15 MB, +54%). For the same
// reason the service account user name is split here, not with
// k8s.io/apiserver's serviceaccount.SplitUsername.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/client"
)

// Attributes are what a call does, checked against group hostpath.dev.
type Attributes struct {
	// Verb is the RBAC verb: get, list, create, update, resize or delete.
	Verb string
	// Resource is client.ResourceHosts or client.ResourcePools.
	Resource string
	// Subresource is client.SubresourceVolumes for the volume routes.
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
	return a.write() && a.Resource == client.ResourcePools && a.Subresource == client.SubresourceVolumes
}

// resource is the resource as RBAC rules spell it, e.g. "pools/volumes".
func (a Attributes) resource() string {
	if a.Subresource == "" {
		return a.Resource
	}
	return a.Resource + "/" + a.Subresource
}

// String renders the attributes for messages, e.g. `create pools/volumes
// in API group "hostpath.dev" (name "fast")`.
func (a Attributes) String() string {
	s := fmt.Sprintf("%s %s in API group %q", a.Verb, a.resource(), client.APIGroup)
	if a.Name != "" {
		s += fmt.Sprintf(" (name %q)", a.Name)
	}
	return s
}

// User is an authenticated caller, as TokenReview reported it.
type User struct {
	// Name is the user name, e.g. "system:serviceaccount:NS:SA".
	Name string `json:"name"`
	// UID is the user's unique ID, when TokenReview gave one.
	UID string `json:"uid,omitempty"`
	// Groups are the groups the user is in.
	Groups []string `json:"groups,omitempty"`
	// Extra is what else the authenticator said about the user.
	Extra map[string][]string `json:"extra,omitempty"`
}

// Decision is an allowed call: who makes it, and how far its authority
// reaches.
type Decision struct {
	// User is the caller, as TokenReview reported it.
	User *User
	// Remote, for a volume write whose token is bound to a pod (or a
	// Node) on another node than this manager's, names that node: the
	// write may change only multihost volumes, which the Backend checks.
	// Empty for reads, for this node's callers and for admins.
	Remote string
}

// Error is a refused call: Reason is client.ReasonUnauthorized (who the
// caller is could not be established), client.ReasonForbidden (the caller
// lacks the permission, or its authority does not reach) or
// client.ReasonTooManyRequests (the caller's address is over a limit;
// RetryAfter says when to come back). Message says which, for the caller
// to read.
type Error struct {
	Reason     client.Reason
	Message    string
	RetryAfter time.Duration
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Caller is who sends a call: its bearer token and the address it comes
// from (the connection's remote IP, never a header).
type Caller struct {
	// Token is the bearer token, "" when none was sent.
	Token string
	// Address is the client's IP address; the zero Addr when unknown.
	Address netip.Addr
}

// Authorizer decides whether caller may do attrs. It returns the
// Decision, an *Error when the call is refused, or another error when the
// decision could not be made (the API server is unreachable, say).
type Authorizer interface {
	Authorize(ctx context.Context, caller Caller, attrs Attributes) (*Decision, error)
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header, "" when there is no Authorization header, or an *Error when the
// header is not a bearer token.
func BearerToken(h http.Header) (string, error) {
	v := h.Get("Authorization")
	if v == "" {
		return "", nil
	}
	scheme, token, ok := strings.Cut(v, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", &Error{Reason: client.ReasonUnauthorized, Message: "the Authorization header is not \"Bearer <token>\""}
	}
	return token, nil
}

// Options tune the Reviewer.
type Options struct {
	// AuthenticatedTTL is how long an accepted token is remembered.
	AuthenticatedTTL time.Duration
	// UnauthenticatedTTL is how long a rejected token is remembered.
	UnauthenticatedTTL time.Duration
	// AllowedTTL is how long an allowed decision is remembered.
	AllowedTTL time.Duration
	// DeniedTTL is how long a denied decision is remembered.
	DeniedTTL time.Duration
	// CacheSize bounds each of the four caches (entries); the least
	// recently used go first.
	CacheSize int
	// Audience is the audience a token must be issued for
	// (client.TokenAudience when empty).
	Audience string
	// NodeName is the manager's node: a write whose token is bound to
	// another node's pod is held to multihost volumes (see the package
	// doc).
	NodeName string
	// PodTTL is how long what a GET found of a caller's pod is
	// remembered: that it is live, or that it is gone.
	PodTTL time.Duration
	// Limits, when set, bounds the TokenReviews each address causes.
	Limits *PerAddress
	// Clock is for tests; nil means the real clock.
	Clock cache.Clock
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		AuthenticatedTTL:   2 * time.Minute,
		UnauthenticatedTTL: 10 * time.Second,
		AllowedTTL:         1 * time.Minute,
		DeniedTTL:          10 * time.Second,
		CacheSize:          1024,
		Audience:           client.TokenAudience,
		PodTTL:             10 * time.Second,
	}
}

// TokenReviews creates TokenReviews: what kube.Client's TokenReviews
// returns, or a clientset's AuthenticationV1().TokenReviews().
type TokenReviews interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviews creates SubjectAccessReviews: what kube.Client's
// SubjectAccessReviews returns, or a clientset's
// AuthorizationV1().SubjectAccessReviews().
type SubjectAccessReviews interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
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
	tokens TokenReviews
	sars   SubjectAccessReviews
	pods   Pods
	opts   Options
	// Keys are sha256 hashes of the token, or of the user and attributes.
	accepted *cache.LRUExpireCache // -> *User
	rejected *cache.LRUExpireCache // -> *Error
	allowed  *cache.LRUExpireCache // -> struct{}
	denied   *cache.LRUExpireCache // -> *Error
	// livePods is keyed "namespace/name/uid" of a caller's pod.
	livePods *cache.LRUExpireCache // -> podState
}

var _ Authorizer = &Reviewer{}

// NewReviewer returns a Reviewer that creates TokenReviews and
// SubjectAccessReviews with the given clients (the manager's service
// account needs the system:auth-delegator ClusterRole) and gets the pods
// of its callers with pods (it needs get pods in their namespaces).
func NewReviewer(tokens TokenReviews, sars SubjectAccessReviews, pods Pods, opts Options) *Reviewer {
	def := DefaultOptions()
	if opts.CacheSize <= 0 {
		opts.CacheSize = def.CacheSize
	}
	if opts.Audience == "" {
		opts.Audience = def.Audience
	}
	if opts.PodTTL <= 0 {
		opts.PodTTL = def.PodTTL
	}
	newCache := func() *cache.LRUExpireCache {
		if opts.Clock != nil {
			return cache.NewLRUExpireCacheWithClock(opts.CacheSize, opts.Clock)
		}
		return cache.NewLRUExpireCache(opts.CacheSize)
	}
	return &Reviewer{tokens: tokens, sars: sars, pods: pods, opts: opts,
		accepted: newCache(), rejected: newCache(), allowed: newCache(), denied: newCache(), livePods: newCache()}
}

// Authorize implements Authorizer: TokenReview, the SubjectAccessReview of
// attrs and, for a write, the authority of what the token is bound to (see
// the package doc).
func (r *Reviewer) Authorize(ctx context.Context, caller Caller, attrs Attributes) (*Decision, error) {
	if caller.Token == "" {
		return nil, &Error{Reason: client.ReasonUnauthorized, Message: "no bearer token: send \"Authorization: Bearer <token>\" with " + r.tokenHint()}
	}
	user, err := r.authenticate(ctx, caller)
	if err != nil {
		return nil, err
	}
	if err := r.authorize(ctx, user, need{attrs: attrs, role: routeRole(attrs)}); err != nil {
		return nil, err
	}
	if !attrs.write() {
		return &Decision{User: user}, nil
	}
	return r.scope(ctx, user, attrs)
}

// tokenHint says which tokens the manager takes.
func (r *Reviewer) tokenHint() string {
	return fmt.Sprintf("a service account token for audience %q (for example from `kubectl create token SA --audience %s`, or a projected token with that audience)",
		r.opts.Audience, r.opts.Audience)
}

func hashKey(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (r *Reviewer) authenticate(ctx context.Context, caller Caller) (*User, error) {
	key := hashKey([]byte(caller.Token))
	if v, ok := r.accepted.Get(key); ok {
		return v.(*User), nil
	}
	if v, ok := r.rejected.Get(key); ok {
		return nil, v.(*Error)
	}
	if err := r.opts.Limits.AllowReview(caller.Address); err != nil {
		klog.FromContext(ctx).V(3).Info("Token review refused", "address", addrString(caller.Address))
		return nil, err
	}
	review, err := r.tokens.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: caller.Token, Audiences: []string{r.opts.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	if e := r.refusal(review.Status); e != nil {
		r.rejected.Add(key, e, r.opts.UnauthenticatedTTL)
		klog.FromContext(ctx).V(3).Info("Token rejected", "address", addrString(caller.Address), "reason", e.Message)
		return nil, e
	}
	u := userOf(review.Status.User)
	r.accepted.Add(key, u, r.opts.AuthenticatedTTL)
	return u, nil
}

// refusal returns why a TokenReview's status does not let the caller in,
// or nil. Authenticated is not enough: the API server must also confirm
// the manager's audience, or the token was meant for someone else.
func (r *Reviewer) refusal(st authnv1.TokenReviewStatus) *Error {
	if !st.Authenticated {
		msg := "the token was rejected by TokenReview"
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return &Error{Reason: client.ReasonUnauthorized, Message: msg + "; the manager needs " + r.tokenHint()}
	}
	if !slices.Contains(st.Audiences, r.opts.Audience) {
		return &Error{Reason: client.ReasonUnauthorized, Message: fmt.Sprintf(
			"the token of %q is valid, but TokenReview did not confirm audience %q (audiences %q); the manager needs %s",
			st.User.Username, r.opts.Audience, st.Audiences, r.tokenHint())}
	}
	return nil
}

func userOf(ui authnv1.UserInfo) *User {
	u := &User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups}
	if len(ui.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range ui.Extra {
			u.Extra[k] = v
		}
	}
	return u
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
		return client.AdminClusterRole
	}
	return client.ReaderClusterRole
}

// authorize asks a SubjectAccessReview whether u has n's permission,
// through the allowed and denied caches.
func (r *Reviewer) authorize(ctx context.Context, u *User, n need) error {
	attrs := n.attrs
	b, err := json.Marshal(struct {
		U *User
		A Attributes
	}{u, attrs})
	if err != nil {
		return fmt.Errorf("cache key: %w", err)
	}
	key := hashKey(b)
	if _, ok := r.allowed.Get(key); ok {
		return nil
	}
	if v, ok := r.denied.Get(key); ok {
		return v.(*Error)
	}
	res, err := r.sars.Create(ctx, subjectAccessReview(u, attrs), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("subject access review: %w", err)
	}
	if res.Status.Allowed {
		r.allowed.Add(key, struct{}{}, r.opts.AllowedTTL)
		return nil
	}
	e := &Error{Reason: client.ReasonForbidden, Message: n.why + denial(u, attrs, res.Status, n.role)}
	r.denied.Add(key, e, r.opts.DeniedTTL)
	klog.FromContext(ctx).V(3).Info("Call denied", "user", u.Name, "verb", attrs.Verb, "resource", attrs.resource(), "name", attrs.Name)
	return e
}

func subjectAccessReview(u *User, attrs Attributes) *authzv1.SubjectAccessReview {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   u.Name,
		UID:    u.UID,
		Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Group:       client.APIGroup,
			Resource:    attrs.Resource,
			Subresource: attrs.Subresource,
			Verb:        attrs.Verb,
			Name:        attrs.Name,
		},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	return sar
}

// denial says what the caller lacks and how to grant it: an RBAC rule, or
// the ClusterRole role.
func denial(u *User, attrs Attributes, st authzv1.SubjectAccessReviewStatus, role string) string {
	msg := fmt.Sprintf("user %q cannot %s; grant it an RBAC rule with apiGroups [%s], resources [%s], verbs [%s]",
		u.Name, attrs, client.APIGroup, attrs.resource(), attrs.Verb)
	if attrs.Name != "" {
		msg += fmt.Sprintf(" (add resourceNames [%s] to grant only this one)", attrs.Name)
	}
	msg += fmt.Sprintf(", or bind it to the ClusterRole %s, which has it", role)
	if st.Reason != "" {
		msg += "; authorizer: " + st.Reason
	}
	if st.EvaluationError != "" {
		msg += "; evaluation error: " + st.EvaluationError
	}
	return msg
}

// AllowAll lets every call through as user "system:anonymous", with this
// node's authority. It is what --insecure-skip-auth installs; never use it
// outside a test bench.
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(context.Context, Caller, Attributes) (*Decision, error) {
	return &Decision{User: &User{Name: "system:anonymous"}}, nil
}
