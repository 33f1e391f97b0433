// Package server is the manager's HTTP layer: routes, request checks,
// authentication and authorisation, per-address limits, body limits, JSON
// in and out, metrics. The work is done by a Backend (the disk package's
// Store); every error becomes a JSON managerapi.Status with a reason and its
// status code.
//
// Two handlers: the Server itself serves /v1 (the app serves it over HTTPS
// once the manager holds its certificate), and HealthHandler serves
// /healthz, /readyz and /metrics, for probes and Prometheus, on a plain
// HTTP port that never serves /v1.
//
// A /v1 request goes through these steps, cheapest first, so that a
// stranger's bad input costs no API server call: the route and a clean
// path (404, 405, 400); pool and volume names and query parameters (400);
// a slot among its address's requests in flight (429); the body, strict
// JSON (413, 400); TokenReview and SubjectAccessReview (401, 403, 429),
// and for a write the authority of what the token is bound to (403; see
// the auth package); then the Backend, which holds a caller bound to
// another node to multihost volumes (403), and to what the API server says
// of their PersistentVolumes and claims (409; see disk.Owners).
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
)

// Backend does the work behind the routes; disk.Store implements it. Its
// refusals are *managerapi.Error values (managerapi.Errorf), answered with their
// Status (reason, message, owner); any other error is a 500.
//
// The volume writes take remote: the node of a caller whose token is bound
// to another node than this manager's (auth.Decision.Remote), "" for this
// node's callers and admins. A remote caller may change only multihost
// volumes; the Backend checks it, under the volume's lock, against the
// owner record it acts on, and refuses anything else with
// managerapi.ReasonForbidden naming both nodes. It also asks the API server
// (409 managerapi.ReasonConflict when the answer refuses): a remote delete
// needs the owner PV gone, being deleted, Released or Failed with reclaim
// policy Delete; a remote create needs req.ClaimName to name a claim that
// is the owner's; a remote owner change never re-owns nor changes the
// claim namespace (403).
type Backend interface {
	// Host describes the node and its pools.
	Host(ctx context.Context) (*managerapi.Host, error)
	// PreparePool creates the pool's directory if missing.
	PreparePool(ctx context.Context, pool string) (*managerapi.Pool, error)
	// ListVolumes lists a pool's volume directories: all of them, or
	// with opts (at most one) the page it asks for (see
	// managerapi.ListOptions; Limit 0 is no limit).
	ListVolumes(ctx context.Context, pool string, opts ...managerapi.ListOptions) (*managerapi.VolumeList, error)
	// GetVolume describes one volume directory.
	GetVolume(ctx context.Context, pool, name string) (*managerapi.Volume, error)
	// CreateVolume makes the directory for owner, or checks that an
	// existing one belongs to owner; it reports whether it made it.
	CreateVolume(ctx context.Context, pool, name string, req managerapi.CreateVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Volume, bool, error)
	// CloneVolume makes the volume as a copy of req's source, in the
	// background: it answers the copy's progress until the volume exists,
	// then the volume; it reports whether this call is the first to see
	// the copy done.
	CloneVolume(ctx context.Context, pool, name string, req managerapi.CloneVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Clone, bool, error)
	// SetSize grows the volume of owner to sizeBytes.
	SetSize(ctx context.Context, pool, name, owner string, sizeBytes int64, remote string) (*managerapi.Volume, error)
	// SetOwner replaces the owner record if it names req.Previous, with
	// req.Owner, req.Retained and, when set, req.ReclaimPolicy and
	// req.Multihost.
	SetOwner(ctx context.Context, pool, name string, req managerapi.SetOwnerRequest, remote string) (*managerapi.Volume, error)
	// DeleteVolume removes the directory if it belongs to owner (and, with
	// ifEmpty, holds nothing); it reports whether there was one. A missing
	// pool or pool directory is a managerapi.ReasonPoolNotFound error, never
	// "nothing to remove".
	DeleteVolume(ctx context.Context, pool, name, owner string, ifEmpty bool, remote string) (bool, error)
}

// DefaultMaxBodyBytes is the default limit of a request body.
const DefaultMaxBodyBytes = 64 << 10

// Config is what a Server needs.
type Config struct {
	// NodeName is the name SubjectAccessReviews for GET /v1/host carry.
	NodeName string
	// Backend does the work.
	Backend Backend
	// Authorizer checks every /v1 call.
	Authorizer auth.Authorizer
	// Budget bounds the /v1 requests each client address has in flight
	// (the Authorizer's reviews take from it too); nil means no limit.
	Budget *review.Budget
	// MetricsGuard, when set, guards GET /metrics (review.Reviewer.Guard);
	// nil serves it to anyone (tests, and --insecure-skip-auth).
	MetricsGuard func(http.Handler) http.Handler
	// MaxBodyBytes limits request bodies (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
	// Ready says why /v1 cannot be served yet (no serving certificate),
	// nil when it can; /readyz answers 503 with that reason. Nil means
	// always ready.
	Ready func() error
	// Certificate describes the serving certificate for GET /v1/host;
	// nil for none (the field is then left out).
	Certificate func() *managerapi.CertificateStatus
	// UsageInterval is how often the pool and volume figures /metrics
	// exports are read from the Backend (DefaultUsageInterval when 0), by
	// RunUsageRefresher.
	UsageInterval time.Duration
}

