package review

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
)

// Kind is the kind of a review: KindToken (TokenReview) or KindAccess
// (SubjectAccessReview).
type Kind string

// The kinds of review.
const (
	KindToken  Kind = "token"
	KindAccess Kind = "access"
)

// Lane is whose budget a review takes from: LaneOwn, the program's own
// callers, or LaneStranger, everyone else.
type Lane string

// The lanes.
const (
	LaneOwn      Lane = "own"
	LaneStranger Lane = "stranger"
)

// The limits a review can be refused by, as the refusals metric labels
// them.
const (
	limitInFlight  = "in-flight"
	limitAddress   = "address"
	limitUser      = "user"
	limitStrangers = "strangers"
	limitOwnTokens = "own-tokens"
)

// LimitOptions bound what callers may cost (see the package doc).
type LimitOptions struct {
	// MaxInFlight is how many requests one address may have in flight.
	MaxInFlight int
	// PerAddressQPS and PerAddressBurst bound the reviews (of either
	// kind, in either lane) one address may cause.
	PerAddressQPS   float64
	PerAddressBurst int
	// PerUserQPS and PerUserBurst bound the SubjectAccessReviews one
	// stranger (by user name) may cause, from any address.
	PerUserQPS   float64
	PerUserBurst int
	// StrangersQPS and StrangersBurst bound the reviews all strangers
	// together may cause. Keep them well below the API client's QPS and
	// burst, whose remainder is the own callers' reserve.
	StrangersQPS   float64
	StrangersBurst int
	// OwnTokensQPS and OwnTokensBurst bound the TokenReviews of tokens
	// that claim to be an own caller, not verified yet, from all
	// addresses together (but those vouched for: VouchFor): the claim is
	// read unchecked, so forged claims from many addresses take from this
	// bucket, not from the own callers' reserve.
	OwnTokensQPS   float64
	OwnTokensBurst int
	// VouchFor is how long an address that sent a token of an own caller
	// that TokenReview accepted has its next ones (a rotated token)
	// reviewed without taking from the OwnTokens bucket.
	VouchFor time.Duration
	// OwnNamespace is the namespace whose service accounts are the
	// program's own callers; "" makes every caller a stranger.
	OwnNamespace string
	// DemoteFor is how long an address whose token claimed to be an own
	// caller, and was rejected, counts as a stranger's.
	DemoteFor time.Duration
	// MaxEntries bounds each table (addresses, users, demoted
	// addresses); the least recently used are forgotten first.
	MaxEntries int
	// Clock is for tests; nil means the real clock.
	Clock clock.PassiveClock
}

// DefaultLimitOptions are the flag defaults. The strangers' 5 reviews a
// second (burst 20) leave at least 15 of the manager's default API client
// QPS (20, burst 40) to its own callers, and the 5 a second (burst 40) of
// tokens that claim to be an own caller from addresses not vouched for
// leave at least 10 whatever claims are forged. The burst of claimed own
// tokens is above an address's (20), so that one address's claims cannot
// empty it alone before its first rejection demotes it.
func DefaultLimitOptions() LimitOptions {
	return LimitOptions{
		MaxInFlight:   32,
		PerAddressQPS: 5, PerAddressBurst: 20,
		PerUserQPS: 5, PerUserBurst: 20,
		StrangersQPS: 5, StrangersBurst: 20,
		OwnTokensQPS: 5, OwnTokensBurst: 40,
		DemoteFor:  10 * time.Minute,
		VouchFor:   time.Hour,
		MaxEntries: 4096,
	}
}

