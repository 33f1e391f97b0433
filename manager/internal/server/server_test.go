package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
)

type env struct {
	srv     *Server
	backend *fakeBackend
	authz   *fakeAuthorizer
}

func newEnv(t *testing.T, backend *fakeBackend, limits *review.Budget) *env {
	t.Helper()
	if backend == nil {
		backend = &fakeBackend{}
	}
	e := &env{backend: backend, authz: &fakeAuthorizer{}}
	srv, err := New(Config{NodeName: "node-a", Backend: backend, Authorizer: e.authz, Budget: limits, MaxBodyBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	return e
}

type httpCall struct {
	method, path, token, body string
	// remote is the client's address:port (httptest's default when empty).
	remote string
	header http.Header
	// health sends the call to the HealthHandler.
	health bool
}

func (e *env) do(t *testing.T, c httpCall) *httptest.ResponseRecorder {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequestWithContext(ctx, c.method, "http://manager"+c.path, body)
	if c.remote != "" {
		req.RemoteAddr = c.remote
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	w := httptest.NewRecorder()
	if c.health {
		e.srv.HealthHandler().ServeHTTP(w, req)
	} else {
		e.srv.ServeHTTP(w, req)
	}
	return w
}

// checkAnswer checks the status code and, for errors, the JSON Status.
func checkAnswer(t *testing.T, w *httptest.ResponseRecorder, wantCode int, wantReason managerapi.Reason) managerapi.Status {
	t.Helper()
	body := w.Body.Bytes()
	if w.Code != wantCode {
		t.Fatalf("status %d, want %d; body %s", w.Code, wantCode, body)
	}
	var st managerapi.Status
	if wantReason == "" {
		return st
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q", ct)
	}
	mustUnmarshal(t, body, &st)
	if st.Reason != wantReason || st.Message == "" {
		t.Errorf("status = %+v, want reason %s and a message", st, wantReason)
	}
	if wantReason.HTTPStatus() != w.Code {
		t.Errorf("reason %s goes with %d, answered %d", st.Reason, wantReason.HTTPStatus(), w.Code)
	}
	switch {
	case w.Code == 401 && w.Header().Get("WWW-Authenticate") == "":
		t.Error("401 without WWW-Authenticate")
	case w.Code == 405 && w.Header().Get("Allow") == "":
		t.Error("405 without Allow")
	case w.Code == 429 && w.Header().Get("Retry-After") == "":
		t.Error("429 without Retry-After")
	}
	return st
}

func onPool(verb, pool string) *auth.Attributes {
	return &auth.Attributes{Verb: verb, Resource: managerapi.ResourcePools, Subresource: managerapi.SubresourceVolumes, Name: pool}
}

const vol = "/v1/pools/fast/volumes/v1"

// routeCase is one call of TestRoutes.
type routeCase struct {
	desc       string
	call       httpCall
	wantCode   int
	wantReason managerapi.Reason
	wantAttrs  *auth.Attributes // nil: not checked
	// alsoAttrs are what the Authorizer is asked after wantAttrs.
	alsoAttrs   *auth.Attributes
	wantBackend string // the Backend call; "" for none
	check       func(t *testing.T, body []byte)
}

var routeCases = []routeCase{
	{desc: "healthz needs no token", call: httpCall{health: true, method: "GET", path: "/healthz"}, wantCode: 200},
	{desc: "readyz needs no token", call: httpCall{health: true, method: "GET", path: "/readyz"}, wantCode: 200},
	// A scrape reads no disk: the usage figures are those of the last
	// refresh (TestUsageRefresh), none here since no refresher runs.
	{desc: "metrics need no token", call: httpCall{health: true, method: "GET", path: "/metrics"}, wantCode: 200,
		check: func(t *testing.T, body []byte) {
			if !strings.Contains(string(body), "go_goroutines") {
				t.Error("no go_goroutines")
			}
			if strings.Contains(string(body), "hostpath_manager_pool_") {
				t.Errorf("pool figures before any refresh:\n%s", body)
			}
		}},
	{desc: "host", call: httpCall{method: "GET", path: "/v1/host", token: "reader"}, wantCode: 200,
		wantAttrs: &auth.Attributes{Verb: "get", Resource: "hosts", Name: "node-a"}, wantBackend: "Host"},
	{desc: "prepare pool", call: httpCall{method: "PUT", path: "/v1/pools/default", token: "admin"}, wantCode: 200,
		wantAttrs: &auth.Attributes{Verb: "update", Resource: "pools", Name: "default"}, wantBackend: "PreparePool default"},
	{desc: "list", call: httpCall{method: "GET", path: "/v1/pools/fast/volumes", token: "reader"}, wantCode: 200,
		wantAttrs: onPool("list", "fast"), wantBackend: "ListVolumes fast",
		check: func(t *testing.T, body []byte) {
			var l managerapi.VolumeList
			if mustUnmarshal(t, body, &l); len(l.Items) != 1 || l.Items[0].Owner != "pv-a" {
				t.Errorf("list = %+v", l)
			}
		}},
	{desc: "get", call: httpCall{method: "GET", path: vol, token: "reader"}, wantCode: 200,
		wantAttrs: onPool("get", "fast"), wantBackend: "GetVolume fast v1",
		check: func(t *testing.T, body []byte) {
			if !strings.Contains(string(body), `"reclaimPolicy":"Delete"`) {
				t.Errorf("body = %s, want the reclaim policy", body)
			}
		}},
	{desc: "get a volume named owner", call: httpCall{method: "GET", path: "/v1/pools/fast/volumes/owner", token: "reader"}, wantCode: 200,
		wantAttrs: onPool("get", "fast"), wantBackend: "GetVolume fast owner"},
	{desc: "create", call: httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1","mode":"0750","requiredBytes":10}`}, wantCode: 201,
		wantAttrs: onPool("create", "fast"), wantBackend: "CreateVolume fast v1 owner=pv-1 mode=0750 required=10 policy= enforce=false ns=",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); v.Owner != "pv-1" || v.Mode != "0750" || v.Name != "v1" {
				t.Errorf("volume = %+v", v)
			}
		}},
	{desc: "create with a reclaim policy", call: httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1","reclaimPolicy":"Retain"}`}, wantCode: 201,
		wantBackend: "CreateVolume fast v1 owner=pv-1 mode=0777 required=0 policy=Retain enforce=false ns=",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); v.ReclaimPolicy != managerapi.ReclaimRetain {
				t.Errorf("volume = %+v, want reclaim policy Retain", v)
			}
		}},
	{desc: "create with policy Delete", call: httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1","mode":"0700","reclaimPolicy":"Delete","requiredBytes":1}`}, wantCode: 201,
		wantBackend: "CreateVolume fast v1 owner=pv-1 mode=0700 required=1 policy=Delete enforce=false ns="},
	{desc: "create with default mode", call: httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1"}`}, wantCode: 201,
		wantBackend: "CreateVolume fast v1 owner=pv-1 mode=0777 required=0 policy= enforce=false ns="},
	{desc: "create existing", call: httpCall{method: "PUT", path: "/v1/pools/fast/volumes/existing", token: "admin", body: `{"owner":"pv-1"}`}, wantCode: 200,
		wantBackend: "CreateVolume fast existing owner=pv-1 mode=0777 required=0 policy= enforce=false ns="},
	{desc: "clone starts", call: httpCall{method: "PUT", path: vol + "/clone", token: "admin", body: `{"owner":"pv-2","requiredBytes":10,"sourcePool":"slow","sourceName":"src","sourceOwner":"pv-1"}`}, wantCode: 202,
		wantAttrs: onPool("create", "fast"), alsoAttrs: onPool("get", "slow"),
		wantBackend: "CloneVolume fast v1 owner=pv-2 mode=0777 required=10 source=slow/src sourceOwner=pv-1",
		check: func(t *testing.T, body []byte) {
			var cl managerapi.Clone
			if mustUnmarshal(t, body, &cl); cl.State != managerapi.CloneCopying || cl.Source != "slow/src" || cl.Volume != nil {
				t.Errorf("clone = %+v", cl)
			}
		}},
	{desc: "clone done", call: httpCall{method: "PUT", path: "/v1/pools/fast/volumes/done/clone", token: "admin", body: `{"owner":"pv-2","sourcePool":"fast","sourceName":"src","sourceOwner":"pv-1","multihost":true}`}, wantCode: 201,
		wantBackend: "CloneVolume fast done owner=pv-2 mode=0777 required=0 source=fast/src sourceOwner=pv-1 multihost",
		check: func(t *testing.T, body []byte) {
			var cl managerapi.Clone
			if mustUnmarshal(t, body, &cl); cl.Volume == nil || cl.Volume.Owner != "pv-2" {
				t.Errorf("clone = %+v", cl)
			}
		}},
	{desc: "clone exists", call: httpCall{method: "PUT", path: "/v1/pools/fast/volumes/existing/clone", token: "admin", body: `{"owner":"pv-2","sourcePool":"fast","sourceName":"src","sourceOwner":"pv-1"}`}, wantCode: 200,
		wantBackend: "CloneVolume fast existing owner=pv-2 mode=0777 required=0 source=fast/src sourceOwner=pv-1"},
	{desc: "clone without a source", call: httpCall{method: "PUT", path: vol + "/clone", token: "admin", body: `{"owner":"pv-2"}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "clone into itself", call: httpCall{method: "PUT", path: vol + "/clone", token: "admin", body: `{"owner":"pv-2","sourcePool":"fast","sourceName":"v1","sourceOwner":"pv-1"}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "clone of a bad source name", call: httpCall{method: "PUT", path: vol + "/clone", token: "admin", body: `{"owner":"pv-2","sourcePool":"fast","sourceName":"../etc","sourceOwner":"pv-1"}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "clone with an unknown field", call: httpCall{method: "PUT", path: vol + "/clone", token: "admin", body: `{"owner":"pv-2","sourcePool":"fast","sourceName":"a","sourceOwner":"pv-1","sourcePath":"/"}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "clone needs create", call: httpCall{method: "PUT", path: vol + "/clone", token: "reader", body: `{"owner":"pv-2","sourcePool":"fast","sourceName":"a","sourceOwner":"pv-1"}`}, wantCode: 403, wantReason: managerapi.ReasonForbidden},
	{desc: "hand over", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-2","previous":"pv-1"}`}, wantCode: 200,
		wantAttrs: onPool("update", "fast"), wantBackend: "SetOwner fast v1 owner=pv-2 previous=pv-1 retained=false policy= ns="},
	{desc: "adopt", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-1","previous":""}`}, wantCode: 200,
		wantBackend: "SetOwner fast v1 owner=pv-1 previous= retained=false policy= ns="},
	{desc: "mark retained", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-1","previous":"pv-1","retained":true}`}, wantCode: 200,
		wantBackend: "SetOwner fast v1 owner=pv-1 previous=pv-1 retained=true policy= ns=",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); !v.Retained {
				t.Errorf("volume = %+v", v)
			}
		}},
	{desc: "set owner with a reclaim policy", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-1","previous":"pv-1","retained":true,"reclaimPolicy":"Retain"}`}, wantCode: 200,
		wantAttrs: onPool("update", "fast"), wantBackend: "SetOwner fast v1 owner=pv-1 previous=pv-1 retained=true policy=Retain ns=",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); !v.Retained || v.ReclaimPolicy != managerapi.ReclaimRetain {
				t.Errorf("volume = %+v, want retained with reclaim policy Retain", v)
			}
		}},
	{desc: "hand over with the new owner's reclaim policy", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-2","previous":"pv-1","reclaimPolicy":"Delete"}`}, wantCode: 200,
		wantBackend: "SetOwner fast v1 owner=pv-2 previous=pv-1 retained=false policy=Delete ns="},
	{desc: "create with a claim namespace", call: httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1","reclaimPolicy":"Retain","claimNamespace":"team-a"}`}, wantCode: 201,
		wantBackend: "CreateVolume fast v1 owner=pv-1 mode=0777 required=0 policy=Retain enforce=false ns=team-a",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); v.ClaimNamespace != "team-a" {
				t.Errorf("volume = %+v, want claim namespace team-a", v)
			}
		}},
	{desc: "hand over to another namespace", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-1","previous":"pv-1","retained":true,"claimNamespace":"team-b"}`}, wantCode: 200,
		wantAttrs: onPool("update", "fast"), wantBackend: "SetOwner fast v1 owner=pv-1 previous=pv-1 retained=true policy= ns=team-b",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); !v.Retained || v.ClaimNamespace != "team-b" {
				t.Errorf("volume = %+v, want retained with claim namespace team-b", v)
			}
		}},
	{desc: "hand over to a new owner with its claim namespace", call: httpCall{method: "PUT", path: vol + "/owner", token: "admin", body: `{"owner":"pv-2","previous":"pv-1","reclaimPolicy":"Delete","claimNamespace":"team-a"}`}, wantCode: 200,
		wantBackend: "SetOwner fast v1 owner=pv-2 previous=pv-1 retained=false policy=Delete ns=team-a"},
	{desc: "create with enforceSize", call: httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1","requiredBytes":1048576,"enforceSize":true}`}, wantCode: 201,
		wantBackend: "CreateVolume fast v1 owner=pv-1 mode=0777 required=1048576 policy= enforce=true ns="},
	{desc: "grow", call: httpCall{method: "PUT", path: vol + "/size", token: "admin", body: `{"owner":"pv-1","sizeBytes":2048}`}, wantCode: 200,
		wantAttrs: onPool("resize", "fast"), wantBackend: "SetSize fast v1 owner=pv-1 size=2048",
		check: func(t *testing.T, body []byte) {
			var v managerapi.Volume
			if mustUnmarshal(t, body, &v); v.SizeBytes != 2048 {
				t.Errorf("volume = %+v, want size 2048", v)
			}
		}},
	{desc: "grow to zero", call: httpCall{method: "PUT", path: vol + "/size", token: "admin", body: `{"owner":"pv-1","sizeBytes":0}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "grow without owner", call: httpCall{method: "PUT", path: vol + "/size", token: "admin", body: `{"sizeBytes":10}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "grow with an unknown field", call: httpCall{method: "PUT", path: vol + "/size", token: "admin", body: `{"owner":"pv-1","sizeBytes":10,"limit":1}`}, wantCode: 400, wantReason: managerapi.ReasonBadRequest},
	{desc: "grow without permission", call: httpCall{method: "PUT", path: vol + "/size", token: "reader", body: `{"owner":"pv-1","sizeBytes":10}`}, wantCode: 403, wantReason: managerapi.ReasonForbidden},
	{desc: "delete", call: httpCall{method: "DELETE", path: vol + "?owner=pv-1", token: "admin"}, wantCode: 204,
		wantAttrs: onPool("delete", "fast"), wantBackend: "DeleteVolume fast v1 owner=pv-1 ifEmpty=false"},
	{desc: "delete if empty", call: httpCall{method: "DELETE", path: vol + "?ifEmpty=true&owner=pv-1", token: "admin"}, wantCode: 204,
		wantBackend: "DeleteVolume fast v1 owner=pv-1 ifEmpty=true"},

	// Refusals.
	{desc: "no token", call: httpCall{method: "GET", path: "/v1/host"}, wantCode: 401, wantReason: managerapi.ReasonUnauthorized},
	{desc: "rejected token", call: httpCall{method: "GET", path: "/v1/host", token: "stolen"}, wantCode: 401, wantReason: managerapi.ReasonUnauthorized},
	{desc: "not a bearer token", call: httpCall{method: "GET", path: "/v1/host", header: http.Header{"Authorization": {"Basic eDp5"}}},
		wantCode: 401, wantReason: managerapi.ReasonUnauthorized},
	{desc: "missing permission", call: httpCall{method: "DELETE", path: vol + "?owner=pv-1", token: "reader"}, wantCode: 403, wantReason: managerapi.ReasonForbidden},
	{desc: "create needs create", call: httpCall{method: "PUT", path: vol, token: "reader", body: `{"owner":"pv-1"}`}, wantCode: 403, wantReason: managerapi.ReasonForbidden},
	{desc: "authorizer over a limit", call: httpCall{method: "GET", path: "/v1/host", token: "busy"}, wantCode: 429, wantReason: managerapi.ReasonTooManyRequests},
	{desc: "authorizer fails", call: httpCall{method: "GET", path: "/v1/host", token: "broken"}, wantCode: 500, wantReason: managerapi.ReasonInternal},
}