// Server is the manager's http.Handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	health  *http.ServeMux
	metrics *metrics
	// usage exports the pool and volume figures that RunUsageRefresher
	// reads.
	usage *usageCollector
	// invalid and unmatched answer the requests no route serves.
	invalid, unmatched http.Handler
}

var _ http.Handler = &Server{}

// New returns a Server with its /v1 routes, and its health handler with
// its own Prometheus registry (see HealthHandler).
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil || cfg.Authorizer == nil {
		return nil, errors.New("server needs a backend and an authorizer")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.UsageInterval <= 0 {
		cfg.UsageInterval = DefaultUsageInterval
	}
	m := newMetrics()
	s := &Server{cfg: cfg, mux: http.NewServeMux(), health: http.NewServeMux(), metrics: m, usage: newUsageCollector(cfg.Backend)}
	s.invalid = m.instrument(routeInvalid, http.HandlerFunc(refuseUncleanPath))
	s.unmatched = m.instrument(routeUnmatched, http.HandlerFunc(s.refuseUnmatched))

	s.health.Handle("GET /healthz", m.instrument("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})))
	s.health.Handle("GET /readyz", m.instrument("GET /readyz", http.HandlerFunc(s.readyz)))
	collectors := append(m.collectors(), s.usage)
	if cfg.Budget != nil {
		collectors = append(collectors, cfg.Budget.Collectors()...)
	}
	metricsHandler := component.Guarded(cfg.MetricsGuard, promhttp.HandlerFor(component.NewRegistry(collectors...), promhttp.HandlerOpts{}))
	s.health.Handle("GET /metrics", m.instrument("GET /metrics", metricsHandler))

	hostAttributes := func(*call) auth.Attributes {
		return auth.Attributes{Verb: "get", Resource: managerapi.ResourceHosts, Name: cfg.NodeName}
	}
	poolAttributes := func(c *call) auth.Attributes {
		return auth.Attributes{Verb: "update", Resource: managerapi.ResourcePools, Name: c.pool}
	}
	// A clone reads its source: "get" on the source's pool, checked
	// after "create" on the target's.
	sourceAttributes := func(c *call) auth.Attributes {
		return auth.Attributes{Verb: "get", Resource: managerapi.ResourcePools, Subresource: managerapi.SubresourceVolumes, Name: c.clone.SourcePool}
	}
	s.route("GET /v1/host", parser{}, s.getHost, hostAttributes)
	s.route("PUT /v1/pools/{pool}", parser{}, s.preparePool, poolAttributes)
	s.route("GET /v1/pools/{pool}/volumes", parser{query: parseList}, s.listVolumes, volumeAttributes("list"))
	s.route("GET /v1/pools/{pool}/volumes/{name}", parser{}, s.getVolume, volumeAttributes("get"))
	s.route("PUT /v1/pools/{pool}/volumes/{name}", parser{body: parseCreate}, s.createVolume, volumeAttributes("create"))
	s.route("PUT /v1/pools/{pool}/volumes/{name}/clone", parser{body: parseClone}, s.cloneVolume, volumeAttributes("create"), sourceAttributes)
	s.route("PUT /v1/pools/{pool}/volumes/{name}/owner", parser{body: parseSetOwner}, s.setOwner, volumeAttributes("update"))
	s.route("PUT /v1/pools/{pool}/volumes/{name}/size", parser{body: parseSetSize}, s.setSize, volumeAttributes("resize"))
	s.route("DELETE /v1/pools/{pool}/volumes/{name}", parser{query: parseDelete}, s.deleteVolume, volumeAttributes("delete"))
	return s, nil
}

// HealthHandler serves, without authentication, GET /healthz (always ok),
// GET /readyz (ok when Config.Ready says so, else 503 with the reason) and
// GET /metrics (hostpath_manager_http_* of both handlers, Go and process
// metrics); anything else is 404, /v1 included.
func (s *Server) HealthHandler() http.Handler { return s.health }

// readyz answers 200 when /v1 can be served, else 503 with the reason.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}

// volumeAttributes returns the attributes of the volume routes: verb on
// the pool's volumes subresource, so that RBAC can grant one pool by
// resourceNames.
func volumeAttributes(verb string) func(*call) auth.Attributes {
	return func(c *call) auth.Attributes {
		return auth.Attributes{Verb: verb, Resource: managerapi.ResourcePools, Subresource: managerapi.SubresourceVolumes, Name: c.pool}
	}
}

// handlerFunc serves a checked, authorised /v1 call.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call)

// handle registers h for pattern, counted and timed under the pattern.
func (s *Server) handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.metrics.instrument(pattern, h))
}

