package auth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/manager/pkg/client"
)

// fakeAPI answers TokenReviews from tokens (token -> user name) and
// SubjectAccessReviews from grants ("user verb resource name"), counting
// the calls.
type fakeAPI struct {
	tokens      map[string]string
	grants      map[string]bool
	tokenCalls  int
	sarCalls    int
	lastSAR     *authzv1.SubjectAccessReview
	failReviews bool
}

func (f *fakeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenCalls++
		if f.failReviews {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if name, ok := f.tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{
				Username: name, UID: "uid-" + name, Groups: []string{"system:serviceaccounts"},
				Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"p"}},
			}}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.sarCalls++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		f.lastSAR = sar
		ra := sar.Spec.ResourceAttributes
		if ra.Group == client.APIGroup && f.grants[strings.Join([]string{sar.Spec.User, ra.Verb, ra.Resource, ra.Name}, " ")] {
			sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: true}
		} else {
			sar.Status = authzv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		return true, sar, nil
	})
	return cs
}

func TestAuthorize(t *testing.T) {
	create := Attributes{Verb: "create", Resource: client.ResourceVolumes, Name: "v1"}
	for _, tc := range []struct {
		desc        string
		token       string
		attrs       Attributes
		failReviews bool
		wantReason  client.Reason // "" means allowed
		wantOther   bool          // a non-*Error error
		wantInMsg   string
	}{
		{desc: "allowed", token: "good", attrs: create},
		{desc: "no token", token: "", attrs: create, wantReason: client.ReasonUnauthorized, wantInMsg: "no bearer token"},
		{desc: "rejected token", token: "bad", attrs: create, wantReason: client.ReasonUnauthorized, wantInMsg: "invalid bearer token"},
		{desc: "missing permission", token: "good", attrs: Attributes{Verb: "delete", Resource: client.ResourceVolumes, Name: "v1"},
			wantReason: client.ReasonForbidden, wantInMsg: `user "alice" cannot delete volumes in API group "hostpath.dev" (name "v1")`},
		{desc: "other name", token: "good", attrs: Attributes{Verb: "create", Resource: client.ResourceVolumes, Name: "v2"}, wantReason: client.ReasonForbidden},
		{desc: "API server down", token: "good", attrs: create, failReviews: true, wantOther: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api := &fakeAPI{tokens: map[string]string{"good": "alice"}, grants: map[string]bool{"alice create volumes v1": true}, failReviews: tc.failReviews}
			cs := api.clientset()
			r := NewReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), DefaultOptions())
			u, err := r.Authorize(ctx, tc.token, tc.attrs)
			var ae *Error
			switch {
			case tc.wantOther:
				if err == nil || errors.As(err, &ae) {
					t.Fatalf("error = %v, want a non-refusal error", err)
				}
			case tc.wantReason == "":
				if err != nil {
					t.Fatalf("error = %v, want allowed", err)
				}
				if u.Name != "alice" || u.UID != "uid-alice" {
					t.Errorf("user = %+v", u)
				}
				spec := api.lastSAR.Spec
				ra := spec.ResourceAttributes
				if spec.User != "alice" || spec.UID != "uid-alice" || len(spec.Groups) != 1 || len(spec.Extra) != 1 ||
					ra.Group != "hostpath.dev" || ra.Resource != "volumes" || ra.Verb != "create" || ra.Name != "v1" {
					t.Errorf("SubjectAccessReview spec = %+v, attributes %+v", spec, ra)
				}
			default:
				if !errors.As(err, &ae) || ae.Reason != tc.wantReason {
					t.Fatalf("error = %v, want reason %s", err, tc.wantReason)
				}
				if !strings.Contains(ae.Message, tc.wantInMsg) {
					t.Errorf("message %q does not contain %q", ae.Message, tc.wantInMsg)
				}
			}
		})
	}
}

func TestCaching(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := &fakeAPI{tokens: map[string]string{"good": "alice"}, grants: map[string]bool{"alice get hosts n": true}}
	cs := api.clientset()
	clock := clocktesting.NewFakeClock(time.Now())
	opts := DefaultOptions()
	opts.Clock = clock
	opts.CacheSize = 2
	r := NewReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), opts)
	get := Attributes{Verb: "get", Resource: "hosts", Name: "n"}
	list := Attributes{Verb: "list", Resource: "volumes"}

	steps := []struct {
		desc                  string
		token                 string
		attrs                 Attributes
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
		_, err := r.Authorize(ctx, s.token, s.attrs)
		if (err == nil) != s.wantAllowed {
			t.Errorf("%s: error = %v, want allowed %v", s.desc, err, s.wantAllowed)
		}
		var ae *Error
		if err != nil && errors.As(err, &ae) && (ae.Reason == client.ReasonUnauthorized) == s.wantAuth {
			t.Errorf("%s: reason %s", s.desc, ae.Reason)
		}
		if api.tokenCalls != s.wantTokens || api.sarCalls != s.wantSARs {
			t.Errorf("%s: %d token reviews, %d access reviews; want %d, %d", s.desc, api.tokenCalls, api.sarCalls, s.wantTokens, s.wantSARs)
		}
	}
	if n := len(r.users.Keys()); n > opts.CacheSize {
		t.Errorf("token cache holds %d entries, bound is %d", n, opts.CacheSize)
	}
}

func TestReviewErrorsAreNotCached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := &fakeAPI{tokens: map[string]string{"good": "alice"}, grants: map[string]bool{"alice get hosts n": true}, failReviews: true}
	cs := api.clientset()
	r := NewReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), DefaultOptions())
	attrs := Attributes{Verb: "get", Resource: "hosts", Name: "n"}
	if _, err := r.Authorize(ctx, "good", attrs); err == nil {
		t.Fatal("Authorize succeeded while the API server fails")
	}
	api.failReviews = false
	if _, err := r.Authorize(ctx, "good", attrs); err != nil {
		t.Fatalf("Authorize after recovery: %v", err)
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

func TestAllowAll(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if u, err := (AllowAll{}).Authorize(ctx, "", Attributes{}); err != nil || u.Name == "" {
		t.Errorf("AllowAll = %v, %v", u, err)
	}
}