// TestRoutes: each route reaches the Backend with the request's values and
// asks the Authorizer for its attributes (volume calls on the pool).
func TestRoutes(t *testing.T) {
	for _, tc := range routeCases {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			w := e.do(t, tc.call)
			checkAnswer(t, w, tc.wantCode, tc.wantReason)
			if tc.wantAttrs != nil {
				want := []auth.Attributes{*tc.wantAttrs}
				if tc.alsoAttrs != nil {
					want = append(want, *tc.alsoAttrs)
				}
				if got := e.authz.calls(); !reflect.DeepEqual(got, want) {
					t.Errorf("authorizer asked %+v, want %+v", got, want)
				}
			}
			if got := strings.Join(e.backend.recorded(), "; "); got != tc.wantBackend {
				t.Errorf("backend calls %q, want %q", got, tc.wantBackend)
			}
			if tc.check != nil {
				tc.check(t, w.Body.Bytes())
			}
		})
	}
}

// TestBadInputCostsNoReview: malformed paths, names, queries and bodies
// are answered before the Authorizer is asked (so before any TokenReview)
// and never reach the Backend.
func TestBadInputCostsNoReview(t *testing.T) {
	big := `{"owner":"pv-1","requiredBytes":1` + strings.Repeat(" ", 2000) + `}`
	for _, tc := range []struct {
		desc       string
		call       httpCall
		wantCode   int
		wantReason managerapi.Reason
		wantInMsg  string
	}{
		// Routes and paths.
		{"unknown route", httpCall{method: "GET", path: "/v2/host"}, 404, managerapi.ReasonNotFound, "no route"},
		{"unknown route under /v1", httpCall{method: "GET", path: "/v1/pools/fast/volumes/v1/data"}, 404, managerapi.ReasonNotFound, ""},
		{"trailing slash", httpCall{method: "GET", path: "/v1/host/"}, 400, managerapi.ReasonBadRequest, "not clean"},
		{"dot-dot path", httpCall{method: "PUT", path: "/v1/pools/fast/volumes/../../x"}, 400, managerapi.ReasonBadRequest, "not clean"},
		{"wrong method", httpCall{method: "POST", path: vol}, 405, managerapi.ReasonMethodNotAllowed, "DELETE"},
		{"wrong method on owner", httpCall{method: "GET", path: vol + "/owner"}, 405, managerapi.ReasonMethodNotAllowed, "PUT"},
		{"wrong method on host", httpCall{method: "DELETE", path: "/v1/host"}, 405, managerapi.ReasonMethodNotAllowed, "GET"},

		// Names.
		{"invalid pool", httpCall{method: "PUT", path: "/v1/pools/Bad_Pool"}, 400, managerapi.ReasonBadRequest, "DNS label"},
		{"invalid pool of a volume", httpCall{method: "GET", path: "/v1/pools/Bad_Pool/volumes"}, 400, managerapi.ReasonBadRequest, "DNS label"},
		{"hidden name", httpCall{method: "GET", path: "/v1/pools/fast/volumes/.v1"}, 400, managerapi.ReasonBadRequest, "volume name"},
		{"encoded slash", httpCall{method: "PUT", path: "/v1/pools/fast/volumes/a%2Fb", body: `{"owner":"pv-1"}`}, 400, managerapi.ReasonBadRequest, "volume name"},
		{"encoded dot-dot", httpCall{method: "PUT", path: "/v1/pools/fast/volumes/..%2Fescape", body: `{"owner":"pv-1"}`}, 400, managerapi.ReasonBadRequest, "not clean"},
		{"encoded dots", httpCall{method: "DELETE", path: "/v1/pools/fast/volumes/%2e%2e?owner=pv-1"}, 400, managerapi.ReasonBadRequest, "not clean"},
		{"encoded NUL", httpCall{method: "GET", path: "/v1/pools/fast/volumes/v%00"}, 400, managerapi.ReasonBadRequest, "volume name"},

		// Queries.
		{"query on a route without one", httpCall{method: "GET", path: vol + "?limit=1"}, 400, managerapi.ReasonBadRequest, "no query parameters"},
		{"list with unknown parameter", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=1&watch=true"}, 400, managerapi.ReasonBadRequest, `"watch"`},
		{"list with limit twice", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=1&limit=2"}, 400, managerapi.ReasonBadRequest, "2 times"},
		{"list with limit 0", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=0"}, 400, managerapi.ReasonBadRequest, "from 1 to 500"},
		{"list with negative limit", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=-1"}, 400, managerapi.ReasonBadRequest, "limit"},
		{"list with limit over the maximum", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=501"}, 400, managerapi.ReasonBadRequest, "from 1 to 500"},
		{"list with limit not a number", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=ten"}, 400, managerapi.ReasonBadRequest, "limit"},
		{"list with limit with a sign", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=%2B10"}, 400, managerapi.ReasonBadRequest, "limit"},
		{"list with limit with leading zeros", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit=010"}, 400, managerapi.ReasonBadRequest, "limit"},
		{"list with empty limit", httpCall{method: "GET", path: "/v1/pools/fast/volumes?limit="}, 400, managerapi.ReasonBadRequest, "limit"},
		{"list with empty continue", httpCall{method: "GET", path: "/v1/pools/fast/volumes?continue="}, 400, managerapi.ReasonBadRequest, "continue"},
		{"list with continue not a name", httpCall{method: "GET", path: "/v1/pools/fast/volumes?continue=..%2Fetc"}, 400, managerapi.ReasonBadRequest, "continue"},
		{"list with continue twice", httpCall{method: "GET", path: "/v1/pools/fast/volumes?continue=a&continue=b"}, 400, managerapi.ReasonBadRequest, "2 times"},
		{"delete without owner", httpCall{method: "DELETE", path: vol}, 400, managerapi.ReasonBadRequest, "owner"},
		{"delete with invalid owner", httpCall{method: "DELETE", path: vol + "?owner=PV_1"}, 400, managerapi.ReasonBadRequest, "owner"},
		{"delete with unknown parameter", httpCall{method: "DELETE", path: vol + "?owner=pv-1&force=true"}, 400, managerapi.ReasonBadRequest, `"force"`},
		{"delete with owner twice", httpCall{method: "DELETE", path: vol + "?owner=pv-1&owner=pv-2"}, 400, managerapi.ReasonBadRequest, "2 times"},
		{"delete with bad ifEmpty", httpCall{method: "DELETE", path: vol + "?owner=pv-1&ifEmpty=yes"}, 400, managerapi.ReasonBadRequest, "ifEmpty"},
		{"malformed query", httpCall{method: "DELETE", path: vol + "?owner=%zz"}, 400, managerapi.ReasonBadRequest, "query"},

		// Bodies.
		{"create without body", httpCall{method: "PUT", path: vol}, 400, managerapi.ReasonBadRequest, "empty"},
		{"create without owner", httpCall{method: "PUT", path: vol, body: `{"mode":"0750"}`}, 400, managerapi.ReasonBadRequest, "owner"},
		{"create with invalid owner", httpCall{method: "PUT", path: vol, body: `{"owner":"../pv"}`}, 400, managerapi.ReasonBadRequest, "owner"},
		{"create bad mode", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","mode":"999"}`}, 400, managerapi.ReasonBadRequest, "mode"},
		{"create negative size", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","requiredBytes":-1}`}, 400, managerapi.ReasonBadRequest, "negative"},
		{"create unknown field", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","path":"/etc"}`}, 400, managerapi.ReasonBadRequest, `"path"`},
		{"create bad reclaim policy", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","reclaimPolicy":"Recycle"}`}, 400, managerapi.ReasonBadRequest, "reclaimPolicy"},
		{"create reclaim policy in lower case", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","reclaimPolicy":"delete"}`}, 400, managerapi.ReasonBadRequest, "reclaimPolicy"},
		{"create bad claim name", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","claimNamespace":"ns","claimName":"Data_1"}`}, 400, managerapi.ReasonBadRequest, "claimName"},
		{"create claim name longer than a name", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","claimNamespace":"ns","claimName":"` + strings.Repeat("c", 254) + `"}`}, 400, managerapi.ReasonBadRequest, "claimName"},
		{"create reclaim policy key in other case", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","ReclaimPolicy":"Delete"}`}, 400, managerapi.ReasonBadRequest, "case-sensitive"},
		{"create key in other case", httpCall{method: "PUT", path: vol, body: `{"Owner":"pv-1"}`}, 400, managerapi.ReasonBadRequest, "case-sensitive"},
		{"create key in upper case", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","MODE":"0700"}`}, 400, managerapi.ReasonBadRequest, "case-sensitive"},
		{"create duplicate key", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","owner":"pv-2"}`}, 400, managerapi.ReasonBadRequest, "twice"},
		{"create trailing object", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1"} {}`}, 400, managerapi.ReasonBadRequest, "after"},
		{"create trailing brace", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1"}}`}, 400, managerapi.ReasonBadRequest, "after"},
		{"create malformed", httpCall{method: "PUT", path: vol, body: `{"owner":`}, 400, managerapi.ReasonBadRequest, "invalid request body"},
		{"create not an object", httpCall{method: "PUT", path: vol, body: `null`}, 400, managerapi.ReasonBadRequest, "not a JSON object"},
		{"create wrong type", httpCall{method: "PUT", path: vol, body: `{"owner":["pv-1"]}`}, 400, managerapi.ReasonBadRequest, "owner"},
		{"create body too large", httpCall{method: "PUT", path: vol, body: big}, 413, managerapi.ReasonRequestTooLarge, "1024"},
		{"set owner without owner", httpCall{method: "PUT", path: vol + "/owner", body: `{"previous":"pv-1"}`}, 400, managerapi.ReasonBadRequest, "owner"},
		{"set owner bad previous", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","previous":"PV 1"}`}, 400, managerapi.ReasonBadRequest, "previous"},
		{"set owner unknown field", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","force":true}`}, 400, managerapi.ReasonBadRequest, `"force"`},
		{"set owner duplicate key", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","retained":false,"retained":true}`}, 400, managerapi.ReasonBadRequest, "twice"},
		{"create bad claim namespace", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","claimNamespace":"Team_A"}`}, 400, managerapi.ReasonBadRequest, "claimNamespace"},
		{"create claim namespace too long", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","claimNamespace":"` + strings.Repeat("n", 64) + `"}`}, 400, managerapi.ReasonBadRequest, "claimNamespace"},
		{"create claim namespace not a string", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","claimNamespace":["team-a"]}`}, 400, managerapi.ReasonBadRequest, "claimNamespace"},
		{"create claim namespace key in other case", httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1","claimnamespace":"team-a"}`}, 400, managerapi.ReasonBadRequest, "case-sensitive"},
		{"set owner bad claim namespace", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","previous":"pv-1","claimNamespace":"../team-a"}`}, 400, managerapi.ReasonBadRequest, "claimNamespace"},
		{"set owner claim namespace not a string", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","previous":"pv-1","claimNamespace":1}`}, 400, managerapi.ReasonBadRequest, "claimNamespace"},
		{"set owner bad reclaim policy", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","previous":"pv-1","reclaimPolicy":"Recycle"}`}, 400, managerapi.ReasonBadRequest, "reclaimPolicy"},
		{"set owner reclaim policy in lower case", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","reclaimPolicy":"retain"}`}, 400, managerapi.ReasonBadRequest, "reclaimPolicy"},
		{"set owner reclaim policy not a string", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","reclaimPolicy":true}`}, 400, managerapi.ReasonBadRequest, "reclaimPolicy"},
		{"set owner bad claim name", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","claimNamespace":"ns","claimName":"Data_1"}`}, 400, managerapi.ReasonBadRequest, `claimName "Data_1" is not a PersistentVolumeClaim name`},
		{"set owner claim name longer than a name", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","claimNamespace":"ns","claimName":"` + strings.Repeat("c", 254) + `"}`}, 400, managerapi.ReasonBadRequest, "claimName"},
		{"set owner claim name not a string", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","claimNamespace":"ns","claimName":["data"]}`}, 400, managerapi.ReasonBadRequest, "claimName"},
		{"set owner claim name key in other case", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","claimname":"data"}`}, 400, managerapi.ReasonBadRequest, "case-sensitive"},
		{"set owner duplicate claim name", httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-1","claimName":"a","claimName":"b"}`}, 400, managerapi.ReasonBadRequest, "twice"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			tc.call.token = "admin"
			st := checkAnswer(t, e.do(t, tc.call), tc.wantCode, tc.wantReason)
			if !strings.Contains(st.Message, tc.wantInMsg) {
				t.Errorf("message %q does not contain %q", st.Message, tc.wantInMsg)
			}
			if got := e.authz.calls(); len(got) != 0 {
				t.Errorf("the authorizer was asked %+v for bad input", got)
			}
			if got := e.backend.recorded(); len(got) != 0 {
				t.Errorf("bad input reached the backend: %q", got)
			}
		})
	}
}

// TestBackendErrors: a *managerapi.Error, even wrapped, is answered with its
// Status, the owner included; any other error is a 500.
func TestBackendErrors(t *testing.T) {
	ownerConflict := managerapi.Errorf(managerapi.ReasonOwnerConflict, "volume v1 belongs to PersistentVolume pv-other")
	ownerConflict.Owner = "pv-other"
	for _, tc := range []struct {
		desc       string
		err        error
		call       httpCall
		wantReason managerapi.Reason
		wantOwner  string
	}{
		{"owner conflict on create", ownerConflict, httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1"}`}, managerapi.ReasonOwnerConflict, "pv-other"},
		{"owner conflict on hand-over", ownerConflict, httpCall{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-2","previous":"pv-1"}`}, managerapi.ReasonOwnerConflict, "pv-other"},
		{"wrapped owner conflict on delete", fmt.Errorf("delete: %w", ownerConflict), httpCall{method: "DELETE", path: vol + "?owner=pv-1"}, managerapi.ReasonOwnerConflict, "pv-other"},
		{"not empty", managerapi.Errorf(managerapi.ReasonNotEmpty, "volume v1 holds 3 entries"), httpCall{method: "DELETE", path: vol + "?owner=pv-1&ifEmpty=true"}, managerapi.ReasonNotEmpty, ""},
		{"not a directory", managerapi.Errorf(managerapi.ReasonConflict, "v1 is a symlink"), httpCall{method: "GET", path: vol}, managerapi.ReasonConflict, ""},
		{"unknown pool", managerapi.Errorf(managerapi.ReasonPoolNotFound, "no pool fast"), httpCall{method: "GET", path: "/v1/pools/fast/volumes"}, managerapi.ReasonPoolNotFound, ""},
		{"unknown pool on delete", fmt.Errorf("delete: %w", managerapi.Errorf(managerapi.ReasonPoolNotFound, "no pool fast")), httpCall{method: "DELETE", path: vol + "?owner=pv-1"}, managerapi.ReasonPoolNotFound, ""},
		{"missing volume", managerapi.Errorf(managerapi.ReasonNotFound, "no volume v1"), httpCall{method: "GET", path: vol}, managerapi.ReasonNotFound, ""},
		{"no space", managerapi.Errorf(managerapi.ReasonInsufficientStorage, "1 byte free"), httpCall{method: "PUT", path: vol, body: `{"owner":"pv-1"}`}, managerapi.ReasonInsufficientStorage, ""},
		{"backend's own validation", managerapi.Errorf(managerapi.ReasonBadRequest, "bad"), httpCall{method: "PUT", path: "/v1/pools/fast"}, managerapi.ReasonBadRequest, ""},
		{"other error", errors.New("input/output error"), httpCall{method: "GET", path: "/v1/host"}, managerapi.ReasonInternal, ""},
		{"client error without reason", &managerapi.Error{}, httpCall{method: "GET", path: "/v1/host"}, managerapi.ReasonInternal, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t, &fakeBackend{err: tc.err}, nil)
			tc.call.token = "admin"
			st := checkAnswer(t, e.do(t, tc.call), tc.wantReason.HTTPStatus(), tc.wantReason)
			if st.Owner != tc.wantOwner {
				t.Errorf("owner = %q, want %q", st.Owner, tc.wantOwner)
			}
		})
	}
}

// TestInFlightLimitPerAddress: an address at its limit gets 429 with
// Retry-After, whatever X-Forwarded-For says; other addresses, /healthz
// and /metrics are served.
func TestInFlightLimitPerAddress(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, &fakeBackend{entered: entered, release: release}, review.NewBudget(review.LimitOptions{MaxInFlight: 1}))
	const busy = "192.0.2.1:1000"
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		done <- e.do(t, httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1"}`, remote: busy})
	}()
	<-entered // the first request holds the address's only slot

	for _, tc := range []struct {
		desc       string
		call       httpCall
		wantCode   int
		wantReason managerapi.Reason
	}{
		{"same address", httpCall{method: "GET", path: vol, token: "admin", remote: "192.0.2.1:2000"}, 429, managerapi.ReasonTooManyRequests},
		{"same address, forged X-Forwarded-For", httpCall{method: "GET", path: vol, token: "admin", remote: "192.0.2.1:2001",
			header: http.Header{"X-Forwarded-For": {"198.51.100.7"}, "X-Real-Ip": {"198.51.100.7"}}}, 429, managerapi.ReasonTooManyRequests},
		{"same address over IPv4-mapped IPv6", httpCall{method: "GET", path: vol, token: "admin", remote: "[::ffff:192.0.2.1]:2002"}, 429, managerapi.ReasonTooManyRequests},
		{"other address", httpCall{method: "GET", path: vol, token: "admin", remote: "192.0.2.2:1000"}, 200, ""},
		{"healthz is not limited", httpCall{health: true, method: "GET", path: "/healthz", remote: "192.0.2.1:2003"}, 200, ""},
		{"metrics are not limited", httpCall{health: true, method: "GET", path: "/metrics", remote: "192.0.2.1:2004"}, 200, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			w := e.do(t, tc.call)
			checkAnswer(t, w, tc.wantCode, tc.wantReason)
			if tc.wantCode == 429 && w.Header().Get("Retry-After") != "1" {
				t.Errorf("Retry-After = %q, want 1", w.Header().Get("Retry-After"))
			}
		})
	}
	close(release)
	checkAnswer(t, <-done, 201, "")
	checkAnswer(t, e.do(t, httpCall{method: "GET", path: vol, token: "admin", remote: busy}), 200, "")
}

func TestRetryAfterOfAuthorizer(t *testing.T) {
	e := newEnv(t, nil, nil)
	w := e.do(t, httpCall{method: "GET", path: "/v1/host", token: "busy"})
	checkAnswer(t, w, 429, managerapi.ReasonTooManyRequests)
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 1.5s rounded up to 2", got)
	}
}

func TestMetricsCountRequests(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.do(t, httpCall{method: "PUT", path: vol, token: "admin", body: `{"owner":"pv-1"}`})
	e.do(t, httpCall{method: "GET", path: "/v1/host"})
	e.do(t, httpCall{method: "GET", path: "/nope"})
	e.do(t, httpCall{method: "POST", path: "/v1/host"})
	e.do(t, httpCall{method: "GET", path: "/v1/pools/fast/../x"})
	e.do(t, httpCall{health: true, method: "GET", path: "/healthz"})
	body := e.do(t, httpCall{health: true, method: "GET", path: "/metrics"}).Body.String()
	for _, want := range []string{
		`hostpath_manager_http_requests_total{code="201",route="PUT /v1/pools/{pool}/volumes/{name}"} 1`,
		`hostpath_manager_http_requests_total{code="401",route="GET /v1/host"} 1`,
		`hostpath_manager_http_requests_total{code="404",route="unmatched"} 1`,
		`hostpath_manager_http_requests_total{code="405",route="unmatched"} 1`,
		`hostpath_manager_http_requests_total{code="400",route="invalid"} 1`,
		`hostpath_manager_http_requests_total{code="200",route="GET /healthz"} 1`,
		`hostpath_manager_http_request_duration_seconds_count{route="GET /v1/host"} 1`,
		`hostpath_manager_http_request_duration_seconds_count{route="unmatched"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestNewNeedsBackendAndAuthorizer(t *testing.T) {
	if _, err := New(Config{Authorizer: &fakeAuthorizer{}}); err == nil {
		t.Error("New without a backend succeeded")
	}
	if _, err := New(Config{Backend: &fakeBackend{}}); err == nil {
		t.Error("New without an authorizer succeeded")
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// TestLogsServedRequests: each request is logged at level 4 with its route
// and the status code promhttp's writer recorded.
func TestLogsServedRequests(t *testing.T) {
	e := newEnv(t, nil, nil)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
	ctx := klog.NewContext(context.Background(), logger)
	for _, tc := range []struct {
		method, path, want string
	}{
		{"GET", "/v1/host", `Served method="GET" path="/v1/host" route="GET /v1/host" code=401`},
		{"POST", "/v1/host", `Served method="POST" path="/v1/host" route="unmatched" code=405`},
		{"GET", "/healthz", `Served method="GET" path="/healthz" route="GET /healthz" code=200`},
	} {
		h := http.Handler(e.srv)
		if tc.path == "/healthz" {
			h = e.srv.HealthHandler()
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, tc.method, "http://manager"+tc.path, nil))
		if log := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); !strings.Contains(log, tc.want) {
			t.Errorf("log lacks %s:\n%s", tc.want, log)
		}
	}
}
