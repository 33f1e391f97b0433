// Package server is the manager's HTTP layer: routes, authentication and
// authorisation, body limits, JSON in and out, metrics. The work is done by
// a Backend (the disk package's Store); every error becomes a JSON
// client.Status with a reason and its status code.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/pkg/client"
)

// Backend does the work behind the routes; disk.Store implements it. Its
// errors are matched with errors.Is against disk.ErrInvalid (400),
// disk.ErrNotFound (404), disk.ErrConflict (409) and
// disk.ErrInsufficientStorage (507); anything else is a 500.
type Backend interface {
	Host(ctx context.Context) (*client.Host, error)
	PreparePool(ctx context.Context, pool string) (*client.Pool, error)
	ListVolumes(ctx context.Context, pool string) (*client.VolumeList, error)
	GetVolume(ctx context.Context, pool, name string) (*client.Volume, error)
	CreateVolume(ctx context.Context, pool, name string, mode fs.FileMode, requiredBytes int64) (*client.Volume, bool, error)
	DeleteVolume(ctx context.Context, pool, name string) (bool, error)
}

var _ Backend = &disk.Store{}

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
	// MaxBodyBytes limits request bodies (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
}

// Server is the manager's http.Handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	metrics *metrics
}

var _ http.Handler = &Server{}

// New returns a Server with its routes and its own Prometheus registry.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil || cfg.Authorizer == nil {
		return nil, errors.New("server needs a backend and an authorizer")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: newMetrics(reg)}

	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	s.route("GET /v1/host", client.ResourceHosts, "get", func(*http.Request) string { return cfg.NodeName }, s.getHost)
	s.route("PUT /v1/pools/{pool}", client.ResourcePools, "update", pathValue("pool"), s.preparePool)
	s.route("GET /v1/pools/{pool}/volumes", client.ResourceVolumes, "list", nil, s.listVolumes)
	s.route("GET /v1/pools/{pool}/volumes/{name}", client.ResourceVolumes, "get", pathValue("name"), s.getVolume)
	s.route("PUT /v1/pools/{pool}/volumes/{name}", client.ResourceVolumes, "create", pathValue("name"), s.createVolume)
	s.route("DELETE /v1/pools/{pool}/volumes/{name}", client.ResourceVolumes, "delete", pathValue("name"), s.deleteVolume)
	return s, nil
}

func pathValue(key string) func(*http.Request) string {
	return func(r *http.Request) string { return r.PathValue(key) }
}

// handlerFunc is a /v1 handler; user is the authorised caller.
type handlerFunc func(w http.ResponseWriter, r *http.Request, user *auth.User)

