package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/manager/pkg/client"
)

func wantTooMany(t *testing.T, what string, err error) {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) || ae.Reason != client.ReasonTooManyRequests || ae.RetryAfter <= 0 || ae.Message == "" {
		t.Errorf("%s: %v, want TooManyRequests with a message and RetryAfter", what, err)
	}
}

func TestInFlightPerAddress(t *testing.T) {
	p := NewPerAddress(LimitOptions{MaxInFlight: 2})
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	leave1, err := p.Enter(a)
	if err != nil {
		t.Fatal(err)
	}
	leave2, err := p.Enter(a)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Enter(a)
	wantTooMany(t, "third request from one address", err)
	leaveB, err := p.Enter(b)
	if err != nil {
		t.Errorf("another address is refused: %v", err)
	}
	leave1()
	leave1() // a second call must not free another slot
	leave3, err := p.Enter(a)
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	_, err = p.Enter(a)
	wantTooMany(t, "leave called twice freed two slots", err)
	leave2()
	leave3()
	leaveB()
	if n := len(p.inFlight); n != 0 {
		t.Errorf("%d addresses left in the in-flight table after every request left", n)
	}
}

func TestReviewBuckets(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	p := NewPerAddress(LimitOptions{ReviewQPS: 2, ReviewBurst: 3, MaxAddresses: 4, Clock: clock})
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 3 {
		if err := p.AllowReview(a); err != nil {
			t.Fatalf("review %d within the burst: %v", i, err)
		}
	}
	err := p.AllowReview(a)
	wantTooMany(t, "review past the burst", err)
	var ae *Error
	if errors.As(err, &ae) && ae.RetryAfter > 500*time.Millisecond {
		t.Errorf("RetryAfter = %v, want at most 1/qps", ae.RetryAfter)
	}
	clock.Step(500 * time.Millisecond)
	if err := p.AllowReview(a); err != nil {
		t.Errorf("after 1/qps: %v", err)
	}
	for i := range 10 {
		if err := p.AllowReview(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})); err != nil {
			t.Errorf("a new address is refused: %v", err)
		}
	}
	if n := len(p.buckets.Keys()); n > 4 {
		t.Errorf("bucket table holds %d addresses, bound is 4", n)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, time.Minute: 60} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestNilPerAddressLimitsNothing(t *testing.T) {
	var p *PerAddress
	for i := range 100 {
		if _, err := p.Enter(netip.Addr{}); err != nil {
			t.Fatal(err)
		}
		if err := p.AllowReview(netip.Addr{}); err != nil {
			t.Fatal(fmt.Errorf("review %d: %w", i, err))
		}
	}
}
