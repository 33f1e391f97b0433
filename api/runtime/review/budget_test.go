package review

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review/reviewtest"
)

func wantTooMany(t *testing.T, what string, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Reason != managerapi.ReasonTooManyRequests || e.RetryAfter <= 0 || e.Message == "" {
		t.Errorf("%s: %v, want TooManyRequests with a message and RetryAfter", what, err)
		return nil
	}
	return e
}

func TestInFlightPerAddress(t *testing.T) {
	b := NewBudget(LimitOptions{MaxInFlight: 2})
	a, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	leave1, err := b.Enter(a)
	if err != nil {
		t.Fatal(err)
	}
	leave2, err := b.Enter(a)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Enter(a)
	wantTooMany(t, "third request from one address", err)
	leaveOther, err := b.Enter(other)
	if err != nil {
		t.Errorf("another address is refused: %v", err)
	}
	leave1()
	leave1() // a second call must not free another slot
	leave3, err := b.Enter(a)
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	_, err = b.Enter(a)
	wantTooMany(t, "leave called twice freed two slots", err)
	leave2()
	leave3()
	leaveOther()
	if n := len(b.inFlight); n != 0 {
		t.Errorf("%d addresses left in the in-flight table after every request left", n)
	}
	if n := testutil.ToFloat64(b.refusals.WithLabelValues(limitInFlight)); n != 2 {
		t.Errorf("in-flight refusals counted %v, want 2", n)
	}
}

// TestLanes walks the budget of one manager whose own namespace is
// hostpath-system, step by step on a fake clock: each step asks for one
// review and says whether it is admitted, in which lane, or over which
// limit.
func TestLanes(t *testing.T) {
	const (
		own      = "system:serviceaccount:hostpath-system:hostpath-provisioner"
		stranger = "system:serviceaccount:tenant:app"
		other    = "system:serviceaccount:tenant:other"
	)
	a1, a2, a3 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	clock := clocktesting.NewFakeClock(time.Now())
	b := NewBudget(LimitOptions{
		PerAddressQPS: 1, PerAddressBurst: 3,
		PerUserQPS: 1, PerUserBurst: 2,
		StrangersQPS: 1, StrangersBurst: 4,
		OwnNamespace: "hostpath-system", DemoteFor: time.Minute, Clock: clock,
	})
	steps := []struct {
		desc      string
		kind      Kind
		addr      netip.Addr
		user      string
		advance   time.Duration
		wantLane  Lane
		wantLimit string // "" means admitted
	}{
		{"a stranger's access review", KindAccess, a1, stranger, 0, LaneStranger, ""},
		{"the same user again", KindAccess, a2, stranger, 0, LaneStranger, ""},
		{"the user's bucket is empty, from any address", KindAccess, a3, stranger, 0, LaneStranger, limitUser},
		{"another stranger user", KindAccess, a3, other, 0, LaneStranger, ""},
		{"a junk token", KindToken, a3, "", 0, LaneStranger, ""},
		{"the strangers' bucket is empty", KindToken, a2, "", 0, LaneStranger, limitStrangers},
		{"an own caller is not held by the strangers", KindToken, a2, own, 0, LaneOwn, ""},
		{"an own caller's access review", KindAccess, a1, own, 0, LaneOwn, ""},
		{"but it keeps its address's limit", KindAccess, a1, own, 0, LaneOwn, ""},
		{"past it", KindAccess, a1, own, 0, LaneOwn, limitAddress},
		{"the buckets refill", KindToken, a1, "", time.Second, LaneStranger, ""},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		lane, err := b.admit(s.kind, s.addr, s.user)
		if lane != s.wantLane {
			t.Errorf("%s: lane %s, want %s", s.desc, lane, s.wantLane)
		}
		if s.wantLimit == "" {
			if err != nil {
				t.Errorf("%s: %v, want admitted", s.desc, err)
			}
			continue
		}
		before := testutil.ToFloat64(b.refusals.WithLabelValues(s.wantLimit))
		_, err = b.admit(s.kind, s.addr, s.user)
		if e := wantTooMany(t, s.desc, err); e != nil && e.RetryAfter > time.Second {
			t.Errorf("%s: RetryAfter %v, want at most the time to the next token (1s)", s.desc, e.RetryAfter)
		}
		if after := testutil.ToFloat64(b.refusals.WithLabelValues(s.wantLimit)); after != before+1 {
			t.Errorf("%s: refusals{limit=%q} went from %v to %v, want one more", s.desc, s.wantLimit, before, after)
		}
	}
	if n := testutil.ToFloat64(b.reviews.WithLabelValues(string(KindAccess), string(LaneOwn))); n != 2 {
		t.Errorf("own access reviews counted %v, want 2", n)
	}
}

