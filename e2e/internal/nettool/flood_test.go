package nettool

import (
	"context"
	"encoding/pem"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// floodOpts are options for a quick flood of url.
func floodOpts(url string, requests, concurrency int) FloodOptions {
	return FloodOptions{URL: url, Requests: requests, Concurrency: concurrency, Timeout: 10 * time.Second}
}

// recorder is a handler that records the path and the Authorization header
// of each request and answers 200.
type recorder struct {
	mu    sync.Mutex
	paths map[string]int
	auths []string
}

func (rec *recorder) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.paths == nil {
		rec.paths = map[string]int{}
	}
	rec.paths[r.URL.Path]++
	rec.auths = append(rec.auths, r.Header.Get("Authorization"))
}

func TestFloodStatuses(t *testing.T) {
	// Request i goes to /r<i mod 4>: r0 is served, r1 and r2 are refused,
	// r3 gets its connection closed without an answer.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/r0":
			_, _ = w.Write([]byte("ok"))
		case "/r3":
			panic(http.ErrAbortHandler)
		default:
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// Of 10 requests, indexes 0 4 8 go to r0, 1 5 9 and 2 6 to r1 and r2, 3 7 to r3.
	answered := map[int]int{200: 3, 429: 5, 0: 2}

	for _, tc := range []struct {
		name     string
		url      string
		insecure bool
		caFile   string
		want     map[int]int
	}{
		{name: "plain", url: plain.URL, want: answered},
		{name: "TLS insecure", url: tlsSrv.URL, insecure: true, want: answered},
		{name: "TLS with CA file", url: tlsSrv.URL, caFile: caFile, want: answered},
		{name: "TLS untrusted", url: tlsSrv.URL, want: map[int]int{0: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := floodOpts(tc.url+"/r{i}", 10, 3)
			o.Cycle, o.Insecure, o.CAFile = 4, tc.insecure, tc.caFile
			res, err := Flood(context.Background(), o)
			if err != nil {
				t.Fatalf("Flood: %v", err)
			}
			if res.Requests != 10 || !maps.Equal(res.Statuses, tc.want) {
				t.Errorf("got %d requests, statuses %v; want 10, %v", res.Requests, res.Statuses, tc.want)
			}
			if !(0 < res.P50Ms && res.P50Ms <= res.P99Ms && res.P99Ms <= res.MaxMs && res.Seconds > 0) {
				t.Errorf("inconsistent timings %+v", res)
			}
		})
	}
}

func TestFloodCycle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		path     string
		cycle    int
		requests int
		want     map[string]int
	}{
		{"cycle 3", "/v1/p{i}", 3, 7, map[string]int{"/v1/p0": 3, "/v1/p1": 2, "/v1/p2": 2}},
		{"no cycle", "/v1/p{i}", 0, 4, map[string]int{"/v1/p0": 1, "/v1/p1": 1, "/v1/p2": 1, "/v1/p3": 1}},
		{"twice in URL", "/a{i}/b{i}", 2, 4, map[string]int{"/a0/b0": 2, "/a1/b1": 2}},
		{"no placeholder", "/static", 5, 3, map[string]int{"/static": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			o := floodOpts(srv.URL+tc.path, tc.requests, 2)
			o.Cycle = tc.cycle
			if _, err := Flood(context.Background(), o); err != nil {
				t.Fatalf("Flood: %v", err)
			}
			if !maps.Equal(rec.paths, tc.want) {
				t.Errorf("paths %v, want %v", rec.paths, tc.want)
			}
		})
	}
}

func TestFloodTokens(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for _, tc := range []struct {
		name       string
		tokenFile  string
		junkTokens bool
		check      func(auths []string) bool
	}{
		{"none", "", false, func(auths []string) bool {
			return all(auths, func(a string) bool { return a == "" })
		}},
		{"token file", tokenFile, false, func(auths []string) bool {
			return all(auths, func(a string) bool { return a == "Bearer s3cret" })
		}},
		{"junk tokens differ", "", true, func(auths []string) bool {
			seen := map[string]bool{}
			for _, a := range auths {
				seen[a] = true
			}
			return len(seen) == n && all(auths, func(a string) bool { return strings.HasPrefix(a, "Bearer junk-") })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			o := floodOpts(srv.URL, n, 4)
			o.TokenFile, o.JunkTokens = tc.tokenFile, tc.junkTokens
			if _, err := Flood(context.Background(), o); err != nil {
				t.Fatalf("Flood: %v", err)
			}
			if len(rec.auths) != n || !tc.check(rec.auths) {
				t.Errorf("Authorization headers %q", rec.auths)
			}
		})
	}
}

func all(ss []string, ok func(string) bool) bool {
	for _, s := range ss {
		if !ok(s) {
			return false
		}
	}
	return true
}

// pipeNet is an in-memory network for synctest bubbles: each dial hands
// the other end of a net.Pipe to Accept, so a blocked client or server is
// durably blocked and synctest.Wait knows when nothing more can happen.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// servePipes serves h on a new pipeNet until the returned stop is called.
// Call it inside the bubble.
func servePipes(h http.Handler) (dial dialFunc, stop func()) {
	pn := &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(pn)
	}()
	return pn.dial, func() {
		_ = srv.Close()
		<-served
	}
}

