// Package review answers, for a hostpath program's HTTP endpoints, the two
// questions the kubelet asks of a call to its own API: who holds the bearer
// token (a TokenReview) and may they do this (a SubjectAccessReview, of an
// API resource or of a non-resource URL such as /metrics). The manager's
// /v1 API (manager/internal/auth adds node-scoped authority on top) and the
// /metrics of all three programs (Guard) use it.
//
// # Caches
//
// Answers are cached briefly in four bounded LRU caches: accepted tokens,
// rejected tokens, allowed calls and denied calls (keyed by the user, with
// its groups and extra, and what it asked), each with its own lifetime, so a
// stream of junk tokens or denied calls can evict only other junk, never a
// valid token or an allowed call. A review that fails (the API server is
// unreachable) is not cached.
//
// # Budget: strangers cannot spend the reviews the product needs
//
// A review not served by a cache costs a call to the API server. The
// Budget decides whether a caller may cause one, before it is sent:
//
//   - Per address: requests in flight (Budget.Enter), and reviews of
//     either kind (a token bucket per client address).
//   - Lanes. The program's own callers (service accounts of its namespace,
//     Limits.OwnNamespace: the provisioner, the host definer, the orphans
//     report, the metrics scraper) are limited per address only. Everyone
//     else is a stranger: their reviews also take from a bucket per user
//     (SubjectAccessReviews; the user is known by then) and from one bucket
//     all strangers share. Past any of them the call gets 429 with
//     Retry-After at once, without waiting, so the API client's own rate
//     limit (shared by every review the program sends) always keeps room for
//     its own callers: the strangers' bucket is set well below it.
//   - Before a TokenReview the user is not known yet. The token's lane is
//     chosen by the user it claims (a service account token is a JWT whose
//     unverified "sub" claim names it). A forged claim costs one review:
//     an address whose token claimed to be an own caller and was rejected
//     is a stranger for DemoteFor, whatever it claims next. Claims from
//     many addresses cost at most the bucket all addresses share for
//     claimed own tokens (OwnTokensQPS): a TokenReview in the own lane
//     takes from it, unless its address is vouched for, having sent an own
//     caller's token that TokenReview accepted in the last VouchFor (a
//     real caller's rotated token). So forged claims cannot spend the own
//     callers' reserve, and a real caller, whose decisions are cached
//     after the first review, keeps working.
//
// Why not k8s.io/apiserver's delegating authenticator and authorizer
// (authenticatorfactory.DelegatingAuthenticatorConfig,
// authorizerfactory.DelegatingAuthorizerConfig), as the kubelet does: they
// have no per-address or per-user limits, lanes or 429, keep tokens in one
// unbounded expiring cache (accepted and rejected alike) and decisions in
// one shared LRU, refuse a token of the wrong audience without saying which
// token is needed, and cost size and memory (measured in
// docs/benchmarks.md, "Reviews without k8s.io/apiserver"). For the same
// reason the service account user name is split here, not with
// k8s.io/apiserver's serviceaccount.SplitUsername.
package review

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
)

// Caller is who sends a call: its bearer token and the address it comes
// from (the connection's remote IP, never a header).
type Caller struct {
	// Token is the bearer token, "" when none was sent.
	Token string
	// Address is the client's IP address; the zero Addr when unknown.
	Address netip.Addr
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

// Error is a refused call: Reason is managerapi.ReasonUnauthorized (who the
// caller is could not be established), managerapi.ReasonForbidden (the caller
// lacks a permission) or managerapi.ReasonTooManyRequests (the caller is over a
// limit; RetryAfter says when to come back). Message says which, for the
// caller to read.
type Error struct {
	Reason     managerapi.Reason
	Message    string
	RetryAfter time.Duration
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

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
		return "", &Error{Reason: managerapi.ReasonUnauthorized, Message: "the Authorization header is not \"Bearer <token>\""}
	}
	return token, nil
}

// TokenReviews creates TokenReviews: what the manager's kube.Client
// TokenReviews returns, or a clientset's AuthenticationV1().TokenReviews().
type TokenReviews interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviews creates SubjectAccessReviews: what the manager's
// kube.Client SubjectAccessReviews returns, or a clientset's
// AuthorizationV1().SubjectAccessReviews().
type SubjectAccessReviews interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
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
	// Audience is the audience a token must be issued for; "" means the
	// API server's own (a plain service account token, as Prometheus
	// sends).
	Audience string
	// TokenHint says, in refusals, which tokens are taken, e.g. "a
	// service account token for audience ...".
	TokenHint string
	// Budget, when set, bounds the reviews callers may cause.
	Budget *Budget
	// Clock is for tests; nil means the real clock.
	Clock cache.Clock
}

