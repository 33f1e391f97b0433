package component

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestPodServing(t *testing.T) {
	now := metav1.Now()
	ready := []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	for _, tc := range []struct {
		name string
		pod  v1.Pod
		want bool
	}{
		{"ready", v1.Pod{Spec: v1.PodSpec{NodeName: "n"}, Status: v1.PodStatus{Conditions: ready}}, true},
		{"not scheduled", v1.Pod{Status: v1.PodStatus{Conditions: ready}}, false},
		{"terminating", v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: v1.PodSpec{NodeName: "n"}, Status: v1.PodStatus{Conditions: ready}}, false},
		{"not ready", v1.Pod{Spec: v1.PodSpec{NodeName: "n"}, Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}}}, false},
		{"no condition", v1.Pod{Spec: v1.PodSpec{NodeName: "n"}}, false},
	} {
		if got := PodServing(&tc.pod); got != tc.want {
			t.Errorf("%s: PodServing = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHealthHandlers(t *testing.T) {
	var ready atomic.Bool
	mux := http.NewServeMux()
	HealthHandlers(mux, NewRegistry(), &ready, nil)
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code, w.Body.String()
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before ready = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready = %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d %.80q", code, body)
	}
}

// TestServeHealthGuard: the guard stands before /metrics and the extra
// handlers, never before the probes.
func TestServeHealthGuard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	refuse := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusUnauthorized) })
	}
	extra := func(mux *http.ServeMux) {
		mux.HandleFunc("GET /debug/x", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) })
	}
	if err := ServeHealth(ctx, Health{Address: addr, Registry: NewRegistry(), Guard: refuse, Extra: []func(*http.ServeMux){extra}}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 401, "/debug/x": 401} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestRESTConfig(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	data := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://198.18.0.1:6443}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(kc, 7, 9, "agent")
	if err != nil || cfg.Host != "https://198.18.0.1:6443" || cfg.QPS != 7 || cfg.Burst != 9 || cfg.UserAgent != "agent" {
		t.Fatalf("RESTConfig = %+v, %v", cfg, err)
	}
	if _, err := RESTConfig(filepath.Join(t.TempDir(), "missing"), 1, 1, "a"); err == nil {
		t.Error("RESTConfig with a missing kubeconfig succeeded")
	}
}

// TestRESTConfigAsksNoCompression: the clients of RESTConfig do not send
// Accept-Encoding: gzip, so the API server sends their lists and watches
// uncompressed. Over TLS, as to an API server: client-go gives a plain-HTTP
// config Go's default transport, which always asks for gzip.
func TestRESTConfigAsksNoCompression(t *testing.T) {
	encodings := make(chan []string, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encodings <- r.Header.Values("Accept-Encoding")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	data := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: " + srv.URL + ", insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(kc, 7, 9, "agent")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(srv.URL + "/api/v1/persistentvolumes?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := <-encodings; len(got) != 0 {
		t.Errorf("the request asked for Accept-Encoding %q, want none", got)
	}
}
