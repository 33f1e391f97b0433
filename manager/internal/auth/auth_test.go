package auth_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/api/runtime/review/reviewtest"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/auth/authtest"
)

// newFakeAPI knows "good", the token of alice's live pod on this node
// (alice may create volumes of pool fast and get host n), and tokens that
// a TokenReview refuses.
func newFakeAPI() *reviewtest.API {
	api := reviewtest.New()
	alice := reviewtest.ServiceAccount("alice")
	api.AddToken("good", alice, reviewtest.BoundTo("alice-1", reviewtest.ThisNode))
	api.Tokens["plain"] = reviewtest.Token{User: alice, Audiences: []string{reviewtest.APIServerAudience}}
	api.Tokens["noaud"] = reviewtest.Token{User: alice, Audiences: []string{managerapi.TokenAudience}, Confirm: []string{}}
	api.Grant(alice, "pools/volumes", "fast", "create")
	api.Grant(alice, "hosts", "n", "get")
	api.Pods = []*corev1.Pod{reviewtest.Pod("alice-1", "alice", reviewtest.ThisNode)}
	return api
}

// newReviewer is a Reviewer of reviewtest.ThisNode on api's fake clientset,
// with opts; it returns the clientset too.
func newReviewer(api *reviewtest.API, opts auth.Options) (*auth.Reviewer, *fake.Clientset) {
	cs := api.Clientset()
	return authtest.NewReviewer(cs, opts), cs
}

// reviewerOf is newReviewer without the clientset.
func reviewerOf(api *reviewtest.API, opts auth.Options) *auth.Reviewer {
	r, _ := newReviewer(api, opts)
	return r
}

func volumes(verb, pool string) auth.Attributes {
	return auth.Attributes{Verb: verb, Resource: managerapi.ResourcePools, Subresource: managerapi.SubresourceVolumes, Name: pool}
}

func TestAuthorize(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		token       string
		attrs       auth.Attributes
		failReviews bool
		wantReason  managerapi.Reason // "" means allowed
		wantOther   bool              // a non-*Error error
		wantInMsg   []string
	}{
		{desc: "allowed on its pool", token: "good", attrs: volumes("create", "fast")},
		{desc: "no token", token: "", attrs: volumes("create", "fast"), wantReason: managerapi.ReasonUnauthorized,
			wantInMsg: []string{"no bearer token", "--audience hostpath.dev/manager"}},
		{desc: "rejected token", token: "bad", attrs: volumes("create", "fast"), wantReason: managerapi.ReasonUnauthorized,
			wantInMsg: []string{"invalid bearer token", "kubectl create token SA --audience hostpath.dev/manager"}},
		{desc: "API server token is refused", token: "plain", attrs: volumes("create", "fast"), wantReason: managerapi.ReasonUnauthorized,
			wantInMsg: []string{`audience "hostpath.dev/manager"`, "kubectl create token SA --audience hostpath.dev/manager"}},
		{desc: "authenticated without the audience is refused", token: "noaud", attrs: volumes("create", "fast"), wantReason: managerapi.ReasonUnauthorized,
			wantInMsg: []string{`did not confirm audience "hostpath.dev/manager"`}},
		{desc: "missing verb", token: "good", attrs: volumes("delete", "fast"), wantReason: managerapi.ReasonForbidden,
			wantInMsg: []string{`user "system:serviceaccount:hostpath-system:alice" cannot delete pools/volumes in API group "hostpath.dev" (name "fast")`,
				"resources [pools/volumes], verbs [delete]", "resourceNames [fast]", managerapi.AdminClusterRole}},
		{desc: "other pool", token: "good", attrs: volumes("create", "slow"), wantReason: managerapi.ReasonForbidden},
		{desc: "API server down", token: "good", attrs: volumes("create", "fast"), failReviews: true, wantOther: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api := newFakeAPI()
			api.FailReviews = tc.failReviews
			d, err := reviewerOf(api, auth.DefaultOptions()).Authorize(ctx, review.Caller{Token: tc.token}, tc.attrs)
			if api.LastTR != nil && !slices.Equal(api.LastTR.Spec.Audiences, []string{managerapi.TokenAudience}) {
				t.Errorf("TokenReview audiences = %q, want only %q", api.LastTR.Spec.Audiences, managerapi.TokenAudience)
			}
			var ae *review.Error
			switch {
			case tc.wantOther:
				if err == nil || errors.As(err, &ae) {
					t.Fatalf("error = %v, want a non-refusal error", err)
				}
			case tc.wantReason == "":
				if err != nil {
					t.Fatalf("error = %v, want allowed", err)
				}
				if u := d.User; u.Name != reviewtest.ServiceAccount("alice") || u.UID != "uid-"+reviewtest.ServiceAccount("alice") || d.Remote != "" {
					t.Errorf("decision = %+v, user %+v", d, u)
				}
				spec := api.LastSAR.Spec
				ra := spec.ResourceAttributes
				if spec.User != reviewtest.ServiceAccount("alice") || spec.UID != "uid-"+reviewtest.ServiceAccount("alice") || len(spec.Groups) != 1 || len(spec.Extra) != 3 ||
					ra.Group != "hostpath.dev" || ra.Resource != "pools" || ra.Subresource != "volumes" || ra.Verb != "create" || ra.Name != "fast" {
					t.Errorf("SubjectAccessReview spec = %+v, attributes %+v", spec, ra)
				}
			default:
				if !errors.As(err, &ae) || ae.Reason != tc.wantReason {
					t.Fatalf("error = %v, want reason %s", err, tc.wantReason)
				}
				for _, want := range tc.wantInMsg {
					if !strings.Contains(ae.Message, want) {
						t.Errorf("message %q does not contain %q", ae.Message, want)
					}
				}
			}
		})
	}
}