// TestForgedClaimDemotes: junk tokens that claim to be an own caller are
// reviewed in the own lane until one is rejected; then their address is a
// stranger's for DemoteFor, and its claims cost the strangers' budget
// (empty here), not the own callers'. A real own caller elsewhere is not
// affected.
func TestForgedClaimDemotes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	clock := clocktesting.NewFakeClock(time.Now())
	budget := NewBudget(LimitOptions{StrangersQPS: 0.001, StrangersBurst: 1, OwnNamespace: reviewtest.Namespace, DemoteFor: time.Minute, Clock: clock})
	api := newAPI()
	provisioner := reviewtest.ServiceAccount("hostpath-provisioner")
	real := reviewtest.JWT(provisioner, "real")
	api.AddToken(real, provisioner, nil)
	r := newReviewerOf(api, Options{Audience: managerapi.TokenAudience, Budget: budget, Clock: clock})
	attacker, node := netip.MustParseAddr("192.0.2.66"), netip.MustParseAddr("192.0.2.10")

	if _, err := r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "forged-1"), Address: attacker}); err == nil {
		t.Fatal("a forged token was accepted")
	}
	if _, err := r.Authenticate(ctx, Caller{Token: "junk", Address: attacker}); err == nil {
		t.Fatal("a junk token was accepted")
	} // takes the strangers' only token
	_, err := r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "forged-2"), Address: attacker})
	wantTooMany(t, "a second forged claim from a demoted address", err)
	if _, err := r.Authenticate(ctx, Caller{Token: real, Address: node}); err != nil {
		t.Errorf("the real provisioner after the attack: %v", err)
	}
	if api.TokenCalls != 3 {
		t.Errorf("%d TokenReviews, want 3 (forged-1, junk, the real one)", api.TokenCalls)
	}
	clock.Step(time.Minute + time.Second)
	_, err = r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "forged-3"), Address: attacker})
	if e, ok := err.(*Error); !ok || e.Reason != managerapi.ReasonUnauthorized || api.TokenCalls != 4 {
		t.Errorf("after DemoteFor: %v after %d TokenReviews; want Unauthorized after a 4th review, in the own lane again (the strangers' bucket is still empty)", err, api.TokenCalls)
	}
}

