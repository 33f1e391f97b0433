package review

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review/reviewtest"
)

// TestGuard: /metrics behind the Guard answers the scraper's token, and
// refuses everyone else with the status a client can act on.
func TestGuard(t *testing.T) {
	api := newAPI()
	api.Tokens["alice-plain"] = reviewtest.Token{User: reviewtest.ServiceAccount("alice"), Audiences: []string{reviewtest.APIServerAudience}}
	for _, tc := range []struct {
		desc, header   string
		budget         *Budget
		failReviews    bool
		wantCode       int
		wantInBody     string
		wantAuthHeader bool
	}{
		{desc: "the scraper's token", header: "Bearer prom", wantCode: http.StatusOK, wantInBody: "metrics"},
		{desc: "no token", wantCode: http.StatusUnauthorized, wantInBody: "no bearer token", wantAuthHeader: true},
		{desc: "not a bearer token", header: "Basic eDp5", wantCode: http.StatusUnauthorized, wantInBody: "Bearer <token>", wantAuthHeader: true},
		{desc: "junk token", header: "Bearer junk", wantCode: http.StatusUnauthorized, wantInBody: "invalid bearer token", wantAuthHeader: true},
		{desc: "the manager's audience is not the API server's", header: "Bearer good", wantCode: http.StatusUnauthorized, wantInBody: "invalid bearer token"},
		{desc: "valid token without the permission", header: "Bearer alice-plain", wantCode: http.StatusForbidden,
			wantInBody: `nonResourceURLs [/metrics], verbs [get] (for /metrics, bind it to the ClusterRole ` + managerapi.MetricsReaderClusterRole},
		{desc: "the API server is down", header: "Bearer prom", failReviews: true, wantCode: http.StatusInternalServerError, wantInBody: "cannot authorise"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api.FailReviews = tc.failReviews
			r := newReviewerOf(api, Options{Budget: tc.budget})
			h := r.Guard("test", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics\n") }))
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantInBody) {
				t.Errorf("%d %q, want %d containing %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantInBody)
			}
			if got := rec.Header().Get("WWW-Authenticate"); (got != "") != (tc.wantCode == http.StatusUnauthorized) {
				t.Errorf("WWW-Authenticate %q with %d", got, rec.Code)
			}
		})
	}
}

// TestGuardTooMany: past the address's in-flight limit, 429 with
// Retry-After, before any review.
func TestGuardTooMany(t *testing.T) {
	api := newAPI()
	budget := NewBudget(LimitOptions{MaxInFlight: 1})
	r := newReviewerOf(api, Options{Budget: budget})
	inside := make(chan struct{})
	release := make(chan struct{})
	h := r.Guard("test", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(inside)
		<-release
	}))
	newReq := func() *http.Request {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer prom")
		return req
	}
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), newReq()); close(done) }()
	<-inside
	calls := api.TokenCalls
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newReq())
	close(release)
	<-done
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("second request in flight: %d, Retry-After %q; want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if api.TokenCalls != calls {
		t.Errorf("the refused request caused %d TokenReviews", api.TokenCalls-calls)
	}
}