// DefaultOptions are the defaults of the manager's flags.
func DefaultOptions() Options {
	return Options{
		AuthenticatedTTL:   2 * time.Minute,
		UnauthenticatedTTL: 10 * time.Second,
		AllowedTTL:         1 * time.Minute,
		DeniedTTL:          10 * time.Second,
		CacheSize:          1024,
	}
}

// Reviewer asks the API server who holds a token and what they may do,
// through its caches and within its Budget. It is safe for concurrent use.
type Reviewer struct {
	tokens TokenReviews
	sars   SubjectAccessReviews
	opts   Options
	// Keys are sha256 hashes of the token, or of the user and what it
	// asked.
	accepted *cache.LRUExpireCache // -> *User
	rejected *cache.LRUExpireCache // -> *Error
	allowed  *cache.LRUExpireCache // -> struct{}
	denied   *cache.LRUExpireCache // -> authzv1.SubjectAccessReviewStatus
}

// New returns a Reviewer that creates TokenReviews and
// SubjectAccessReviews with the given clients (the program's service
// account needs the system:auth-delegator ClusterRole). Zero lifetimes and
// cache size take DefaultOptions'.
func New(tokens TokenReviews, sars SubjectAccessReviews, opts Options) *Reviewer {
	def := DefaultOptions()
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.AuthenticatedTTL, def.AuthenticatedTTL}, {&opts.UnauthenticatedTTL, def.UnauthenticatedTTL},
		{&opts.AllowedTTL, def.AllowedTTL}, {&opts.DeniedTTL, def.DeniedTTL},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = def.CacheSize
	}
	if opts.TokenHint == "" {
		opts.TokenHint = TokenHint(opts.Audience)
	}
	newCache := func() *cache.LRUExpireCache {
		if opts.Clock != nil {
			return cache.NewLRUExpireCacheWithClock(opts.CacheSize, opts.Clock)
		}
		return cache.NewLRUExpireCache(opts.CacheSize)
	}
	return &Reviewer{tokens: tokens, sars: sars, opts: opts,
		accepted: newCache(), rejected: newCache(), allowed: newCache(), denied: newCache()}
}

// TokenHint says which tokens a Reviewer of audience takes ("" is the API
// server's own), for refusals.
func TokenHint(audience string) string {
	if audience == "" {
		return "a service account token (for example from `kubectl create token SA`, or a Secret of type kubernetes.io/service-account-token)"
	}
	return fmt.Sprintf("a service account token for audience %q (for example from `kubectl create token SA --audience %s`, or a projected token with that audience)",
		audience, audience)
}

