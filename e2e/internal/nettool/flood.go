package nettool

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// FloodOptions configures Flood.
type FloodOptions struct {
	// URL is what to fetch, http or https; each literal "{i}" in it is
	// replaced by the request's index (from 0), modulo Cycle when Cycle > 0.
	URL string
	// Requests is how many requests to send in all.
	Requests int
	// Concurrency is how many requests may be in flight at once.
	Concurrency int
	// QPS caps the request rate of the whole flood; zero means no cap.
	QPS float64
	// TokenFile, when set, is read once and sent as a bearer token.
	TokenFile string
	// JunkTokens sends a different random bearer token with each request.
	JunkTokens bool
	// Cycle, when > 0, makes "{i}" in URL cycle through 0 to Cycle-1.
	Cycle int
	// Insecure skips the verification of the server's certificate.
	Insecure bool
	// CAFile, when set, is the only CA trusted for https URLs.
	CAFile string
	// Timeout bounds each request, body included.
	Timeout time.Duration
}

// Validate reports options that Flood cannot run with.
func (o FloodOptions) Validate() error {
	var errs []error
	if o.Requests < 1 {
		errs = append(errs, errors.New("--requests must be at least 1"))
	}
	if o.Concurrency < 1 {
		errs = append(errs, errors.New("--concurrency must be at least 1"))
	}
	if o.QPS < 0 || math.IsNaN(o.QPS) {
		errs = append(errs, errors.New("--qps must not be negative"))
	}
	if o.Cycle < 0 {
		errs = append(errs, errors.New("--cycle must not be negative"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	if o.TokenFile != "" && o.JunkTokens {
		errs = append(errs, errors.New("--token-file and --junk-tokens exclude each other"))
	}
	if o.CAFile != "" && o.Insecure {
		errs = append(errs, errors.New("--ca-file and --insecure exclude each other"))
	}
	if u, err := url.Parse(o.requestURL(0)); err != nil {
		errs = append(errs, fmt.Errorf("bad URL: %w", err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("bad URL %q: want an http or https URL with a host", o.URL))
	}
	return errors.Join(errs...)
}

// FloodResult is the outcome of Flood, printed as one line of JSON by
// "nettool flood".
type FloodResult struct {
	// Requests is how many requests were sent.
	Requests int `json:"requests"`
	// Statuses counts the requests by HTTP status; 0 counts those that got
	// no complete answer (transport errors and timeouts).
	Statuses map[int]int `json:"statuses"`
	// P50Ms, P99Ms and MaxMs are latency percentiles in milliseconds.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// Seconds is how long the flood took, from its first request.
	Seconds float64 `json:"seconds"`
}

// sample is the outcome of one request.
type sample struct {
	status  int
	latency time.Duration
}

// Flood sends o.Requests GETs to o.URL, at most
// o.Concurrency at once and o.QPS per second, over one client that reuses
// its connections. Non-2xx answers and failed requests are counted, not
// errors: it fails only for invalid options or unreadable files. When ctx
// ends (or o.QPS would make it outlast ctx's deadline) it stops and returns
// what was sent so far, requests cut short counted as status 0, with an
// error.
func Flood(ctx context.Context, o FloodOptions) (FloodResult, error) {
	return flood(ctx, o, nil)
}

// dialFunc is the signature of http.Transport.DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// flood is Flood, connecting with dial when it is set (tests use an
// in-memory network).
func flood(ctx context.Context, o FloodOptions, dial dialFunc) (FloodResult, error) {
	if err := o.Validate(); err != nil {
		return FloodResult{}, err
	}
	auth := func() string { return "" }
	switch {
	case o.TokenFile != "":
		token, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return FloodResult{}, fmt.Errorf("read token file: %w", err)
		}
		header := "Bearer " + strings.TrimSpace(string(token))
		auth = func() string { return header }
	case o.JunkTokens:
		auth = func() string { return "Bearer junk-" + rand.Text() }
	}
	tr, err := newTransport(o.CAFile, o.Insecure)
	if err != nil {
		return FloodResult{}, err
	}
	tr.MaxIdleConnsPerHost = o.Concurrency
	if dial != nil {
		tr.DialContext = dial
	}
	client := &http.Client{Transport: tr, Timeout: o.Timeout}
	defer client.CloseIdleConnections()

	limit := rate.Inf
	if o.QPS > 0 {
		limit = rate.Limit(o.QPS)
	}
	limiter := rate.NewLimiter(limit, 1)
	var (
		next    atomic.Int64
		mu      sync.Mutex
		samples []sample
		stopped error // why a worker stopped early: ctx ended, or would end before its turn
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range min(o.Concurrency, o.Requests) {
		wg.Go(func() {
			var mine []sample
			var err error
			for i := int(next.Add(1) - 1); i < o.Requests; i = int(next.Add(1) - 1) {
				if err = limiter.Wait(ctx); err != nil {
					break
				}
				mine = append(mine, floodOnce(ctx, client, o.requestURL(i), auth()))
			}
			mu.Lock()
			defer mu.Unlock()
			samples = append(samples, mine...)
			if stopped == nil {
				stopped = err
			}
		})
	}
	wg.Wait()
	res := summarize(samples, time.Since(start))
	if stopped == nil {
		stopped = ctx.Err()
	}
	if stopped != nil {
		return res, fmt.Errorf("flood stopped after %d requests: %w", res.Requests, stopped)
	}
	return res, nil
}

// requestURL is the URL of request i.
func (o FloodOptions) requestURL(i int) string {
	if o.Cycle > 0 {
		i %= o.Cycle
	}
	return strings.ReplaceAll(o.URL, "{i}", strconv.Itoa(i))
}

// floodOnce sends one GET, reads and discards the body, and reports the
// status, 0 when no complete answer came.
func floodOnce(ctx context.Context, client *http.Client, target, auth string) sample {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return sample{latency: time.Since(start)}
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		return sample{latency: time.Since(start)}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return sample{latency: time.Since(start)}
	}
	return sample{status: resp.StatusCode, latency: time.Since(start)}
}

// summarize counts the samples by status and computes their latency
// percentiles (nearest rank).
func summarize(samples []sample, took time.Duration) FloodResult {
	res := FloodResult{Requests: len(samples), Statuses: map[int]int{}, Seconds: took.Seconds()}
	if len(samples) == 0 {
		return res
	}
	latencies := make([]time.Duration, len(samples))
	for i, s := range samples {
		res.Statuses[s.status]++
		latencies[i] = s.latency
	}
	slices.Sort(latencies)
	ms := func(p int) float64 {
		rank := (p*len(latencies) + 99) / 100 // ceil(p% of n), at least 1
		return float64(latencies[rank-1]) / float64(time.Millisecond)
	}
	res.P50Ms, res.P99Ms, res.MaxMs = ms(50), ms(99), ms(100)
	return res
}