// route registers an authorised /v1 route: the caller needs verb on
// resource (named by name(r), if name is set) in group hostpath.dev.
func (s *Server) route(pattern, resource, verb string, name func(*http.Request) string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		attrs := auth.Attributes{Verb: verb, Resource: resource}
		if name != nil {
			attrs.Name = name(r)
		}
		token, err := auth.BearerToken(r.Header)
		var user *auth.User
		if err == nil {
			user, err = s.cfg.Authorizer.Authorize(r.Context(), token, attrs)
		}
		if err != nil {
			var ae *auth.Error
			if errors.As(err, &ae) {
				if ae.Reason == client.ReasonUnauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="hostpath-manager"`)
				}
				writeError(w, ae.Reason, ae.Message)
				return
			}
			klog.FromContext(r.Context()).Error(err, "Cannot authorise a call", "route", pattern)
			writeError(w, client.ReasonInternal, "cannot authorise the call: "+err.Error())
			return
		}
		h(w, r, user)
	})
}

// ServeHTTP implements http.Handler: it limits the body, rejects unclean
// paths, answers unknown routes and methods with JSON, and counts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	r.Body = http.MaxBytesReader(rec, r.Body, s.cfg.MaxBodyBytes)
	route := s.serve(rec, r)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	s.metrics.observe(route, rec.code, time.Since(start))
	klog.FromContext(r.Context()).V(4).Info("Served", "method", r.Method, "path", r.URL.Path, "route", route, "code", rec.code, "duration", time.Since(start))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) string {
	// The mux would redirect "/v1/pools/p/volumes/../x" to a cleaned path;
	// an API answers such paths with 400 instead.
	if p := r.URL.Path; p == "" || p != path.Clean(p) {
		writeError(w, client.ReasonBadRequest, fmt.Sprintf("path %q is not clean: no empty, \".\" or \"..\" segments and no trailing slash", p))
		return "invalid"
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// Let the mux decide between 404 and 405 (with its Allow header),
		// then answer in JSON.
		c := &captureWriter{header: http.Header{}}
		s.mux.ServeHTTP(c, r)
		if c.code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", c.header.Get("Allow"))
			writeError(w, client.ReasonMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, c.header.Get("Allow")))
		} else {
			writeError(w, client.ReasonNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
		}
		return "unmatched"
	}
	s.mux.ServeHTTP(w, r)
	return r.Pattern
}

func (s *Server) getHost(w http.ResponseWriter, r *http.Request, _ *auth.User) {
	h, err := s.cfg.Backend.Host(r.Context())
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) preparePool(w http.ResponseWriter, r *http.Request, user *auth.User) {
	pool := r.PathValue("pool")
	p, err := s.cfg.Backend.PreparePool(r.Context(), pool)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	klog.FromContext(r.Context()).V(2).Info("Prepared pool", "pool", pool, "path", p.Path, "user", user.Name)
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request, _ *auth.User) {
	l, err := s.cfg.Backend.ListVolumes(r.Context(), r.PathValue("pool"))
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request, _ *auth.User) {
	v, err := s.cfg.Backend.GetVolume(r.Context(), r.PathValue("pool"), r.PathValue("name"))
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request, user *auth.User) {
	var req client.CreateVolumeRequest
	if err := decodeOptionalJSON(r.Body, &req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, client.ReasonRequestTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", tooLarge.Limit))
			return
		}
		writeError(w, client.ReasonBadRequest, "invalid request body: "+err.Error())
		return
	}
	mode, err := disk.ParseMode(req.Mode)
	if err != nil {
		writeError(w, client.ReasonBadRequest, err.Error())
		return
	}
	if req.RequiredBytes < 0 {
		writeError(w, client.ReasonBadRequest, "requiredBytes must not be negative")
		return
	}
	pool, name := r.PathValue("pool"), r.PathValue("name")
	v, created, err := s.cfg.Backend.CreateVolume(r.Context(), pool, name, mode, req.RequiredBytes)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		klog.FromContext(r.Context()).Info("Created volume", "pool", pool, "volume", name, "path", v.Path, "mode", v.Mode, "user", user.Name)
	}
	writeJSON(w, code, v)
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request, user *auth.User) {
	pool, name := r.PathValue("pool"), r.PathValue("name")
	deleted, err := s.cfg.Backend.DeleteVolume(r.Context(), pool, name)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	if deleted {
		klog.FromContext(r.Context()).Info("Deleted volume", "pool", pool, "volume", name, "user", user.Name)
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeOptionalJSON decodes one JSON object into v; an empty body leaves v
// alone. Unknown fields and trailing data are errors.
func decodeOptionalJSON(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// reasonOf maps a backend error to its reason.
func reasonOf(err error) client.Reason {
	switch {
	case errors.Is(err, disk.ErrInvalid):
		return client.ReasonBadRequest
	case errors.Is(err, disk.ErrNotFound):
		return client.ReasonNotFound
	case errors.Is(err, disk.ErrConflict):
		return client.ReasonConflict
	case errors.Is(err, disk.ErrInsufficientStorage):
		return client.ReasonInsufficientStorage
	default:
		return client.ReasonInternal
	}
}

func (s *Server) writeBackendError(w http.ResponseWriter, r *http.Request, err error) {
	reason := reasonOf(err)
	if reason == client.ReasonInternal {
		klog.FromContext(r.Context()).Error(err, "Request failed", "method", r.Method, "path", r.URL.Path)
	}
	writeError(w, reason, err.Error())
}

func writeError(w http.ResponseWriter, reason client.Reason, msg string) {
	writeJSON(w, reason.Status(), client.Status{Reason: reason, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // messages are read in terminals, not browsers
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		_ = enc.Encode(client.Status{Reason: client.ReasonInternal, Message: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// statusRecorder remembers the status code written.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// captureWriter swallows the mux's plain-text 404 and 405 answers.
type captureWriter struct {
	header http.Header
	code   int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return len(b), nil
}
func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
