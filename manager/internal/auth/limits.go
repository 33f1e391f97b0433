package auth

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"hostpath.dev/manager/pkg/client"
)

// LimitOptions bound what one client address may cost the manager.
type LimitOptions struct {
	// MaxInFlight is how many requests one address may have in flight.
	MaxInFlight int
	// ReviewQPS is the rate at which one address may cause TokenReviews
	// (calls whose token is in neither cache).
	ReviewQPS float64
	// ReviewBurst is how many such TokenReviews one address may cause at
	// once.
	ReviewBurst int
	// MaxAddresses bounds the table of token buckets (least recently used
	// addresses are forgotten first).
	MaxAddresses int
	// Clock is for tests; nil means the real clock.
	Clock clock.PassiveClock
}

// DefaultLimitOptions are the flag defaults.
func DefaultLimitOptions() LimitOptions {
	return LimitOptions{MaxInFlight: 32, ReviewQPS: 5, ReviewBurst: 20, MaxAddresses: 4096}
}

// PerAddress keeps the limits of LimitOptions per client address. A nil
// *PerAddress limits nothing. It is safe for concurrent use.
type PerAddress struct {
	opts LimitOptions
	// refill is how long an idle bucket takes to fill up: an entry idle
	// for that long is as good as a new one, so it expires then.
	refill time.Duration

	mu       sync.Mutex
	inFlight map[netip.Addr]int    // only addresses with requests in flight
	buckets  *cache.LRUExpireCache // netip.Addr -> *rate.Limiter
}

// NewPerAddress returns the limits of opts; zero fields take their
// defaults.
func NewPerAddress(opts LimitOptions) *PerAddress {
	def := DefaultLimitOptions()
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = def.MaxInFlight
	}
	if opts.ReviewQPS <= 0 {
		opts.ReviewQPS = def.ReviewQPS
	}
	if opts.ReviewBurst <= 0 {
		opts.ReviewBurst = def.ReviewBurst
	}
	if opts.MaxAddresses <= 0 {
		opts.MaxAddresses = def.MaxAddresses
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &PerAddress{
		opts:     opts,
		refill:   time.Duration(float64(opts.ReviewBurst)/opts.ReviewQPS*float64(time.Second)) + time.Second,
		inFlight: map[netip.Addr]int{},
		buckets:  cache.NewLRUExpireCacheWithClock(opts.MaxAddresses, opts.Clock),
	}
}

// Enter counts a request from addr as in flight until leave is called
// (once; later calls do nothing). Past MaxInFlight it returns an *Error
// with reason TooManyRequests instead. Entries exist only while requests
// are in flight, so the table is bounded by the open connections.
func (p *PerAddress) Enter(addr netip.Addr) (leave func(), err error) {
	if p == nil {
		return func() {}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.inFlight[addr]; n >= p.opts.MaxInFlight {
		return nil, &Error{
			Reason:     client.ReasonTooManyRequests,
			Message:    fmt.Sprintf("address %s has %d requests in flight, the limit; retry later", addrString(addr), n),
			RetryAfter: time.Second,
		}
	}
	p.inFlight[addr]++
	var once sync.Once
	return func() { once.Do(func() { p.leave(addr) }) }, nil
}

func (p *PerAddress) leave(addr netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[addr] <= 1 {
		delete(p.inFlight, addr)
		return
	}
	p.inFlight[addr]--
}

// AllowReview takes a token from addr's bucket for one TokenReview, or
// returns an *Error with reason TooManyRequests saying when the next token
// comes.
func (p *PerAddress) AllowReview(addr netip.Addr) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var lim *rate.Limiter
	if v, ok := p.buckets.Get(addr); ok {
		lim = v.(*rate.Limiter)
	} else {
		lim = rate.NewLimiter(rate.Limit(p.opts.ReviewQPS), p.opts.ReviewBurst)
	}
	// Adding again marks the address as recently used and pushes back the
	// expiry.
	p.buckets.Add(addr, lim, p.refill)
	now := p.opts.Clock.Now()
	if lim.AllowN(now, 1) {
		return nil
	}
	wait := time.Duration((1 - lim.TokensAt(now)) / p.opts.ReviewQPS * float64(time.Second))
	return &Error{
		Reason: client.ReasonTooManyRequests,
		Message: fmt.Sprintf("address %s sent more new tokens than %g per second (burst %d) allow to be reviewed; retry later",
			addrString(addr), p.opts.ReviewQPS, p.opts.ReviewBurst),
		RetryAfter: wait,
	}
}

// RetryAfterSeconds renders d for a Retry-After header: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "(unknown)"
	}
	return a.String()
}