// route registers a /v1 route: p checks the request, attrs name what the
// caller needs in group hostpath.dev (all of them; the first one's
// Decision says who the caller is), h does the work.
func (s *Server) route(pattern string, p parser, h handlerFunc, attrs ...func(*call) auth.Attributes) {
	s.handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := p.check(r)
		if err != nil {
			writeError(w, managerapi.ReasonBadRequest, err.Error())
			return
		}
		addr := review.RemoteAddress(r)
		leave, err := s.cfg.Budget.Enter(addr)
		if err != nil {
			s.writeRefusal(w, r, err)
			return
		}
		defer leave()
		if err := p.readBody(r, c); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeError(w, managerapi.ReasonRequestTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", tooLarge.Limit))
				return
			}
			writeError(w, managerapi.ReasonBadRequest, err.Error())
			return
		}
		d, err := s.authorize(r, addr, c, attrs)
		if err != nil {
			s.writeRefusal(w, r, err)
			return
		}
		c.user, c.remote = &review.User{}, ""
		if d != nil && d.User != nil {
			c.user, c.remote = d.User, d.Remote
		}
		h(w, r, c)
	}))
}

// authorize checks the caller's bearer token against every one of attrs
// and returns the first one's Decision.
func (s *Server) authorize(r *http.Request, addr netip.Addr, c *call, attrs []func(*call) auth.Attributes) (*auth.Decision, error) {
	token, err := review.BearerToken(r.Header)
	if err != nil {
		return nil, err
	}
	var first *auth.Decision
	for i, a := range attrs {
		d, err := s.cfg.Authorizer.Authorize(r.Context(), review.Caller{Token: token, Address: addr}, a(c))
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = d
		}
	}
	return first, nil
}

// ServeHTTP implements http.Handler: it limits the body, refuses unclean
// paths and answers unknown routes and methods with JSON. Every request is
// counted and timed under its route (see metrics).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	// The mux would redirect "/v1/pools/p/volumes/../x" to a cleaned path;
	// an API answers such paths with 400 instead.
	if p := r.URL.Path; p == "" || p != path.Clean(p) {
		s.invalid.ServeHTTP(w, r)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.unmatched.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// refuseUncleanPath answers a path with empty, "." or ".." segments or a
// trailing slash.
func refuseUncleanPath(w http.ResponseWriter, r *http.Request) {
	writeError(w, managerapi.ReasonBadRequest, fmt.Sprintf("path %q is not clean: no empty, \".\" or \"..\" segments and no trailing slash", r.URL.Path))
}

// refuseUnmatched answers a request that matches no route: it lets the mux
// decide between 404 and 405 (with its Allow header), then answers in JSON.
func (s *Server) refuseUnmatched(w http.ResponseWriter, r *http.Request) {
	c := &captureWriter{header: http.Header{}}
	s.mux.ServeHTTP(c, r)
	if c.code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", c.header.Get("Allow"))
		writeError(w, managerapi.ReasonMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, c.header.Get("Allow")))
		return
	}
	writeError(w, managerapi.ReasonNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
}

// writeRefusal answers an error of the limits or the Authorizer.
func (s *Server) writeRefusal(w http.ResponseWriter, r *http.Request, err error) {
	var ae *review.Error
	if !errors.As(err, &ae) {
		klog.FromContext(r.Context()).Error(err, "Cannot authorise a call", "method", r.Method, "path", r.URL.Path)
		writeError(w, managerapi.ReasonInternal, "cannot authorise the call: "+err.Error())
		return
	}
	switch ae.Reason {
	case managerapi.ReasonUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="hostpath-manager"`)
	case managerapi.ReasonTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(review.RetryAfterSeconds(ae.RetryAfter)))
	}
	writeError(w, ae.Reason, ae.Message)
}

// writeBackendError answers a Backend error: a *managerapi.Error with its
// Status, anything else with 500.
func (s *Server) writeBackendError(w http.ResponseWriter, r *http.Request, err error) {
	st := managerapi.Status{Reason: managerapi.ReasonInternal, Message: err.Error()}
	var ce *managerapi.Error
	if errors.As(err, &ce) && ce.Reason != "" {
		st = ce.Status
	}
	if st.Reason == managerapi.ReasonInternal {
		klog.FromContext(r.Context()).Error(err, "Request failed", "method", r.Method, "path", r.URL.Path)
	}
	writeJSON(w, st.Reason.HTTPStatus(), st)
}

func writeError(w http.ResponseWriter, reason managerapi.Reason, msg string) {
	writeJSON(w, reason.HTTPStatus(), managerapi.Status{Reason: reason, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // messages are read in terminals, not browsers
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		_ = enc.Encode(managerapi.Status{Reason: managerapi.ReasonInternal, Message: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// captureWriter swallows the mux's plain-text 404 and 405 answers.
type captureWriter struct {
	header http.Header
	code   int
}

// Header returns the captured header.
func (c *captureWriter) Header() http.Header { return c.header }

// Write discards b, as if written with 200 unless a code was written.
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return len(b), nil
}

// WriteHeader captures the first code written.
func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