// TestTablesBounded: many addresses and users leave at most MaxEntries
// buckets each.
func TestTablesBounded(t *testing.T) {
	b := NewBudget(LimitOptions{MaxEntries: 8})
	for i := range 100 {
		_, _ = b.admit(KindAccess, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), fmt.Sprintf("user-%d", i))
	}
	if a, u := len(b.addresses.Keys()), len(b.users.Keys()); a > 8 || u > 8 {
		t.Errorf("%d address and %d user buckets, bound is 8", a, u)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 3 * time.Second: 3} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestNilBudgetLimitsNothing(t *testing.T) {
	var b *Budget
	leave, err := b.Enter(netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	leave()
	for range 100 {
		if _, err := b.admit(KindToken, netip.Addr{}, ""); err != nil {
			t.Fatal(err)
		}
	}
	b.rejected(netip.Addr{}, LaneOwn)
}

// TestForgedClaimsFromManyAddresses: tokens that claim to be an own caller
// from many addresses, each address's first claim (so none is demoted
// yet), cost at most the bucket of claimed own tokens all addresses share;
// the rest get 429 naming that limit. A real own caller keeps working:
// its cached token costs no review, and its rotated token, from an address
// vouched for by the first, is reviewed whatever the bucket holds. A new
// address of a real own caller waits for the bucket, as a forger does;
// strangers keep their own budget.
func TestForgedClaimsFromManyAddresses(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	clock := clocktesting.NewFakeClock(time.Now())
	budget := NewBudget(LimitOptions{OwnTokensQPS: 1, OwnTokensBurst: 3, OwnNamespace: reviewtest.Namespace, Clock: clock})
	api := newAPI()
	provisioner := reviewtest.ServiceAccount("hostpath-provisioner")
	for _, tok := range []string{"real-1", "real-2", "other-node"} {
		api.AddToken(reviewtest.JWT(provisioner, tok), provisioner, nil)
	}
	r := newReviewerOf(api, Options{Audience: managerapi.TokenAudience, Budget: budget, Clock: clock})
	node, otherNode, stranger := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("198.51.100.1")
	attacker := func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
	}
	const forgers = 100

	steps := []struct {
		desc string
		// do authenticates once; forgers sends one forged claim from each
		// of forgers addresses instead.
		do        func() error
		forgers   bool
		advance   time.Duration
		wantErr   string // "" means accepted; else a part of the *Error
		wantCalls int    // TokenReviews the step sends
	}{
		{desc: "the real provisioner, before the flood (vouches for its address)",
			do: func() error {
				return authErr(r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "real-1"), Address: node}))
			}, wantCalls: 1},
		{desc: "forged claims from many addresses", forgers: true,
			wantErr: "new tokens that claim to be a service account of namespace", wantCalls: 2}, // the burst left: 3 - 1
		{desc: "the real provisioner's cached token",
			do: func() error {
				return authErr(r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "real-1"), Address: node}))
			}},
		{desc: "its rotated token, from its vouched address",
			do: func() error {
				return authErr(r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "real-2"), Address: node}))
			}, wantCalls: 1},
		{desc: "a stranger's junk: the strangers' budget",
			do: func() error { return authErr(r.Authenticate(ctx, Caller{Token: "junk", Address: stranger})) }, wantErr: "rejected by TokenReview", wantCalls: 1},
		{desc: "a real own caller from a new address waits for the bucket",
			do: func() error {
				return authErr(r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "other-node"), Address: otherNode}))
			}, wantErr: "from all addresses together (1 reviews per second, burst 3)"},
		{desc: "and gets in once it refills", advance: time.Second,
			do: func() error {
				return authErr(r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, "other-node"), Address: otherNode}))
			}, wantCalls: 1},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		before := api.TokenCalls
		refusedBefore := testutil.ToFloat64(budget.refusals.WithLabelValues(limitOwnTokens))
		if s.forgers {
			refused := 0
			for i := range forgers {
				_, err := r.Authenticate(ctx, Caller{Token: reviewtest.JWT(provisioner, fmt.Sprintf("forged-%d", i)), Address: attacker(i)})
				var e *Error
				switch {
				case !errors.As(err, &e):
					t.Fatalf("%s: forged claim %d: %v, want an *Error", s.desc, i, err)
				case e.Reason == managerapi.ReasonTooManyRequests:
					refused++
					if !strings.Contains(e.Message, s.wantErr) || e.RetryAfter <= 0 || e.RetryAfter > time.Second {
						t.Errorf("%s: refusal %q, Retry-After %v; want it to name %q, within a second", s.desc, e.Message, e.RetryAfter, s.wantErr)
					}
				case e.Reason != managerapi.ReasonUnauthorized:
					t.Errorf("%s: forged claim %d: %v, want Unauthorized or TooManyRequests", s.desc, i, err)
				}
			}
			if want := forgers - s.wantCalls; refused != want {
				t.Errorf("%s: %d refused, want %d", s.desc, refused, want)
			}
			if after := testutil.ToFloat64(budget.refusals.WithLabelValues(limitOwnTokens)); after-refusedBefore != float64(refused) {
				t.Errorf("%s: refusals{limit=%q} went up by %v, want %d", s.desc, limitOwnTokens, after-refusedBefore, refused)
			}
		} else {
			err := s.do()
			if s.wantErr == "" && err != nil || s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
				t.Errorf("%s: %v, want %q", s.desc, err, s.wantErr)
			}
		}
		if got := api.TokenCalls - before; got != s.wantCalls {
			t.Errorf("%s: %d TokenReviews, want %d", s.desc, got, s.wantCalls)
		}
	}
}

// authErr drops Authenticate's user.
func authErr(_ *User, err error) error { return err }
