package review

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review/reviewtest"
)

// newAPI knows "good" (alice, for the manager's audience), "prom" (the
// metrics scraper, for the API server's) and grants alice get hosts and
// prom get /metrics.
func newAPI() *reviewtest.API {
	api := reviewtest.New()
	api.AddToken("good", reviewtest.ServiceAccount("alice"), nil)
	api.Tokens["prom"] = reviewtest.Token{User: reviewtest.ServiceAccount("prom"), Audiences: []string{reviewtest.APIServerAudience}}
	api.Grant(reviewtest.ServiceAccount("alice"), "hosts", "n", "get")
	api.GrantURL(reviewtest.ServiceAccount("prom"), "/metrics", "get")
	return api
}

func newReviewerOf(api *reviewtest.API, opts Options) *Reviewer {
	cs := api.Clientset()
	return New(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), opts)
}

func hosts(name string) Access {
	return Access{Resource: &authzv1.ResourceAttributes{Group: managerapi.APIGroup, Resource: managerapi.ResourceHosts, Verb: "get", Name: name}}
}

// TestAudience: with an Audience, TokenReview is asked for it and a token
// of the API server's is refused naming it; without one, the API server's
// own audiences apply and the manager's token is refused.
func TestAudience(t *testing.T) {
	for _, tc := range []struct {
		desc, audience, token string
		wantOK                bool
		wantInMsg             string
	}{
		{"manager audience, manager token", managerapi.TokenAudience, "good", true, ""},
		{"manager audience, API server token", managerapi.TokenAudience, "prom", false, "--audience " + managerapi.TokenAudience},
		{"API server audience, API server token", "", "prom", true, ""},
		{"API server audience, manager token", "", "good", false, "kubectl create token SA`"},
		{"no token", "", "", false, "no bearer token"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api := newAPI()
			u, err := newReviewerOf(api, Options{Audience: tc.audience}).Authenticate(ctx, Caller{Token: tc.token})
			if api.LastTR != nil {
				want := []string(nil)
				if tc.audience != "" {
					want = []string{tc.audience}
				}
				if !slices.Equal(api.LastTR.Spec.Audiences, want) {
					t.Errorf("TokenReview audiences %q, want %q", api.LastTR.Spec.Audiences, want)
				}
			}
			if tc.wantOK {
				if err != nil || u == nil || u.Name == "" {
					t.Fatalf("Authenticate = %+v, %v; want a user", u, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != managerapi.ReasonUnauthorized || !strings.Contains(e.Message, tc.wantInMsg) {
				t.Errorf("Authenticate error %v, want Unauthorized containing %q", err, tc.wantInMsg)
			}
		})
	}
}

// TestJunkCannotEvict: rejected tokens and denied calls have caches of
// their own, so a stream of them leaves the accepted token and the allowed
// call cached.
func TestJunkCannotEvict(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newAPI()
	r := newReviewerOf(api, Options{Audience: managerapi.TokenAudience, CacheSize: 2})
	u, err := r.Authenticate(ctx, Caller{Token: "good"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Review(ctx, Caller{}, u, hosts("n")); err != nil || !st.Allowed {
		t.Fatalf("Review = %+v, %v", st, err)
	}
	const junk = 10
	for i := range junk {
		if _, err := r.Authenticate(ctx, Caller{Token: fmt.Sprintf("junk-%d", i)}); err == nil {
			t.Fatal("junk token accepted")
		}
		if st, err := r.Review(ctx, Caller{}, u, hosts(fmt.Sprintf("p%d", i))); err != nil || st.Allowed {
			t.Fatalf("denied call: %+v, %v", st, err)
		}
	}
	tokens, sars := api.TokenCalls, api.SARCalls
	if _, err := r.Authenticate(ctx, Caller{Token: "good"}); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Review(ctx, Caller{}, u, hosts("n")); err != nil || !st.Allowed {
		t.Fatalf("Review = %+v, %v", st, err)
	}
	if api.TokenCalls != tokens || api.SARCalls != sars {
		t.Errorf("after %d junk tokens and denied calls, the good token took %d more TokenReviews and %d more SubjectAccessReviews, want 0",
			junk, api.TokenCalls-tokens, api.SARCalls-sars)
	}
	for name, c := range map[string]interface{ Keys() []any }{"accepted": r.accepted, "rejected": r.rejected, "allowed": r.allowed, "denied": r.denied} {
		if n := len(c.Keys()); n > 2 {
			t.Errorf("%s cache holds %d entries, bound is 2", name, n)
		}
	}
}

// TestDeniedKeepsReason: a denial keeps the authorizer's reason, from the
// review and from the cache alike.
func TestDeniedKeepsReason(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newAPI()
	r := newReviewerOf(api, Options{})
	u := &User{Name: reviewtest.ServiceAccount("alice")}
	for i := range 2 {
		st, err := r.Review(ctx, Caller{}, u, hosts("other"))
		if err != nil || st.Allowed || Denial(st) != "; authorizer: no RBAC policy matched" {
			t.Errorf("call %d: %+v, %v; want denied with the authorizer's reason", i, st, err)
		}
	}
	if api.SARCalls != 1 {
		t.Errorf("%d SubjectAccessReviews, want 1 (the denial cached)", api.SARCalls)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, want string
		wantErr      bool
	}{
		{"", "", false},
		{"Bearer abc", "abc", false},
		{"bearer  abc ", "abc", false},
		{"Basic dXNlcjpw", "", true},
		{"Bearer", "", true},
		{"Bearer ", "", true},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Authorization", tc.header)
		}
		got, err := BearerToken(h)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("BearerToken(%q) = %q, %v", tc.header, got, err)
		}
	}
}

func TestServiceAccountOf(t *testing.T) {
	for _, tc := range []struct {
		user, ns, name string
		ok             bool
	}{
		{"system:serviceaccount:hostpath-system:hostpath-provisioner", "hostpath-system", "hostpath-provisioner", true},
		{"system:serviceaccount:ns:", "", "", false},
		{"system:serviceaccount::sa", "", "", false},
		{"system:serviceaccount:ns:sa:x", "", "", false},
		{"alice", "", "", false},
		{"system:node:node-a", "", "", false},
	} {
		ns, name, ok := ServiceAccountOf(tc.user)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("ServiceAccountOf(%q) = %q, %q, %v; want %q, %q, %v", tc.user, ns, name, ok, tc.ns, tc.name, tc.ok)
		}
	}
}

func TestClaimedUser(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, tc := range []struct {
		desc, token, want string
	}{
		{"service account JWT", reviewtest.JWT("system:serviceaccount:ns:sa", "1"), "system:serviceaccount:ns:sa"},
		{"not a JWT", "junk-123", ""},
		{"two parts", "a.b", ""},
		{"payload not base64", "a.!!!.c", ""},
		{"payload not JSON", "a." + enc([]byte("nope")) + ".c", ""},
		{"no sub", "a." + enc([]byte(`{"iss":"x"}`)) + ".c", ""},
		{"too long", reviewtest.JWT("system:serviceaccount:ns:sa", strings.Repeat("x", maxClaimedToken)), ""},
	} {
		if got := claimedUser(tc.token); got != tc.want {
			t.Errorf("%s: claimedUser = %q, want %q", tc.desc, got, tc.want)
		}
	}
}