func hashKey(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Authenticate returns who holds caller's token: from the caches, or a
// TokenReview the Budget allows. It returns an *Error when the token is
// missing or rejected or the caller is over a limit, another error when
// the review fails.
func (r *Reviewer) Authenticate(ctx context.Context, caller Caller) (*User, error) {
	if caller.Token == "" {
		return nil, &Error{Reason: managerapi.ReasonUnauthorized, Message: "no bearer token: send \"Authorization: Bearer <token>\" with " + r.opts.TokenHint}
	}
	key := hashKey([]byte(caller.Token))
	if v, ok := r.accepted.Get(key); ok {
		return v.(*User), nil
	}
	if v, ok := r.rejected.Get(key); ok {
		return nil, v.(*Error)
	}
	claimed := claimedUser(caller.Token)
	lane, err := r.opts.Budget.admit(KindToken, caller.Address, claimed)
	if err != nil {
		klog.FromContext(ctx).V(3).Info("Token review refused", "address", addrString(caller.Address), "claimedUser", claimed, "reason", err.Message)
		return nil, err
	}
	spec := authnv1.TokenReviewSpec{Token: caller.Token}
	if r.opts.Audience != "" {
		spec.Audiences = []string{r.opts.Audience}
	}
	review, cerr := r.tokens.Create(ctx, &authnv1.TokenReview{Spec: spec}, metav1.CreateOptions{})
	if cerr != nil {
		return nil, fmt.Errorf("token review: %w", cerr)
	}
	if e := r.refusal(review.Status); e != nil {
		r.rejected.Add(key, e, r.opts.UnauthenticatedTTL)
		r.opts.Budget.rejected(caller.Address, lane)
		klog.FromContext(ctx).V(3).Info("Token rejected", "address", addrString(caller.Address), "reason", e.Message)
		return nil, e
	}
	u := userOf(review.Status.User)
	r.accepted.Add(key, u, r.opts.AuthenticatedTTL)
	r.opts.Budget.accepted(caller.Address, lane, u.Name)
	return u, nil
}

// refusal returns why a TokenReview's status does not let the caller in,
// or nil. Authenticated is not enough: with an Audience, the API server
// must also confirm it, or the token was meant for someone else.
func (r *Reviewer) refusal(st authnv1.TokenReviewStatus) *Error {
	if !st.Authenticated {
		msg := "the token was rejected by TokenReview"
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return &Error{Reason: managerapi.ReasonUnauthorized, Message: msg + "; send " + r.opts.TokenHint}
	}
	if r.opts.Audience != "" && !slices.Contains(st.Audiences, r.opts.Audience) {
		return &Error{Reason: managerapi.ReasonUnauthorized, Message: fmt.Sprintf(
			"the token of %q is valid, but TokenReview did not confirm audience %q (audiences %q); send %s",
			st.User.Username, r.opts.Audience, st.Audiences, r.opts.TokenHint)}
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

// Access is what a SubjectAccessReview asks: an API resource or a
// non-resource URL, exactly one of the two.
type Access struct {
	Resource    *authzv1.ResourceAttributes    `json:"resource,omitempty"`
	NonResource *authzv1.NonResourceAttributes `json:"nonResource,omitempty"`
}

// Review returns whether u, calling from caller's address, may do a: the
// status of a SubjectAccessReview (Allowed, and the authorizer's Reason and
// EvaluationError when denied), from the caches or a review the Budget
// allows. It returns an *Error when the caller is over a limit, another
// error when the review fails.
func (r *Reviewer) Review(ctx context.Context, caller Caller, u *User, a Access) (authzv1.SubjectAccessReviewStatus, error) {
	b, err := json.Marshal(struct {
		U *User
		A Access
	}{u, a})
	if err != nil {
		return authzv1.SubjectAccessReviewStatus{}, fmt.Errorf("cache key: %w", err)
	}
	key := hashKey(b)
	if _, ok := r.allowed.Get(key); ok {
		return authzv1.SubjectAccessReviewStatus{Allowed: true}, nil
	}
	if v, ok := r.denied.Get(key); ok {
		return v.(authzv1.SubjectAccessReviewStatus), nil
	}
	if _, err := r.opts.Budget.admit(KindAccess, caller.Address, u.Name); err != nil {
		klog.FromContext(ctx).V(3).Info("Access review refused", "address", addrString(caller.Address), "user", u.Name, "reason", err.Message)
		return authzv1.SubjectAccessReviewStatus{}, err
	}
	res, err := r.sars.Create(ctx, subjectAccessReview(u, a), metav1.CreateOptions{})
	if err != nil {
		return authzv1.SubjectAccessReviewStatus{}, fmt.Errorf("subject access review: %w", err)
	}
	if res.Status.Allowed {
		r.allowed.Add(key, struct{}{}, r.opts.AllowedTTL)
		return authzv1.SubjectAccessReviewStatus{Allowed: true}, nil
	}
	st := authzv1.SubjectAccessReviewStatus{Reason: res.Status.Reason, EvaluationError: res.Status.EvaluationError}
	r.denied.Add(key, st, r.opts.DeniedTTL)
	return st, nil
}

func subjectAccessReview(u *User, a Access) *authzv1.SubjectAccessReview {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:                  u.Name,
		UID:                   u.UID,
		Groups:                u.Groups,
		ResourceAttributes:    a.Resource,
		NonResourceAttributes: a.NonResource,
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	return sar
}

// Denial renders a denied review's authorizer reason and evaluation error
// for a message: "; authorizer: ...", or "".
func Denial(st authzv1.SubjectAccessReviewStatus) string {
	var msg string
	if st.Reason != "" {
		msg += "; authorizer: " + st.Reason
	}
	if st.EvaluationError != "" {
		msg += "; evaluation error: " + st.EvaluationError
	}
	return msg
}

// ServiceAccountOf splits a service account's user name,
// "system:serviceaccount:NAMESPACE:NAME".
func ServiceAccountOf(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "(unknown)"
	}
	return a.String()
}
