package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/api/runtime/review/reviewtest"
	"hostpath.dev/manager/internal/auth"
)

// TestScope: reads need the route's permission alone; a write is held to
// what its token is bound to (the package doc's steps 1 to 4). The callers
// and tokens are reviewtest.NewCallers'.
func TestScope(t *testing.T) {
	poolUpdate := auth.Attributes{Verb: "update", Resource: managerapi.ResourcePools, Name: "default"}
	for _, tc := range []struct {
		desc  string
		token string
		attrs auth.Attributes
		// wantRemote is the decision's Remote; wantReason the refusal's
		// ("" when allowed), whose message has wantInMsg.
		wantRemote string
		wantReason managerapi.Reason
		wantInMsg  []string
	}{
		{desc: "same-node write", token: "prov-a", attrs: volumes("delete", "default")},
		{desc: "same-node write without the multihost permission", token: "client-a", attrs: volumes("delete", "default")},
		{desc: "cross-node write without the multihost permission", token: "client-b", attrs: volumes("delete", "default"),
			wantReason: managerapi.ReasonForbidden,
			wantInMsg: []string{`pod "client-b" on node "node-b"`, `calls node "node-a"'s manager`, "only through its own manager",
				"cannot delete pools/multihostvolumes", "resources [pools/multihostvolumes]", managerapi.ClientClusterRole}},
		{desc: "cross-node create without the multihost permission", token: "client-b", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{`"node-b"`, `"node-a"`, "create pools/multihostvolumes"}},
		{desc: "cross-node write with the multihost permission is held to multihost volumes", token: "prov-b", attrs: volumes("delete", "default"),
			wantRemote: reviewtest.OtherNode},
		{desc: "cross-node resize with the multihost permission", token: "prov-b", attrs: volumes("resize", "default"), wantRemote: reviewtest.OtherNode},
		{desc: "host definer cannot resize", token: "definer-b", attrs: volumes("resize", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{"cannot resize pools/volumes"}},
		{desc: "the pod's node when the token names none", token: "prov-b-without-node", attrs: volumes("create", "default"), wantRemote: reviewtest.OtherNode},
		{desc: "a token bound to a Node", token: "node-b", attrs: volumes("create", "default"), wantRemote: reviewtest.OtherNode},
		{desc: "cross-node read", token: "client-b", attrs: volumes("list", "default")},
		{desc: "host definer creates a multihost volume off its node", token: "definer-b", attrs: volumes("create", "default"), wantRemote: reviewtest.OtherNode},
		{desc: "host definer adopts off its node", token: "definer-b", attrs: volumes("update", "default"), wantRemote: reviewtest.OtherNode},
		{desc: "host definer prepares a pool off its node", token: "definer-b", attrs: poolUpdate},
		{desc: "host definer cannot delete", token: "definer-b", attrs: volumes("delete", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{"cannot delete pools/volumes"}},
		{desc: "unbound read", token: "client-unbound", attrs: volumes("list", "default")},
		{desc: "reader reads", token: "reader-unbound", attrs: volumes("get", "default")},
		{desc: "reader cannot write", token: "reader-unbound", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{"cannot create pools/volumes"}},
		{desc: "unbound write without the admin permission", token: "client-unbound", attrs: volumes("delete", "default"),
			wantReason: managerapi.ReasonForbidden,
			wantInMsg:  []string{"bound to no pod", "--bound-object-kind", `cannot delete hosts/admin in API group "hostpath.dev" (name "node-a")`, managerapi.AdminClusterRole}},
		{desc: "unbound pool preparation without the admin permission", token: "client-unbound", attrs: poolUpdate,
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{"cannot update hosts/admin"}},
		{desc: "unbound write with the admin permission", token: "admin-unbound", attrs: volumes("delete", "default")},
		{desc: "a pod that no longer exists", token: "prov-gone", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{`pod "prov-old"`, "no longer exists"}},
		{desc: "a pod of the same name but another UID", token: "prov-recreated", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{"another one now", "uid-of-an-earlier-prov-a"}},
		{desc: "a pod that finished", token: "prov-done", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{"finished"}},
		{desc: "a pod on another node than the token says", token: "prov-on-wrong-node", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{`on node "node-b", not on the token's`}},
		{desc: "a pod of another service account", token: "prov-in-strangers-pod", attrs: volumes("create", "default"),
			wantReason: managerapi.ReasonForbidden, wantInMsg: []string{`service account "other"`}},
		{desc: "a gone pod's token still reads", token: "prov-gone", attrs: volumes("list", "default")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api := reviewtest.NewCallers()
			d, err := reviewerOf(api, auth.DefaultOptions()).Authorize(ctx, review.Caller{Token: tc.token}, tc.attrs)
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("Authorize = %v, want allowed", err)
				}
				if d.Remote != tc.wantRemote {
					t.Errorf("Remote = %q, want %q", d.Remote, tc.wantRemote)
				}
				return
			}
			var ae *review.Error
			if !errors.As(err, &ae) || ae.Reason != tc.wantReason {
				t.Fatalf("Authorize = %+v, %v; want reason %s", d, err, tc.wantReason)
			}
			for _, want := range tc.wantInMsg {
				if !strings.Contains(ae.Message, want) {
					t.Errorf("message %q does not contain %q", ae.Message, want)
				}
			}
		})
	}
}

// TestPodCache: a write's pod GET is cached for PodTTL, reads make none,
// and a pod deleted meanwhile is refused once the entry expires, although
// its token is still in the accepted-token cache.
func TestPodCache(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	api := reviewtest.NewCallers()
	clock := clocktesting.NewFakeClock(time.Now())
	opts := auth.DefaultOptions()
	opts.Clock = clock
	r, cs := newReviewer(api, opts)
	steps := []struct {
		desc       string
		attrs      auth.Attributes
		advance    time.Duration
		deletePod  bool
		wantReason managerapi.Reason
		wantGETs   int
	}{
		{desc: "a read makes no GET", attrs: volumes("list", "default"), wantGETs: 0},
		{desc: "the first write GETs the pod", attrs: volumes("create", "default"), wantGETs: 1},
		{desc: "the next write is cached", attrs: volumes("delete", "default"), wantGETs: 1},
		{desc: "the pod is deleted: cached for PodTTL", attrs: volumes("create", "default"), deletePod: true, wantGETs: 1},
		{desc: "then refused", attrs: volumes("create", "default"), advance: opts.PodTTL + time.Second, wantReason: managerapi.ReasonForbidden, wantGETs: 2},
		{desc: "refused from the cache", attrs: volumes("create", "default"), wantReason: managerapi.ReasonForbidden, wantGETs: 2},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		if s.deletePod {
			if err := cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), reviewtest.Namespace, "prov-a"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := r.Authorize(ctx, review.Caller{Token: "prov-a"}, s.attrs)
		checkReason(t, s.desc, err, s.wantReason)
		if api.PodCalls != s.wantGETs {
			t.Errorf("%s: %d pod GETs, want %d", s.desc, api.PodCalls, s.wantGETs)
		}
	}
	if api.TokenCalls != 1 {
		t.Errorf("%d TokenReviews, want 1 (the token stayed cached)", api.TokenCalls)
	}
}