func (pn *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case pn.conns <- server:
		return client, nil
	case <-pn.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (pn *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-pn.conns:
		return c, nil
	case <-pn.closed:
		return nil, net.ErrClosed
	}
}

func (pn *pipeNet) Close() error {
	pn.once.Do(func() { close(pn.closed) })
	return nil
}

func (pn *pipeNet) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// floodInBubble floods the in-memory server answering with h, from inside a
// synctest bubble.
func floodInBubble(ctx context.Context, o FloodOptions, h http.Handler) (FloodResult, error) {
	dial, stop := servePipes(h)
	defer stop()
	return flood(ctx, o, dial)
}

func TestFloodConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		concurrency, requests int
	}{
		{"one at a time", 1, 5},
		{"four", 4, 13},
		{"more workers than requests", 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The server holds each request until the test lets one go.
				// Once everything is blocked, as many requests are in the
				// handler as the flood can have in flight: exactly
				// min(concurrency, requests not let go yet).
				var inHandler atomic.Int32
				release := make(chan struct{})
				dial, stop := servePipes(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
					inHandler.Add(1)
					defer inHandler.Add(-1)
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}))
				defer stop()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var res FloodResult
				var err error
				done := make(chan struct{})
				go func() {
					defer close(done)
					res, err = flood(ctx, floodOpts("http://pipe/", tc.requests, tc.concurrency), dial)
				}()
				for released := 0; released < tc.requests; released++ {
					synctest.Wait()
					if got, want := int(inHandler.Load()), min(tc.concurrency, tc.requests-released); got != want {
						t.Errorf("%d in flight after %d answers, want %d", got, released, want)
						cancel()
						break
					}
					release <- struct{}{}
				}
				<-done
				if err != nil || res.Statuses[200] != tc.requests {
					t.Errorf("Flood = %+v, %v; want %d answers 200", res, err, tc.requests)
				}
			})
		})
	}
}

func TestFloodQPS(t *testing.T) {
	for _, tc := range []struct {
		name        string
		qps         float64
		requests    int
		wantSeconds float64
	}{
		// A burst of one: the first request at once, then one every 1/qps.
		{"unlimited", 0, 11, 0},
		{"10 per second", 10, 11, 1},
		{"0.5 per second", 0.5, 3, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := floodOpts("http://pipe/", tc.requests, 4)
				o.QPS = tc.qps
				res, err := floodInBubble(t.Context(), o, http.NotFoundHandler())
				if err != nil || res.Statuses[404] != tc.requests || res.Seconds != tc.wantSeconds {
					t.Errorf("Flood = %+v, %v; want %d answers in %vs", res, err, tc.requests, tc.wantSeconds)
				}
			})
		})
	}
}

func TestFloodCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
	}{
		{"before the first request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var requests atomic.Int32
				dial, stop := servePipes(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
				defer stop()
				ctx, cancel := context.WithCancel(t.Context())
				o := floodOpts("http://pipe/", 3, 2)
				cancel()
				var res FloodResult
				var err error
				done := make(chan struct{})
				go func() {
					defer close(done)
					res, err = flood(ctx, o, dial)
				}()
				synctest.Wait()
				cancel()
				<-done
				if !errors.Is(err, context.Canceled) || res.Requests != 0 || requests.Load() != 0 || time.Since(t0) != 0 {
					t.Errorf("Flood = %+v, %v after %v, server saw %d requests; want context.Canceled at once, no request",
						res, err, time.Since(t0), requests.Load())
				}
			})
		})
	}
}

func TestFloodErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name   string
		modify func(o *FloodOptions)
		want   string
	}{
		{"unreadable token file", func(o *FloodOptions) { o.TokenFile = missing }, "read token file"},
		{"unreadable CA file", func(o *FloodOptions) { o.CAFile = missing }, "read CA file"},
		{"invalid options", func(o *FloodOptions) { o.Concurrency = 0 }, "--concurrency must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := floodOpts("http://127.0.0.1:1/", 1, 1)
			tc.modify(&o)
			if _, err := Flood(context.Background(), o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Flood error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	var samples []sample
	for i := 1; i <= 100; i++ {
		samples = append(samples, sample{status: 200, latency: time.Duration(101-i) * ms})
	}
	samples[0].status, samples[1].status = 0, 429
	for _, tc := range []struct {
		name    string
		samples []sample
		want    FloodResult
	}{
		{"none", nil, FloodResult{Statuses: map[int]int{}, Seconds: 2}},
		{"one", []sample{{status: 204, latency: 3 * ms}}, FloodResult{Requests: 1, Statuses: map[int]int{204: 1}, P50Ms: 3, P99Ms: 3, MaxMs: 3, Seconds: 2}},
		{"hundred", samples, FloodResult{Requests: 100, Statuses: map[int]int{0: 1, 429: 1, 200: 98}, P50Ms: 50, P99Ms: 99, MaxMs: 100, Seconds: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(tc.samples, 2*time.Second)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}
