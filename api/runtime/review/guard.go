package review

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
)

// Guard returns next guarded as the kubelet guards its /metrics: the
// caller's bearer token must pass a TokenReview, and the caller must be
// allowed the request's verb (get for GET and HEAD) on its non-resource
// URL path (a SubjectAccessReview of nonResourceURLs, such as
// ClusterRole hostpath-metrics-reader grants for /metrics), both cached and
// within the Reviewer's Budget. Refusals are plain text: 401 with
// WWW-Authenticate, 403, 429 with Retry-After, and 500 when the API server
// cannot be asked. realm names the program in WWW-Authenticate.
func (r *Reviewer) Guard(realm string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		caller := Caller{Address: RemoteAddress(req)}
		leave, err := r.opts.Budget.Enter(caller.Address)
		if err == nil {
			defer leave()
			caller.Token, err = BearerToken(req.Header)
		}
		if err == nil {
			err = r.allowURL(req, caller)
		}
		if err != nil {
			writeRefusal(w, req, realm, err)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// allowURL authenticates caller and reviews its access to req's URL path.
func (r *Reviewer) allowURL(req *http.Request, caller Caller) error {
	u, err := r.Authenticate(req.Context(), caller)
	if err != nil {
		return err
	}
	verb := strings.ToLower(req.Method)
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		verb = "get"
	}
	st, err := r.Review(req.Context(), caller, u, Access{NonResource: &authzv1.NonResourceAttributes{Path: req.URL.Path, Verb: verb}})
	if err != nil {
		return err
	}
	if !st.Allowed {
		return &Error{Reason: managerapi.ReasonForbidden, Message: fmt.Sprintf(
			"user %q cannot %s path %q; grant it an RBAC rule with nonResourceURLs [%s], verbs [%s] (for /metrics, bind it to the ClusterRole %s)%s",
			u.Name, verb, req.URL.Path, req.URL.Path, verb, managerapi.MetricsReaderClusterRole, Denial(st))}
	}
	return nil
}

// writeRefusal answers err in plain text: an *Error with its status, any
// other error (the review failed) with 500.
func writeRefusal(w http.ResponseWriter, req *http.Request, realm string, err error) {
	var e *Error
	if !errors.As(err, &e) {
		klog.FromContext(req.Context()).Error(err, "Cannot authorise a call", "method", req.Method, "path", req.URL.Path)
		http.Error(w, "cannot authorise the call: "+err.Error(), http.StatusInternalServerError)
		return
	}
	code := http.StatusForbidden
	switch e.Reason {
	case managerapi.ReasonUnauthorized:
		code = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", realm))
	case managerapi.ReasonTooManyRequests:
		code = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds(e.RetryAfter)))
	}
	http.Error(w, e.Message, code)
}

// RemoteAddress is the IP address the request's connection comes from.
// Headers such as X-Forwarded-For are ignored: anyone can send them.
func RemoteAddress(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// MetricsGuard is what a program's health port needs to serve /metrics
// like the kubelet: the Guard of a Reviewer of the API server's audience,
// within a Budget of the default limits whose own callers are the service
// accounts of namespace, and that Budget's collectors for the program's
// registry. realm names the program in WWW-Authenticate.
func MetricsGuard(tokens TokenReviews, sars SubjectAccessReviews, namespace, realm string) (guard func(http.Handler) http.Handler, collectors []prometheus.Collector) {
	lo := DefaultLimitOptions()
	lo.OwnNamespace = namespace
	budget := NewBudget(lo)
	return URLGuard(tokens, sars, Options{Budget: budget}, realm), budget.Collectors()
}

// URLGuard is the Guard of a Reviewer of opts for the API server's audience
// (opts.Audience and opts.TokenHint are ignored), as a handler wrapper: for
// a program that keeps its Budget and cache lifetimes itself, as the
// manager does.
func URLGuard(tokens TokenReviews, sars SubjectAccessReviews, opts Options, realm string) func(http.Handler) http.Handler {
	opts.Audience, opts.TokenHint = "", ""
	r := New(tokens, sars, opts)
	return func(h http.Handler) http.Handler { return r.Guard(realm, h) }
}