func TestCaching(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newFakeAPI()
	clock := clocktesting.NewFakeClock(time.Now())
	opts := auth.DefaultOptions()
	opts.Clock = clock
	opts.CacheSize = 2
	r := reviewerOf(api, opts)
	get := auth.Attributes{Verb: "get", Resource: "hosts", Name: "n"}
	list := volumes("list", "fast")

	steps := []struct {
		desc                  string
		token                 string
		attrs                 auth.Attributes
		advance               time.Duration
		wantTokens, wantSARs  int
		wantAllowed, wantAuth bool
	}{
		{"first call reviews", "good", get, 0, 1, 1, true, true},
		{"second call is cached", "good", get, 0, 1, 1, true, true},
		{"denied is reviewed", "good", list, 0, 1, 2, false, true},
		{"denied is cached", "good", list, 0, 1, 2, false, true},
		{"denied expires first", "good", list, opts.DeniedTTL + time.Second, 1, 3, false, true},
		{"allowed still cached", "good", get, 0, 1, 3, true, true},
		{"allowed expires", "good", get, opts.AllowedTTL, 1, 4, true, true},
		{"rejected token reviewed", "bad", get, 0, 2, 4, false, false},
		{"rejected token cached", "bad", get, 0, 2, 4, false, false},
		{"rejected token expires", "bad", get, opts.UnauthenticatedTTL + time.Second, 3, 4, false, false},
		{"accepted token expires", "good", get, opts.AuthenticatedTTL, 4, 5, true, true},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		_, err := r.Authorize(ctx, review.Caller{Token: s.token}, s.attrs)
		if (err == nil) != s.wantAllowed {
			t.Errorf("%s: error = %v, want allowed %v", s.desc, err, s.wantAllowed)
		}
		var ae *review.Error
		if err != nil && errors.As(err, &ae) && (ae.Reason == managerapi.ReasonUnauthorized) == s.wantAuth {
			t.Errorf("%s: reason %s", s.desc, ae.Reason)
		}
		if api.TokenCalls != s.wantTokens || api.SARCalls != s.wantSARs {
			t.Errorf("%s: %d token reviews, %d access reviews; want %d, %d", s.desc, api.TokenCalls, api.SARCalls, s.wantTokens, s.wantSARs)
		}
	}
}

// checkReason fails unless err is nil, for wantReason "" (allowed), or an
// *Error of wantReason, which it returns.
func checkReason(t *testing.T, what string, err error, wantReason managerapi.Reason) *review.Error {
	t.Helper()
	var ae *review.Error
	switch {
	case wantReason == "" && err != nil:
		t.Errorf("%s: %v, want allowed", what, err)
	case wantReason != "" && (!errors.As(err, &ae) || ae.Reason != wantReason):
		t.Errorf("%s: %v, want reason %s", what, err, wantReason)
		return nil
	}
	return ae
}

func TestReviewErrorsAreNotCached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := newFakeAPI()
	api.FailReviews = true
	r := reviewerOf(api, auth.DefaultOptions())
	attrs := auth.Attributes{Verb: "get", Resource: "hosts", Name: "n"}
	if _, err := r.Authorize(ctx, review.Caller{Token: "good"}, attrs); err == nil {
		t.Fatal("Authorize succeeded while the API server fails")
	}
	api.FailReviews = false
	if _, err := r.Authorize(ctx, review.Caller{Token: "good"}, attrs); err != nil {
		t.Fatalf("Authorize after recovery: %v", err)
	}
}

func TestAllowAll(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if d, err := (auth.AllowAll{}).Authorize(ctx, review.Caller{}, volumes("delete", "fast")); err != nil || d.User.Name == "" || d.Remote != "" {
		t.Errorf("AllowAll = %+v, %v; want this node's authority", d, err)
	}
}
