package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/pkg/client"
)

// fakeAuthorizer knows three tokens: "admin" may do anything, "reader" may
// only get and list, "broken" makes the decision fail.
type fakeAuthorizer struct{}

func (fakeAuthorizer) Authorize(_ context.Context, token string, a auth.Attributes) (*auth.User, error) {
	switch token {
	case "":
		return nil, &auth.Error{Reason: client.ReasonUnauthorized, Message: "no bearer token"}
	case "admin":
		return &auth.User{Name: "admin"}, nil
	case "reader":
		if a.Verb == "get" || a.Verb == "list" {
			return &auth.User{Name: "reader"}, nil
		}
		return nil, &auth.Error{Reason: client.ReasonForbidden, Message: "reader cannot " + a.String()}
	case "broken":
		return nil, errors.New("token review: connection refused")
	}
	return nil, &auth.Error{Reason: client.ReasonUnauthorized, Message: "token rejected"}
}

// failingBackend fails every call with an internal error.
type failingBackend struct{}

var errDisk = errors.New("input/output error")

func (failingBackend) Host(context.Context) (*client.Host, error) { return nil, errDisk }
func (failingBackend) PreparePool(context.Context, string) (*client.Pool, error) {
	return nil, errDisk
}
func (failingBackend) ListVolumes(context.Context, string) (*client.VolumeList, error) {
	return nil, errDisk
}
func (failingBackend) GetVolume(context.Context, string, string) (*client.Volume, error) {
	return nil, errDisk
}
func (failingBackend) CreateVolume(context.Context, string, string, fs.FileMode, int64) (*client.Volume, bool, error) {
	return nil, false, errDisk
}
func (failingBackend) DeleteVolume(context.Context, string, string) (bool, error) {
	return false, errDisk
}

type env struct {
	base, pool string
	srv        *Server
}

