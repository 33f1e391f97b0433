package server

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hostpath.dev/api/managerapi"
)

// TestHealthAndAPIAreSeparate: the health handler (plain HTTP) never
// serves /v1, and the API handler serves neither probes nor metrics.
func TestHealthAndAPIAreSeparate(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, c := range []httpCall{
		{health: true, method: "GET", path: "/v1/host", token: "admin"},
		{health: true, method: "PUT", path: "/v1/pools/default", token: "admin"},
		{health: true, method: "GET", path: vol, token: "admin"},
	} {
		if w := e.do(t, c); w.Code != http.StatusNotFound {
			t.Errorf("health handler %s %s = %d, want 404", c.method, c.path, w.Code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		checkAnswer(t, e.do(t, httpCall{method: "GET", path: path}), http.StatusNotFound, managerapi.ReasonNotFound)
	}
	if got := e.backend.recorded(); len(got) != 0 {
		t.Errorf("backend calls %v", got)
	}
}

// TestReadyz: /readyz is 503 with the reason while Ready says so, 200
// once it does not; /healthz is 200 throughout.
func TestReadyz(t *testing.T) {
	var ready atomic.Bool
	srv, err := New(Config{NodeName: "node-a", Backend: &fakeBackend{}, Authorizer: &fakeAuthorizer{}, Ready: func() error {
		if !ready.Load() {
			return errors.New("no serving certificate yet")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv}
	w := e.do(t, httpCall{health: true, method: "GET", path: "/readyz"})
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "no serving certificate yet") {
		t.Errorf("/readyz before ready = %d %q", w.Code, w.Body.String())
	}
	checkAnswer(t, e.do(t, httpCall{health: true, method: "GET", path: "/healthz"}), http.StatusOK, "")
	ready.Store(true)
	checkAnswer(t, e.do(t, httpCall{health: true, method: "GET", path: "/readyz"}), http.StatusOK, "")
}

// TestHostReportsCertificate: GET /v1/host carries the certificate's
// status when the server has one.
func TestHostReportsCertificate(t *testing.T) {
	notAfter := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	srv, err := New(Config{NodeName: "node-a", Backend: &fakeBackend{}, Authorizer: &fakeAuthorizer{},
		Certificate: func() *managerapi.CertificateStatus {
			return &managerapi.CertificateStatus{NotAfter: &notAfter, Issuer: "ca", RenewalError: "denied"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv}
	w := e.do(t, httpCall{method: "GET", path: "/v1/host", token: "reader"})
	checkAnswer(t, w, http.StatusOK, "")
	var h managerapi.Host
	mustUnmarshal(t, w.Body.Bytes(), &h)
	if c := h.Certificate; c == nil || !c.NotAfter.Equal(notAfter) || c.Issuer != "ca" || c.RenewalError != "denied" {
		t.Errorf("certificate = %+v in %s", c, w.Body.String())
	}
	if !strings.Contains(w.Body.String(), `"certificate":{"notAfter":"2030-01-02T03:04:05Z","issuer":"ca","renewalError":"denied"}`) {
		t.Errorf("body %s", w.Body.String())
	}
}
