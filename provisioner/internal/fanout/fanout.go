// Package fanout calls one function for many nodes in parallel, with a
// bound on the calls in flight, a time limit per attempt, and retries with
// exponential backoff of the errors that may pass, and reports the outcome
// node by node. The provisioner uses it to create and delete the directory
// of a multihost volume on every node's manager.
package fanout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	// DefaultWorkers: the calls go to different hosts and mostly wait, so a
	// fan-out over 100 nodes takes 4 rounds instead of 13 with 8
	// (docs/benchmarks.md, "Multihost fan-out").
	DefaultWorkers       = 32
	DefaultNodeTimeout   = 30 * time.Second
	DefaultAttempts      = 3
	DefaultBackoff       = 500 * time.Millisecond
	DefaultBackoffFactor = 2.0
)

// Options shape a fan-out. Zero fields take their default.
type Options struct {
	// Workers bounds the calls in flight (DefaultWorkers).
	Workers int
	// NodeTimeout bounds one attempt on one node (DefaultNodeTimeout).
	NodeTimeout time.Duration
	// Attempts is how many times a node is tried at most (DefaultAttempts).
	Attempts int
	// Backoff is the wait before the second attempt (DefaultBackoff); each
	// further wait is Factor times longer.
	Backoff time.Duration
	// Factor multiplies the wait between attempts (DefaultBackoffFactor).
	Factor float64
	// Retryable says whether an attempt's error may pass on a new attempt;
	// nil retries nothing.
	Retryable func(error) bool
	// Clock measures durations and times out and spaces attempts
	// (clock.RealClock{} when nil; a fake clock in tests).
	Clock clock.WithTicker
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	if o.Workers < 1 {
		o.Workers = DefaultWorkers
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = DefaultNodeTimeout
	}
	if o.Attempts < 1 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Factor < 1 {
		o.Factor = DefaultBackoffFactor
	}
	if o.Retryable == nil {
		o.Retryable = func(error) bool { return false }
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Result is the outcome of one node.
type Result struct {
	// Node is the node called.
	Node string
	// Err is the error of the last attempt, nil on success.
	Err error
	// Attempts is the number of attempts made.
	Attempts int
	// Duration is the time from the first attempt to the end of the last.
	Duration time.Duration
}

// Results are the outcomes of a fan-out, one per node in the order the
// nodes were given.
type Results struct {
	// Nodes are the per-node results.
	Nodes []Result
	// Elapsed is the time the whole fan-out took.
	Elapsed time.Duration
}

// Failed returns the results of the nodes whose call failed, in order.
func (r Results) Failed() []Result {
	var out []Result
	for _, n := range r.Nodes {
		if n.Err != nil {
			out = append(out, n)
		}
	}
	return out
}

// Run calls call for every node, at most opts.Workers at a time (with
// workqueue.ParallelizeUntil, as the host definer's backfill), and returns
// when every node has its result or ctx is done (the nodes not called then
// fail with ctx's error). Each attempt gets a context that ends after
// opts.NodeTimeout; a failed attempt whose error opts.Retryable accepts is
// tried again after the backoff, up to opts.Attempts times.
func Run(ctx context.Context, nodes []string, call func(ctx context.Context, node string) error, opts Options) Results {
	opts = opts.withDefaults()
	start := opts.Clock.Now()
	results := make([]Result, len(nodes))
	for i, n := range nodes {
		results[i] = Result{Node: n, Err: fmt.Errorf("not called: %w", context.Canceled)}
	}
	// ParallelizeUntil stops handing out pieces once ctx is done: the
	// nodes it skips keep the "not called" error, with ctx's cause.
	workqueue.ParallelizeUntil(ctx, opts.Workers, len(nodes), func(i int) {
		results[i] = runNode(ctx, nodes[i], call, opts)
	})
	if cause := context.Cause(ctx); cause != nil {
		for i := range results {
			if results[i].Attempts == 0 {
				results[i].Err = fmt.Errorf("not called: %w", cause)
			}
		}
	}
	return Results{Nodes: results, Elapsed: opts.Clock.Since(start)}
}

// runNode tries one node until it succeeds, fails for good, runs out of
// attempts or ctx is done.
func runNode(ctx context.Context, node string, call func(context.Context, string) error, opts Options) Result {
	r := Result{Node: node}
	start := opts.Clock.Now()
	backoff := wait.Backoff{Duration: opts.Backoff, Factor: opts.Factor, Steps: opts.Attempts}
	for {
		if err := ctx.Err(); err != nil {
			if r.Err == nil {
				r.Err = fmt.Errorf("not called: %w", context.Cause(ctx))
			}
			break
		}
		r.Attempts++
		r.Err = attempt(ctx, node, call, opts)
		if r.Err == nil || r.Attempts >= opts.Attempts || !opts.Retryable(r.Err) || !sleep(ctx, opts.Clock, backoff.Step()) {
			break
		}
	}
	r.Duration = opts.Clock.Since(start)
	return r
}

// attempt makes one call under the per-node time limit, measured on the
// clock of opts.
func attempt(ctx context.Context, node string, call func(context.Context, string) error, opts Options) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := opts.Clock.NewTimer(opts.NodeTimeout)
	defer timer.Stop()
	go func() {
		select {
		case <-timer.C():
			cancel(fmt.Errorf("%w: node %q gave no answer within %s", context.DeadlineExceeded, node, opts.NodeTimeout))
		case <-ctx.Done():
		}
	}()
	err := call(ctx, node)
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			return fmt.Errorf("%w (%v)", cause, err)
		}
	}
	return err
}

// sleep waits d on clk, and reports false when ctx ends first.
func sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// NodeList names nodes in a message: `node "a"`, or `nodes "a", "b"`.
func NodeList(nodes []string) string {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	if len(nodes) == 1 {
		return "node " + quoted[0]
	}
	return "nodes " + strings.Join(quoted, ", ")
}
