package server

import (
	"context"
	"errors"
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
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/api/runtime/review/reviewtest"
	"hostpath.dev/manager/internal/auth"
)

// slowAPI behaves like a busy API server: every review takes latency, and
// all callers together get at most 20 TokenReviews a second.
type slowAPI struct {
	limiter *rate.Limiter
	latency time.Duration
	// legit are the tokens it accepts, for the manager's audience.
	legit map[string]bool

	junkReviews, legitReviews atomic.Int64
	// floodUnderWay is closed when junkSeen junk tokens have reached it.
	floodUnderWay chan struct{}
	junkSeen      int64
}

// ownCaller is the legitimate caller of these tests: a service account of
// the manager's namespace, as the provisioner is.
var ownCaller = reviewtest.ServiceAccount("hostpath-provisioner")

func newSlowAPI(legit ...string) *slowAPI {
	a := &slowAPI{limiter: rate.NewLimiter(20, 1), latency: 50 * time.Millisecond, legit: map[string]bool{},
		floodUnderWay: make(chan struct{}), junkSeen: 10}
	for _, t := range legit {
		a.legit[t] = true
	}
	return a
}

// serve waits for its turn, if throttled, and then for the latency, like
// a request to an API server that is at its limit.
func (a *slowAPI) serve(ctx context.Context, throttled bool) error {
	if throttled {
		if err := a.limiter.Wait(ctx); err != nil {
			return err
		}
	}
	t := time.NewTimer(a.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type slowTokenReviews struct {
	authnclient.TokenReviewInterface
	api *slowAPI
}

func (s slowTokenReviews) Create(ctx context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	a := s.api
	ok := a.legit[tr.Spec.Token]
	if ok {
		a.legitReviews.Add(1)
	} else if a.junkReviews.Add(1) == a.junkSeen {
		close(a.floodUnderWay)
	}
	if err := a.serve(ctx, true); err != nil {
		return nil, err
	}
	out := tr.DeepCopy()
	if ok {
		out.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
			User: authnv1.UserInfo{Username: ownCaller}}
	} else {
		out.Status.Error = "invalid bearer token"
	}
	return out, nil
}

type slowSARs struct {
	authzclient.SubjectAccessReviewInterface
	api *slowAPI
}

func (s slowSARs) Create(ctx context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	if err := s.api.serve(ctx, false); err != nil {
		return nil, err
	}
	out := sar.DeepCopy()
	out.Status.Allowed = sar.Spec.User == ownCaller
	return out, nil
}

// clientFrom returns an HTTP client whose connections come from ip.
func clientFrom(t *testing.T, ip string) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
		MaxIdleConnsPerHost: 10,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func getHost(ctx context.Context, c *http.Client, base, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/host", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// startManager serves a Server with a real Reviewer over api, and the
// default limits with ownNamespace's service accounts as the own callers,
// on 127.0.0.1 until the test ends.
func startManager(t *testing.T, ctx context.Context, api *slowAPI) string {
	lo := review.DefaultLimitOptions()
	lo.OwnNamespace = reviewtest.Namespace
	limits := review.NewBudget(lo)
	opts := auth.DefaultOptions()
	opts.Budget = limits
	// GET /v1/host is a read: no pod is ever checked.
	reviewer := auth.NewReviewer(slowTokenReviews{api: api}, slowSARs{api: api}, nil, opts)
	handler, err := New(Config{NodeName: "node-a", Backend: &fakeBackend{}, Authorizer: reviewer, Budget: limits})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startFlood sends n concurrent requests with junk tokens (junk(i) is the
// i-th) from 127.0.0.2. wait returns their status codes (0 for a failed
// request) once all are answered, or cancels them after a minute.
func startFlood(t *testing.T, ctx context.Context, base string, n int, junk func(int) string) (wait func() []int) {
	codes := make([]int, n)
	ctx, cancel := context.WithCancel(ctx)
	from := &http.Client{Transport: &http.Transport{
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
		DisableKeepAlives: true,
	}}
	var flood sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		flood.Add(1)
		go func() {
			defer flood.Done()
			<-start
			code, err := getHost(ctx, from, base, junk(i))
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("Junk request %d: %v", i, err)
			}
			codes[i] = code
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { flood.Wait(); close(done) }()
	return func() []int {
		defer cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			cancel()
			<-done
			t.Error("the flood was not answered within a minute")
		}
		return codes
	}
}

// TestJunkTokenFlood: 1,000 concurrent requests with junk tokens from
// 127.0.0.2 do not starve an own caller on 127.0.0.1, even with a token
// that is not cached yet, against an API server that takes 50 ms a review
// and 20 TokenReviews a second in all (each call answers within 20 times
// the latency of a call measured before the flood); the flood mostly gets
// 429. Junk that claims to be the own caller changes nothing.
func TestJunkTokenFlood(t *testing.T) {
	for _, tc := range []struct {
		desc string
		junk func(int) string
	}{
		{"junk", func(i int) string { return fmt.Sprintf("junk-%d", i) }},
		{"junk claiming to be the provisioner", func(i int) string { return reviewtest.JWT(ownCaller, fmt.Sprintf("forged-%d", i)) }},
	} {
		t.Run(tc.desc, func(t *testing.T) { junkTokenFlood(t, tc.junk) })
	}
}

func junkTokenFlood(t *testing.T, junk func(int) string) {
	_, ctx := ktesting.NewTestContext(t)
	legit0, legit1, legit2 := reviewtest.JWT(ownCaller, "legit-0"), reviewtest.JWT(ownCaller, "legit-1"), reviewtest.JWT(ownCaller, "legit-2")
	api := newSlowAPI(legit0, legit1, legit2)
	base := startManager(t, ctx, api)
	legit := clientFrom(t, "127.0.0.1")

	// The baseline: one call with a token not cached yet (one review at the
	// fake API's latency), on this machine, now. A starved caller would wait
	// behind the flood's reviews at 20 a second, seconds; the bound below is
	// 20 times the baseline, and never under 2 s.
	began := time.Now()
	if code, err := getHost(ctx, legit, base, legit0); err != nil || code != http.StatusOK {
		t.Fatalf("Legitimate call before the flood: %d, %v; want 200", code, err)
	}
	baseline := time.Since(began)
	bound := max(2*time.Second, 20*baseline)
	const floodSize = 1000
	waitFlood := startFlood(t, ctx, base, floodSize, junk)
	select {
	case <-api.floodUnderWay:
	case <-time.After(30 * time.Second):
		t.Fatal("the flood's TokenReviews never reached the API server")
	}

	// The caller's token rotates while the flood runs: calls with the old
	// token (reviewed once, then cached) and with the new one (not cached
	// yet) go side by side.
	var calls sync.WaitGroup
	for i, token := range []string{legit1, legit2} {
		calls.Add(1)
		go func() {
			defer calls.Done()
			for j := range 3 {
				began := time.Now()
				code, err := getHost(ctx, legit, base, token)
				took := time.Since(began)
				t.Logf("Legitimate call %d with token %d: %d in %v", j, i+1, code, took.Round(time.Millisecond))
				if err != nil || code != http.StatusOK || took > bound {
					t.Errorf("Legitimate call %d with token %d during the flood: %d, %v in %v; want 200 within %v (20 times the %v of a call before the flood)", j, i+1, code, err, took.Round(time.Millisecond), bound, baseline.Round(time.Millisecond))
				}
			}
		}()
	}
	calls.Wait()
	if n := api.legitReviews.Load(); n != 3 {
		t.Errorf("the legitimate caller's 3 tokens took %d TokenReviews, want 3", n)
	}

	summary := map[int]int{}
	for _, c := range waitFlood() {
		summary[c]++
	}
	t.Logf("Flood answers by status: %v; junk TokenReviews: %d", summary, api.junkReviews.Load())
	if summary[http.StatusTooManyRequests] < floodSize*3/4 {
		t.Errorf("%d of %d junk requests got 429, want most", summary[http.StatusTooManyRequests], floodSize)
	}
	if summary[http.StatusOK] != 0 {
		t.Errorf("%d junk requests got 200", summary[http.StatusOK])
	}
}

// TestJunkFloodGets429WithRetryAfter: a 429 from the limits carries
// Retry-After and the TooManyRequests reason in JSON.
func TestJunkFloodGets429WithRetryAfter(t *testing.T) {
	api := newSlowAPI()
	api.latency = 0
	api.limiter = rate.NewLimiter(rate.Inf, 0)
	limits := review.NewBudget(review.LimitOptions{PerAddressQPS: 0.1, PerAddressBurst: 1})
	opts := auth.DefaultOptions()
	opts.Budget = limits
	handler, err := New(Config{NodeName: "node-a", Backend: &fakeBackend{}, Authorizer: auth.NewReviewer(slowTokenReviews{api: api}, slowSARs{api: api}, nil, opts), Budget: limits})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: handler}
	checkAnswer(t, e.do(t, httpCall{method: "GET", path: "/v1/host", token: "junk-1"}), 401, managerapi.ReasonUnauthorized)
	w := e.do(t, httpCall{method: "GET", path: "/v1/host", token: "junk-2"})
	st := checkAnswer(t, w, 429, managerapi.ReasonTooManyRequests)
	if got := w.Header().Get("Retry-After"); got != "10" {
		t.Errorf("Retry-After = %q, want 10 (one token at 0.1/s)", got)
	}
	if !strings.Contains(st.Message, "retry later") {
		t.Errorf("message %q", st.Message)
	}
}
