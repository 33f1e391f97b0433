package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
)

// junkSource is the address the flood comes from: the API server's address
// on this machine, one the managers never see legitimate calls from.
const junkSource = "198.18.0.1"

// callOnce sends one request with token and returns the status and body,
// a 429 included.
func callOnce(ctx context.Context, t *testing.T, c *http.Client, method, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, body := sendOnce(t, c, req)
	return resp.StatusCode, body
}

// TestManagerTokenAudience: a plain service account token, bound to the
// client ClusterRole, is refused with 401 and told which audience is needed;
// the same account's token for the manager's audience works; the
// provisioner, which sends its projected manager token, keeps provisioning.
func TestManagerTokenAudience(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	base := managerPods(ctx, t, e.f, e.nodes)[node]
	managerClient(ctx, t, e.f, e.ns, "caller")

	plain, err := e.f.ServiceAccountToken(ctx, e.ns, "caller")
	if err != nil {
		t.Fatal(err)
	}
	code, body := callManager(ctx, t, "GET", base, "/v1/host", plain, "")
	st := wantStatus(t, "GET /v1/host with a plain service account token", code, body, http.StatusUnauthorized, "Unauthorized")
	if !strings.Contains(st.Message, managerapi.TokenAudience) {
		t.Errorf("401 message %q does not name the audience %s", st.Message, managerapi.TokenAudience)
	}

	scoped, err := e.f.ServiceAccountToken(ctx, e.ns, "caller", managerapi.TokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, base, scoped, "GET /v1/host with the manager-audience token")

	pvc := e.claim(ctx, t, "still-provisioning", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	e.waitBound(ctx, t, pvc.Name)
}

// TestManagerJunkTokenFlood: 1,000 requests with junk tokens from one
// address (100 a second, 64 at a time) do not starve the product's own
// caller (the provisioner's service account) on another address, even one
// whose every token is new (not cached): each of its calls, two a second
// (four reviews a second, within its address's five), answers 200 while
// the flood runs (their latencies are printed, not asserted), and the
// flood is mostly turned away with 429 before any TokenReview.
func TestManagerJunkTokenFlood(t *testing.T) {
	ctx := t.Context()
	f := framework.Cluster()
	nodes := f.TwoRealNodes(ctx, t)
	base := managerPods(ctx, t, f, nodes)[nodes[0]]
	prov := f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, nodes[:1], provisionTimeout)[nodes[0]]

	// Fresh tokens, made before the flood so that the calls start with it.
	fresh := make([]string, 24)
	for i := range fresh {
		var err error
		if fresh[i], err = f.PodBoundToken(ctx, prov, managerapi.TokenAudience); err != nil {
			t.Fatal(err)
		}
	}

	junk := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(junkSource)}}).DialContext,
		MaxConnsPerHost: 64,
		TLSClientConfig: managerHTTP(t, base).Transport.(*http.Transport).TLSClientConfig,
	}}
	const floodSize = 1000
	var codes sync.Map // status code -> *atomic.Int64
	floodDone := make(chan struct{})
	floodPace := rate.NewLimiter(100, 1)
	go func() {
		defer close(floodDone)
		workqueue.ParallelizeUntil(ctx, 64, floodSize, func(i int) {
			if floodPace.Wait(ctx) != nil {
				return
			}
			code := 0
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/host", nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer junk-%d-%s", i, framework.RandomSuffix()))
			if resp, err := junk.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			n, _ := codes.LoadOrStore(code, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		})
	}()

	// The legitimate caller, with a fresh (uncached) token each time, for as
	// long as the flood lasts.
	during := 0
	var lat []time.Duration
	legitPace := rate.NewLimiter(2, 1)
	for _, token := range fresh {
		if err := legitPace.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, body := callOnce(ctx, t, managerHTTP(t, base), "GET", base+"/v1/host", token)
		lat = append(lat, time.Since(start))
		if code != http.StatusOK {
			t.Errorf("Legitimate call %d during the flood: %d, want 200; body %s", during, code, body)
		}
		select {
		case <-floodDone:
		default:
			during++
			continue
		}
		break
	}
	<-floodDone
	if during == 0 {
		t.Errorf("No legitimate call completed while the flood lasted")
	}
	summary := map[int]int64{}
	codes.Range(func(k, v any) bool { summary[k.(int)] = v.(*atomic.Int64).Load(); return true })
	p50, p99, worst := percentiles(lat)
	t.Logf("Flood answers by status: %v; legitimate calls during the flood: %d, p50 %v, p99 %v, max %v", summary, during, p50, p99, worst)
	if summary[http.StatusTooManyRequests] < floodSize/2 {
		t.Errorf("Only %d of %d junk requests got 429, want most: %v", summary[http.StatusTooManyRequests], floodSize, summary)
	}
	if summary[http.StatusOK] != 0 {
		t.Errorf("%d junk requests got 200", summary[http.StatusOK])
	}
}
