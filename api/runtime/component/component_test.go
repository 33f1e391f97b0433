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
	"time"

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

func TestNewServerTimeouts(t *testing.T) {
	def := DefaultTimeouts()
	for _, tc := range []struct {
		name                      string
		in                        Timeouts
		header, read, write, idle time.Duration
	}{
		{name: "zero takes the defaults", header: def.ReadHeader, read: def.Read, write: def.Write, idle: def.Idle},
		{name: "set", in: Timeouts{ReadHeader: 1, Read: 2, Write: 3, Idle: 4}, header: 1, read: 2, write: 3, idle: 4},
		{name: "no write timeout", in: Timeouts{Write: -1}, header: def.ReadHeader, read: def.Read, write: 0, idle: def.Idle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewServer(http.NotFoundHandler(), tc.in)
			if srv.ReadHeaderTimeout != tc.header || srv.ReadTimeout != tc.read || srv.WriteTimeout != tc.write || srv.IdleTimeout != tc.idle || srv.MaxHeaderBytes != MaxHeaderBytes {
				t.Errorf("server timeouts %v %v %v %v, max header %d; want %v %v %v %v, %d",
					srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, tc.header, tc.read, tc.write, tc.idle, MaxHeaderBytes)
			}
		})
	}
}

// TestHealthServerWriteTimeout: the health server has a write timeout,
// but with handlers that stream (the profiles): then only /healthz,
// /readyz and /metrics have a write deadline, and a profile may take the
// seconds it is asked for.
func TestHealthServerWriteTimeout(t *testing.T) {
	streaming := func(mux *http.ServeMux) {
		mux.HandleFunc("GET /debug/pprof/profile", func(w http.ResponseWriter, _ *http.Request) {})
	}
	for _, tc := range []struct {
		name  string
		extra []func(*http.ServeMux)
		want  time.Duration
	}{
		{name: "health and metrics only", want: DefaultTimeouts().Write},
		{name: "with profiles", extra: []func(*http.ServeMux){streaming}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := healthServer(Health{Registry: NewRegistry(), Extra: tc.extra})
			if srv.WriteTimeout != tc.want || srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.IdleTimeout == 0 {
				t.Errorf("write timeout %v (want %v), read header %v, read %v, idle %v (want all set)",
					srv.WriteTimeout, tc.want, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
			}
			paths := []string{"/healthz", "/readyz", "/metrics"}
			if tc.extra != nil {
				paths = append(paths, "/debug/pprof/profile")
			}
			for _, path := range paths {
				w := httptest.NewRecorder()
				srv.Handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				if w.Code != http.StatusOK {
					t.Errorf("GET %s = %d, want 200", path, w.Code)
				}
			}
		})
	}
}

// TestSlowClientsDisconnected: a client that sends its headers one byte at
// a time past the read header timeout, or keeps a connection idle past the
// idle timeout, is disconnected by the server, for the health server (of
// the provisioner and the host definer) and a server of NewServer (the
// manager's). The client paces its bytes by the deadline of its reads:
// nothing here sleeps, and what is asserted is that the server closed the
// connection, not how long it took.
func TestSlowClientsDisconnected(t *testing.T) {
	short := Timeouts{ReadHeader: 200 * time.Millisecond, Read: time.Minute, Idle: 200 * time.Millisecond}
	servers := map[string]func() *http.Server{
		"health server": func() *http.Server { return healthServer(Health{Registry: NewRegistry(), Timeouts: short}) },
		"NewServer": func() *http.Server {
			return NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }), short)
		},
	}
	for name, newServer := range servers {
		t.Run(name, func(t *testing.T) {
			t.Run("headers byte by byte", func(t *testing.T) {
				conn := dial(t, newServer())
				got, err := untilClosed(t, conn, "GET /healthz HTTP/1.1\r\nHost: h\r\nX-Slow: ", 'a')
				if strings.Contains(got, " 200 ") {
					t.Errorf("the server answered a request whose headers never ended: %q", got)
				}
				t.Logf("Closed by the server: %q, %v", got, err)
			})
			t.Run("idle keep-alive connection", func(t *testing.T) {
				conn := dial(t, newServer())
				if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				got, err := untilClosed(t, conn, "", 0)
				if !strings.HasPrefix(got, "HTTP/1.1 200 ") {
					t.Errorf("answer %q, want 200 before the server closed the idle connection", got)
				}
				t.Logf("Closed by the server: %v", err)
			})
		})
	}
}

// dial serves srv on a loopback port until the test ends and returns a
// connection to it.
func dial(t *testing.T, srv *http.Server) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// untilClosed writes prefix to conn one byte at a time, then fill bytes
// forever (nothing more when fill is 0), reading between two bytes for up
// to 10 ms, until the server closes the connection: a read that ends with
// an error other than its deadline, or a write that fails. It returns what
// was read and that error, and fails the test when the server keeps the
// connection open for 10 seconds.
func untilClosed(t *testing.T, conn net.Conn, prefix string, fill byte) (string, error) {
	t.Helper()
	var (
		got strings.Builder
		buf = make([]byte, 4096)
	)
	for i, end := 0, time.Now().Add(10*time.Second); time.Now().Before(end); i++ {
		b := fill
		if i < len(prefix) {
			b = prefix[i]
		}
		if b != 0 {
			if _, err := conn.Write([]byte{b}); err != nil {
				return got.String(), err
			}
		}
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			continue
		}
		if err != nil {
			return got.String(), err
		}
	}
	t.Fatalf("the server kept the connection open for 10 seconds; read %q", got.String())
	return "", nil
}
