// Package auth decides who may call the manager's /v1 API, the way the
// kubelet guards its own API: the caller's bearer token is checked with a
// TokenReview and the call is authorised with a SubjectAccessReview on the
// hostpath.dev API group (see pkg/client for the resources and verbs).
// Both answers are cached briefly, with separate lifetimes for yes and no,
// in caches of bounded size.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/client"
)

// Attributes are what a call does, checked against group hostpath.dev.
type Attributes struct {
	// Verb is the RBAC verb: get, list, create, update or delete.
	Verb string
	// Resource is one of client.ResourceHosts, ResourcePools, ResourceVolumes.
	Resource string
	// Name is the object's name (node, pool or volume); empty for list.
	Name string
}

// String renders the attributes for messages, e.g. `create volumes in API
// group "hostpath.dev" (name "v1")`.
func (a Attributes) String() string {
	s := fmt.Sprintf("%s %s in API group %q", a.Verb, a.Resource, client.APIGroup)
	if a.Name != "" {
		s += fmt.Sprintf(" (name %q)", a.Name)
	}
	return s
}

// User is an authenticated caller, as TokenReview reported it.
type User struct {
	Name   string              `json:"name"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
}

// Error is a refused call: Reason is client.ReasonUnauthorized (who the
// caller is could not be established) or client.ReasonForbidden (the caller
// lacks the permission). Message says which, for the caller to read.
type Error struct {
	Reason  client.Reason
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Authorizer decides whether the holder of token may do attrs. It returns
// the caller, an *Error when the call is refused, or another error when the
// decision could not be made (the API server is unreachable, say).
type Authorizer interface {
	Authorize(ctx context.Context, token string, attrs Attributes) (*User, error)
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

// Options tune the Reviewer's caches.
type Options struct {
	// AuthenticatedTTL is how long an accepted token is remembered.
	AuthenticatedTTL time.Duration
	// UnauthenticatedTTL is how long a rejected token is remembered.
	UnauthenticatedTTL time.Duration
	// AllowedTTL is how long an allowed decision is remembered.
	AllowedTTL time.Duration
	// DeniedTTL is how long a denied decision is remembered.
	DeniedTTL time.Duration
	// CacheSize bounds each cache (entries); the least recently used go first.
	CacheSize int
	// Audiences, when set, are the audiences the token must be valid for;
	// empty means the API server's own.
	Audiences []string
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
	}
}

// Reviewer is the Authorizer that asks the API server.
type Reviewer struct {
	tokens authnclient.TokenReviewInterface
	sars   authzclient.SubjectAccessReviewInterface
	opts   Options
	users  *cache.LRUExpireCache // sha256(token) -> tokenResult
	grants *cache.LRUExpireCache // sha256(user, attrs) -> error (nil: allowed)
}

var _ Authorizer = &Reviewer{}

type tokenResult struct {
	user *User
	err  *Error
}

// NewReviewer returns a Reviewer that creates TokenReviews and
// SubjectAccessReviews with the given clients (the manager's service
// account needs the system:auth-delegator ClusterRole).
func NewReviewer(tokens authnclient.TokenReviewInterface, sars authzclient.SubjectAccessReviewInterface, opts Options) *Reviewer {
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultOptions().CacheSize
	}
	newCache := func() *cache.LRUExpireCache {
		if opts.Clock != nil {
			return cache.NewLRUExpireCacheWithClock(opts.CacheSize, opts.Clock)
		}
		return cache.NewLRUExpireCache(opts.CacheSize)
	}
	return &Reviewer{tokens: tokens, sars: sars, opts: opts, users: newCache(), grants: newCache()}
}

// Authorize implements Authorizer.
func (r *Reviewer) Authorize(ctx context.Context, token string, attrs Attributes) (*User, error) {
	if token == "" {
		return nil, &Error{Reason: client.ReasonUnauthorized, Message: "no bearer token: send \"Authorization: Bearer <token>\" with a service account token (for example from kubectl create token)"}
	}
	user, err := r.authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := r.authorize(ctx, user, attrs); err != nil {
		return user, err
	}
	return user, nil
}

func (r *Reviewer) authenticate(ctx context.Context, token string) (*User, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := r.users.Get(key); ok {
		res := v.(tokenResult)
		if res.err != nil {
			return nil, res.err
		}
		return res.user, nil
	}
	review, err := r.tokens.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: r.opts.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	st := review.Status
	if !st.Authenticated {
		msg := "the token was rejected by TokenReview"
		if st.Error != "" {
			msg += ": " + st.Error
		}
		e := &Error{Reason: client.ReasonUnauthorized, Message: msg}
		r.users.Add(key, tokenResult{err: e}, r.opts.UnauthenticatedTTL)
		klog.FromContext(ctx).V(3).Info("Token rejected", "reason", st.Error)
		return nil, e
	}
	u := &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	if len(st.User.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range st.User.Extra {
			u.Extra[k] = v
		}
	}
	r.users.Add(key, tokenResult{user: u}, r.opts.AuthenticatedTTL)
	return u, nil
}

func (r *Reviewer) authorize(ctx context.Context, u *User, attrs Attributes) error {
	b, err := json.Marshal(struct {
		U *User
		A Attributes
	}{u, attrs})
	if err != nil {
		return fmt.Errorf("cache key: %w", err)
	}
	sum := sha256.Sum256(b)
	key := hex.EncodeToString(sum[:])
	if v, ok := r.grants.Get(key); ok {
		if v == nil {
			return nil
		}
		return v.(*Error)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   u.Name,
		UID:    u.UID,
		Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Group:    client.APIGroup,
			Resource: attrs.Resource,
			Verb:     attrs.Verb,
			Name:     attrs.Name,
		},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	res, err := r.sars.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("subject access review: %w", err)
	}
	if res.Status.Allowed {
		r.grants.Add(key, nil, r.opts.AllowedTTL)
		return nil
	}
	msg := fmt.Sprintf("user %q cannot %s; grant it an RBAC rule with apiGroups [%s], resources [%s], verbs [%s] (the ClusterRole %s has them all)",
		u.Name, attrs, client.APIGroup, attrs.Resource, attrs.Verb, client.ClientClusterRole)
	if res.Status.Reason != "" {
		msg += "; authorizer: " + res.Status.Reason
	}
	if res.Status.EvaluationError != "" {
		msg += "; evaluation error: " + res.Status.EvaluationError
	}
	e := &Error{Reason: client.ReasonForbidden, Message: msg}
	r.grants.Add(key, e, r.opts.DeniedTTL)
	klog.FromContext(ctx).V(3).Info("Call denied", "user", u.Name, "verb", attrs.Verb, "resource", attrs.Resource, "name", attrs.Name)
	return e
}

// AllowAll lets every call through as user "system:anonymous". It is what
// --insecure-skip-auth installs; never use it outside a test bench.
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(context.Context, string, Attributes) (*User, error) {
	return &User{Name: "system:anonymous"}, nil
}