// Budget keeps the limits of LimitOptions. A nil *Budget limits nothing.
// It is safe for concurrent use.
type Budget struct {
	opts LimitOptions

	mu        sync.Mutex
	inFlight  map[netip.Addr]int    // only addresses with requests in flight
	addresses *cache.LRUExpireCache // netip.Addr -> *rate.Limiter
	users     *cache.LRUExpireCache // user name -> *rate.Limiter
	demoted   *cache.LRUExpireCache // netip.Addr -> struct{}
	vouched   *cache.LRUExpireCache // netip.Addr -> struct{}
	strangers *rate.Limiter
	ownTokens *rate.Limiter

	reviews  *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

// NewBudget returns the limits of opts; zero fields take their defaults
// (OwnNamespace excepted).
func NewBudget(opts LimitOptions) *Budget {
	def := DefaultLimitOptions()
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = def.MaxInFlight
	}
	if opts.PerAddressQPS <= 0 || opts.PerAddressBurst <= 0 {
		opts.PerAddressQPS, opts.PerAddressBurst = def.PerAddressQPS, def.PerAddressBurst
	}
	if opts.PerUserQPS <= 0 || opts.PerUserBurst <= 0 {
		opts.PerUserQPS, opts.PerUserBurst = def.PerUserQPS, def.PerUserBurst
	}
	if opts.StrangersQPS <= 0 || opts.StrangersBurst <= 0 {
		opts.StrangersQPS, opts.StrangersBurst = def.StrangersQPS, def.StrangersBurst
	}
	if opts.OwnTokensQPS <= 0 || opts.OwnTokensBurst <= 0 {
		opts.OwnTokensQPS, opts.OwnTokensBurst = def.OwnTokensQPS, def.OwnTokensBurst
	}
	if opts.DemoteFor <= 0 {
		opts.DemoteFor = def.DemoteFor
	}
	if opts.VouchFor <= 0 {
		opts.VouchFor = def.VouchFor
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = def.MaxEntries
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Budget{
		opts:      opts,
		inFlight:  map[netip.Addr]int{},
		addresses: cache.NewLRUExpireCacheWithClock(opts.MaxEntries, opts.Clock),
		users:     cache.NewLRUExpireCacheWithClock(opts.MaxEntries, opts.Clock),
		demoted:   cache.NewLRUExpireCacheWithClock(opts.MaxEntries, opts.Clock),
		vouched:   cache.NewLRUExpireCacheWithClock(opts.MaxEntries, opts.Clock),
		strangers: rate.NewLimiter(rate.Limit(opts.StrangersQPS), opts.StrangersBurst),
		ownTokens: rate.NewLimiter(rate.Limit(opts.OwnTokensQPS), opts.OwnTokensBurst),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostpath_reviews_total",
			Help: "TokenReviews (kind token) and SubjectAccessReviews (kind access) sent to the API server, by the lane whose budget they took (own: the program's own service accounts; stranger: everyone else).",
		}, []string{"kind", "lane"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostpath_review_refusals_total",
			Help: "Calls answered 429 by the limit they were over: in-flight (requests of one address), address (reviews of one address), user (reviews of one stranger), strangers (reviews of all strangers), own-tokens (reviews of tokens that claim to be an own caller, from all addresses not vouched for).",
		}, []string{"limit"}),
	}
}

// Collectors returns the Budget's metrics: hostpath_reviews_total{kind,
// lane} and hostpath_review_refusals_total{limit}, a handful of series
// each.
func (b *Budget) Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.reviews, b.refusals}
}

// Enter counts a request from addr as in flight until leave is called
// (once; later calls do nothing). Past MaxInFlight it returns an *Error
// with reason TooManyRequests instead. Entries exist only while requests
// are in flight, so the table is bounded by the open connections.
func (b *Budget) Enter(addr netip.Addr) (leave func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.inFlight[addr]; n >= b.opts.MaxInFlight {
		b.refusals.WithLabelValues(limitInFlight).Inc()
		return nil, &Error{
			Reason:     managerapi.ReasonTooManyRequests,
			Message:    fmt.Sprintf("address %s has %d requests in flight, the limit; retry later", addrString(addr), n),
			RetryAfter: time.Second,
		}
	}
	b.inFlight[addr]++
	var once sync.Once
	return func() { once.Do(func() { b.leave(addr) }) }, nil
}

func (b *Budget) leave(addr netip.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight[addr] <= 1 {
		delete(b.inFlight, addr)
		return
	}
	b.inFlight[addr]--
}

// lane returns the lane of a review of kind for user (for a TokenReview,
// the user the token claims) from addr.
func (b *Budget) lane(kind Kind, addr netip.Addr, user string) Lane {
	ns, _, ok := ServiceAccountOf(user)
	if !ok || b.opts.OwnNamespace == "" || ns != b.opts.OwnNamespace {
		return LaneStranger
	}
	if _, demoted := b.demoted.Get(addr); demoted && kind == KindToken {
		return LaneStranger
	}
	return LaneOwn
}

// bucket is one token bucket a review takes from, and the limit it is.
type bucket struct {
	lim   *rate.Limiter
	limit string
}

// describe says, for a refusal, whose limit is the bucket's: the address's,
// the user's or the strangers'.
func (b *Budget) describe(limit string, addr netip.Addr, user string) string {
	switch limit {
	case limitAddress:
		return fmt.Sprintf("address %s (%g reviews per second, burst %d)", addrString(addr), b.opts.PerAddressQPS, b.opts.PerAddressBurst)
	case limitUser:
		return fmt.Sprintf("user %q (%g access reviews per second, burst %d)", user, b.opts.PerUserQPS, b.opts.PerUserBurst)
	case limitOwnTokens:
		return fmt.Sprintf("new tokens that claim to be a service account of namespace %q, from all addresses together (%g reviews per second, burst %d)",
			b.opts.OwnNamespace, b.opts.OwnTokensQPS, b.opts.OwnTokensBurst)
	}
	return fmt.Sprintf("callers from outside namespace %q together (%g reviews per second, burst %d)", b.opts.OwnNamespace, b.opts.StrangersQPS, b.opts.StrangersBurst)
}