func newEnv(t *testing.T, backend Backend) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	base := t.TempDir()
	e := &env{base: base, pool: filepath.Join(base, "pool")}
	if err := os.WriteFile(filepath.Join(base, "boot_id"), []byte("boot-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if backend == nil {
		store, err := disk.New(ctx, disk.Config{
			NodeName: "node-a",
			Pools:    map[string]string{"default": e.pool},
			Identity: disk.IdentityConfig{StateDir: filepath.Join(base, "state"), BootIDFile: filepath.Join(base, "boot_id")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.PreparePool(ctx, "default"); err != nil {
			t.Fatal(err)
		}
		backend = store
	}
	srv, err := New(Config{NodeName: "node-a", Backend: backend, Authorizer: fakeAuthorizer{}, MaxBodyBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	return e
}

func (e *env) mkdir(t *testing.T, name string) {
	if err := os.MkdirAll(filepath.Join(e.pool, name), 0o755); err != nil {
		t.Fatal(err)
	}
}

type call struct {
	method, path, token, body string
}

func (e *env) do(t *testing.T, c call) *httptest.ResponseRecorder {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequestWithContext(ctx, c.method, "http://manager"+c.path, body)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, req)
	return w
}

func TestRoutes(t *testing.T) {
	big := `{"mode":"0777","requiredBytes":1` + strings.Repeat(" ", 2000) + `}`
	for _, tc := range []struct {
		desc       string
		backend    Backend
		setup      func(t *testing.T, e *env)
		call       call
		wantCode   int
		wantReason client.Reason
		check      func(t *testing.T, e *env, body []byte)
	}{
		// Unauthenticated endpoints.
		{desc: "healthz needs no token", call: call{method: "GET", path: "/healthz"}, wantCode: 200},
		{desc: "metrics need no token", call: call{method: "GET", path: "/metrics"}, wantCode: 200,
			check: func(t *testing.T, _ *env, body []byte) {
				if !strings.Contains(string(body), "go_goroutines") {
					t.Error("no Go metrics")
				}
			}},

		// Authentication and authorisation.
		{desc: "no token", call: call{method: "GET", path: "/v1/host"}, wantCode: 401, wantReason: client.ReasonUnauthorized},
		{desc: "rejected token", call: call{method: "GET", path: "/v1/host", token: "stolen"}, wantCode: 401, wantReason: client.ReasonUnauthorized},
		{desc: "not a bearer token", call: call{method: "GET", path: "/v1/pools/default/volumes", token: "-"}, wantCode: 401, wantReason: client.ReasonUnauthorized},
		{desc: "missing permission", call: call{method: "DELETE", path: "/v1/pools/default/volumes/v1", token: "reader"}, wantCode: 403, wantReason: client.ReasonForbidden,
			setup: func(t *testing.T, e *env) { e.mkdir(t, "v1") },
			check: func(t *testing.T, e *env, _ []byte) {
				if _, err := os.Stat(filepath.Join(e.pool, "v1")); err != nil {
					t.Errorf("forbidden delete removed the volume: %v", err)
				}
			}},
		{desc: "authorizer fails", call: call{method: "GET", path: "/v1/host", token: "broken"}, wantCode: 500, wantReason: client.ReasonInternal},

		// GET /v1/host.
		{desc: "host", call: call{method: "GET", path: "/v1/host", token: "reader"}, wantCode: 200,
			check: func(t *testing.T, e *env, body []byte) {
				var h client.Host
				mustUnmarshal(t, body, &h)
				if h.NodeName != "node-a" || h.BootID != "boot-1" || h.HostID == "" || len(h.Pools) != 1 ||
					h.Pools[0].Path != e.pool || h.Pools[0].CapacityBytes <= 0 {
					t.Errorf("host = %+v", h)
				}
			}},
		{desc: "host fails", backend: failingBackend{}, call: call{method: "GET", path: "/v1/host", token: "admin"}, wantCode: 500, wantReason: client.ReasonInternal},

		// PUT /v1/pools/{pool}.
		{desc: "prepare pool", call: call{method: "PUT", path: "/v1/pools/default", token: "admin"}, wantCode: 200,
			setup: func(t *testing.T, e *env) { os.RemoveAll(e.pool) },
			check: func(t *testing.T, e *env, body []byte) {
				var p client.Pool
				mustUnmarshal(t, body, &p)
				if fi, err := os.Stat(e.pool); err != nil || !fi.IsDir() || p.Name != "default" {
					t.Errorf("pool %+v, directory: %v", p, err)
				}
			}},
		{desc: "prepare unknown pool", call: call{method: "PUT", path: "/v1/pools/other", token: "admin"}, wantCode: 404, wantReason: client.ReasonNotFound},
		{desc: "prepare invalid pool", call: call{method: "PUT", path: "/v1/pools/Bad_Pool", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "prepare pool over a file", call: call{method: "PUT", path: "/v1/pools/default", token: "admin"}, wantCode: 409, wantReason: client.ReasonConflict,
			setup: func(t *testing.T, e *env) {
				os.RemoveAll(e.pool)
				os.WriteFile(e.pool, nil, 0o644)
			}},
		{desc: "prepare pool fails", backend: failingBackend{}, call: call{method: "PUT", path: "/v1/pools/default", token: "admin"}, wantCode: 500, wantReason: client.ReasonInternal},

		// GET /v1/pools/{pool}/volumes.
		{desc: "list", call: call{method: "GET", path: "/v1/pools/default/volumes", token: "reader"}, wantCode: 200,
			setup: func(t *testing.T, e *env) { e.mkdir(t, "b"); e.mkdir(t, "a") },
			check: func(t *testing.T, _ *env, body []byte) {
				var l client.VolumeList
				mustUnmarshal(t, body, &l)
				if len(l.Items) != 2 || l.Items[0].Name != "a" || l.Items[1].Name != "b" {
					t.Errorf("list = %+v", l)
				}
			}},
		{desc: "list empty pool is an empty array", call: call{method: "GET", path: "/v1/pools/default/volumes", token: "reader"}, wantCode: 200,
			check: func(t *testing.T, _ *env, body []byte) {
				if !strings.Contains(string(body), `"items":[]`) {
					t.Errorf("body = %s", body)
				}
			}},
		{desc: "list unknown pool", call: call{method: "GET", path: "/v1/pools/other/volumes", token: "reader"}, wantCode: 404, wantReason: client.ReasonNotFound},
		{desc: "list unprepared pool", call: call{method: "GET", path: "/v1/pools/default/volumes", token: "reader"}, wantCode: 404, wantReason: client.ReasonNotFound,
			setup: func(t *testing.T, e *env) { os.RemoveAll(e.pool) }},
		{desc: "list fails", backend: failingBackend{}, call: call{method: "GET", path: "/v1/pools/default/volumes", token: "admin"}, wantCode: 500, wantReason: client.ReasonInternal},

		// GET /v1/pools/{pool}/volumes/{name}.
		{desc: "get", call: call{method: "GET", path: "/v1/pools/default/volumes/v1", token: "reader"}, wantCode: 200,
			setup: func(t *testing.T, e *env) { e.mkdir(t, "v1") },
			check: func(t *testing.T, e *env, body []byte) {
				var v client.Volume
				mustUnmarshal(t, body, &v)
				if v.Name != "v1" || v.Pool != "default" || v.Path != filepath.Join(e.pool, "v1") {
					t.Errorf("volume = %+v", v)
				}
			}},
		{desc: "get missing", call: call{method: "GET", path: "/v1/pools/default/volumes/v1", token: "reader"}, wantCode: 404, wantReason: client.ReasonNotFound},
		{desc: "get a file", call: call{method: "GET", path: "/v1/pools/default/volumes/f", token: "reader"}, wantCode: 409, wantReason: client.ReasonConflict,
			setup: func(t *testing.T, e *env) { os.WriteFile(filepath.Join(e.pool, "f"), nil, 0o644) }},
		{desc: "get fails", backend: failingBackend{}, call: call{method: "GET", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 500, wantReason: client.ReasonInternal},

		// PUT /v1/pools/{pool}/volumes/{name}.
		{desc: "create without body", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 201,
			check: wantDir("v1", "0777")},
		{desc: "create with mode", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"mode":"0750"}`}, wantCode: 201,
			check: wantDir("v1", "0750")},
		{desc: "create existing sets the mode", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"mode":"0700","requiredBytes":1}`}, wantCode: 200,
			setup: func(t *testing.T, e *env) { e.mkdir(t, "v1") }, check: wantDir("v1", "0700")},
		{desc: "create with enough space", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"requiredBytes":1}`}, wantCode: 201,
			check: wantDir("v1", "0777")},
		{desc: "create without space", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"requiredBytes":4611686018427387904}`},
			wantCode: 507, wantReason: client.ReasonInsufficientStorage, check: wantNoEntry("v1")},
		{desc: "create bad mode", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"mode":"999"}`},
			wantCode: 400, wantReason: client.ReasonBadRequest, check: wantNoEntry("v1")},
		{desc: "create negative size", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"requiredBytes":-1}`},
			wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "create unknown field", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"path":"/etc"}`},
			wantCode: 400, wantReason: client.ReasonBadRequest, check: wantNoEntry("v1")},
		{desc: "create malformed body", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{"mode":`},
			wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "create trailing data", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: `{} {}`},
			wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "create body too large", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin", body: big},
			wantCode: 413, wantReason: client.ReasonRequestTooLarge, check: wantNoEntry("v1")},
		{desc: "create over a symlink", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 409, wantReason: client.ReasonConflict,
			setup: func(t *testing.T, e *env) { os.Symlink(e.base, filepath.Join(e.pool, "v1")) }},
		{desc: "create hidden name", call: call{method: "PUT", path: "/v1/pools/default/volumes/.v1", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest,
			check: wantNoEntry(".v1")},
		{desc: "create encoded slash", call: call{method: "PUT", path: "/v1/pools/default/volumes/..%2Fescape", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest,
			check: func(t *testing.T, e *env, _ []byte) {
				if _, err := os.Lstat(filepath.Join(e.base, "escape")); err == nil {
					t.Error("created a directory outside the pool")
				}
			}},
		{desc: "create encoded dots", call: call{method: "PUT", path: "/v1/pools/default/volumes/%2e%2e", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "create with dot-dot path", call: call{method: "PUT", path: "/v1/pools/default/volumes/../../x", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "create in unknown pool", call: call{method: "PUT", path: "/v1/pools/other/volumes/v1", token: "admin"}, wantCode: 404, wantReason: client.ReasonNotFound},
		{desc: "create fails", backend: failingBackend{}, call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 500, wantReason: client.ReasonInternal},
		{desc: "create needs create", call: call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "reader"}, wantCode: 403, wantReason: client.ReasonForbidden,
			check: wantNoEntry("v1")},

		// DELETE /v1/pools/{pool}/volumes/{name}.
		{desc: "delete", call: call{method: "DELETE", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 204,
			setup: func(t *testing.T, e *env) { e.mkdir(t, "v1/sub") }, check: wantNoEntry("v1")},
		{desc: "delete missing", call: call{method: "DELETE", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 204},
		{desc: "delete a symlink", call: call{method: "DELETE", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 409, wantReason: client.ReasonConflict,
			setup: func(t *testing.T, e *env) { os.Symlink(e.base, filepath.Join(e.pool, "v1")) }},
		{desc: "delete invalid name", call: call{method: "DELETE", path: "/v1/pools/default/volumes/a%2F..%2F..", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "delete fails", backend: failingBackend{}, call: call{method: "DELETE", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 500, wantReason: client.ReasonInternal},

		// Unknown routes and methods.
		{desc: "unknown route", call: call{method: "GET", path: "/v2/host", token: "admin"}, wantCode: 404, wantReason: client.ReasonNotFound},
		{desc: "unknown route without token", call: call{method: "GET", path: "/"}, wantCode: 404, wantReason: client.ReasonNotFound},
		{desc: "trailing slash", call: call{method: "GET", path: "/v1/host/", token: "admin"}, wantCode: 400, wantReason: client.ReasonBadRequest},
		{desc: "wrong method", call: call{method: "POST", path: "/v1/pools/default/volumes/v1", token: "admin"}, wantCode: 405, wantReason: client.ReasonMethodNotAllowed,
			check: func(t *testing.T, _ *env, body []byte) {
				if !strings.Contains(string(body), "DELETE") {
					t.Errorf("405 does not name the allowed methods: %s", body)
				}
			}},
		{desc: "wrong method on host", call: call{method: "DELETE", path: "/v1/host"}, wantCode: 405, wantReason: client.ReasonMethodNotAllowed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t, tc.backend)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			w := e.do(t, tc.call)
			body := w.Body.Bytes()
			if w.Code != tc.wantCode {
				t.Fatalf("%s %s: status %d, want %d; body %s", tc.call.method, tc.call.path, w.Code, tc.wantCode, body)
			}
			if tc.wantReason != "" {
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("error Content-Type = %q", ct)
				}
				var st client.Status
				mustUnmarshal(t, body, &st)
				if st.Reason != tc.wantReason || st.Message == "" {
					t.Errorf("status = %+v, want reason %s and a message", st, tc.wantReason)
				}
				if tc.wantReason.Status() != w.Code {
					t.Errorf("reason %s goes with %d, answered %d", st.Reason, tc.wantReason.Status(), w.Code)
				}
			}
			if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if w.Code == 405 && w.Header().Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if tc.check != nil {
				tc.check(t, e, body)
			}
		})
	}
}

func TestMetricsCountRequests(t *testing.T) {
	e := newEnv(t, nil)
	e.do(t, call{method: "PUT", path: "/v1/pools/default/volumes/v1", token: "admin"})
	e.do(t, call{method: "GET", path: "/v1/host"})
	e.do(t, call{method: "GET", path: "/nope"})
	body := e.do(t, call{method: "GET", path: "/metrics"}).Body.String()
	for _, want := range []string{
		`hostpath_manager_http_requests_total{code="201",route="PUT /v1/pools/{pool}/volumes/{name}"} 1`,
		`hostpath_manager_http_requests_total{code="401",route="GET /v1/host"} 1`,
		`hostpath_manager_http_requests_total{code="404",route="unmatched"} 1`,
		`hostpath_manager_http_request_duration_seconds_count{route="GET /v1/host"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestNewNeedsBackendAndAuthorizer(t *testing.T) {
	if _, err := New(Config{Authorizer: fakeAuthorizer{}}); err == nil {
		t.Error("New without a backend succeeded")
	}
	if _, err := New(Config{Backend: failingBackend{}}); err == nil {
		t.Error("New without an authorizer succeeded")
	}
}

func wantDir(name, mode string) func(t *testing.T, e *env, body []byte) {
	return func(t *testing.T, e *env, body []byte) {
		t.Helper()
		var v client.Volume
		mustUnmarshal(t, body, &v)
		if v.Name != name || v.Mode != mode || v.Path != filepath.Join(e.pool, name) {
			t.Errorf("volume = %+v, want %s mode %s", v, name, mode)
		}
		fi, err := os.Lstat(filepath.Join(e.pool, name))
		if err != nil || !fi.IsDir() || disk.FormatMode(fi.Mode()) != mode {
			t.Errorf("on disk: %v, %v; want a directory with mode %s", fi, err, mode)
		}
	}
}

func wantNoEntry(name string) func(t *testing.T, e *env, _ []byte) {
	return func(t *testing.T, e *env, _ []byte) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(e.pool, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists in the pool: %v", name, err)
		}
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