// admit takes what one review of kind, for user (claimed, for a
// TokenReview), from addr costs, and returns its lane; or an *Error with
// reason TooManyRequests saying which limit it is over and when to come
// back, taking nothing. A TokenReview in the own lane also takes from the
// bucket all addresses share for claimed own tokens, unless addr is
// vouched for (accepted): its claim is not verified yet.
func (b *Budget) admit(kind Kind, addr netip.Addr, user string) (Lane, *Error) {
	if b == nil {
		return LaneStranger, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	lane := b.lane(kind, addr, user)
	buckets := []bucket{{b.limiter(b.addresses, addr, b.opts.PerAddressQPS, b.opts.PerAddressBurst), limitAddress}}
	if lane == LaneStranger {
		if kind == KindAccess {
			buckets = append(buckets, bucket{b.limiter(b.users, user, b.opts.PerUserQPS, b.opts.PerUserBurst), limitUser})
		}
		buckets = append(buckets, bucket{b.strangers, limitStrangers})
	}
	if lane == LaneOwn && kind == KindToken {
		if _, vouched := b.vouched.Get(addr); !vouched {
			buckets = append(buckets, bucket{b.ownTokens, limitOwnTokens})
		}
	}
	now := b.opts.Clock.Now()
	for _, bk := range buckets {
		if tokens := bk.lim.TokensAt(now); tokens < 1 {
			b.refusals.WithLabelValues(bk.limit).Inc()
			wait := time.Duration((1 - tokens) / float64(bk.lim.Limit()) * float64(time.Second))
			return lane, &Error{
				Reason:     managerapi.ReasonTooManyRequests,
				Message:    fmt.Sprintf("too many new tokens or calls to review: over the limit of %s; retry later", b.describe(bk.limit, addr, user)),
				RetryAfter: wait,
			}
		}
	}
	for _, bk := range buckets {
		bk.lim.AllowN(now, 1)
	}
	b.reviews.WithLabelValues(string(kind), string(lane)).Inc()
	return lane, nil
}

// limiter returns key's bucket in table, made when missing; adding it again
// marks it recently used and pushes back its expiry to when it would be
// full again (an idle bucket that full is as good as a new one).
func (b *Budget) limiter(table *cache.LRUExpireCache, key any, qps float64, burst int) *rate.Limiter {
	var lim *rate.Limiter
	if v, ok := table.Get(key); ok {
		lim = v.(*rate.Limiter)
	} else {
		lim = rate.NewLimiter(rate.Limit(qps), burst)
	}
	table.Add(key, lim, time.Duration(float64(burst)/qps*float64(time.Second))+time.Second)
	return lim
}

// rejected notes that the token addr sent in lane was rejected: when it
// claimed to be an own caller, addr is a stranger's for DemoteFor, and no
// longer vouched for.
func (b *Budget) rejected(addr netip.Addr, lane Lane) {
	if b == nil || lane != LaneOwn {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.vouched.Remove(addr)
	b.demoted.Add(addr, struct{}{}, b.opts.DemoteFor)
}

// accepted notes that TokenReview accepted, as user, the token addr sent
// in lane: when it claimed to be an own caller and is one, addr is vouched
// for, for VouchFor, and its next own tokens (the same caller's, rotated)
// do not take from the bucket of claimed own tokens. Only a real token of
// an own caller vouches for an address, so forged claims from many
// addresses cannot.
func (b *Budget) accepted(addr netip.Addr, lane Lane, user string) {
	if b == nil || lane != LaneOwn {
		return
	}
	if ns, _, ok := ServiceAccountOf(user); !ok || ns != b.opts.OwnNamespace {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.vouched.Add(addr, struct{}{}, b.opts.VouchFor)
}

// maxClaimedToken bounds the tokens whose claims are read: a service
// account token is about 1 KB.
const maxClaimedToken = 16 << 10

// claimedUser is the user a JWT says it is ("sub"), unverified: "" when the
// token is not a JWT. It only picks a lane; TokenReview decides who the
// caller is.
func claimedUser(token string) string {
	if len(token) > maxClaimedToken {
		return ""
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Sub
}

// RetryAfterSeconds renders d for a Retry-After header: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
