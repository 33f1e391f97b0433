package fanout

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"
)

var (
	errTransient = errors.New("transient")
	errPermanent = errors.New("permanent")
)

// behaviour is what a fake node does on its attempts.
type behaviour struct {
	// failFirst fails that many attempts with errTransient.
	failFirst int
	// always fails every attempt with this error.
	always error
	// hang blocks every attempt until its context ends.
	hang bool
}

// fakeNodes calls nodes by their behaviour and counts the calls in flight.
type fakeNodes struct {
	mu       sync.Mutex
	of       map[string]behaviour
	attempts map[string]int
	active   atomic.Int32
	maxSeen  atomic.Int32
	release  chan struct{} // when set, calls wait for it
}

func (f *fakeNodes) call(ctx context.Context, node string) error {
	n := f.active.Add(1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	f.attempts[node]++
	attempt := f.attempts[node]
	b := f.of[node]
	f.mu.Unlock()
	if f.release != nil {
		<-f.release
	}
	if b.hang {
		f.active.Add(-1) // waiting for its context, not working
		<-ctx.Done()
		return ctx.Err()
	}
	defer f.active.Add(-1)
	switch {
	case b.always != nil:
		return b.always
	case attempt <= b.failFirst:
		return errTransient
	}
	return nil
}

// runBubbled runs a fan-out in a synctest bubble on the real clock, whose
// time is the bubble's: it moves on only when every goroutine of the
// fan-out waits (on a timer, or in a call that hangs until its context
// ends), so the durations measured are exactly the waits and time limits
// the fan-out asked for, however slow the machine.
func runBubbled(t *testing.T, f *fakeNodes, nodes []string, opts Options) Results {
	var r Results
	synctest.Test(t, func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		r = Run(ctx, nodes, f.call, opts)
	})
	return r
}

func TestRun(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	retryTransient := func(err error) bool { return errors.Is(err, errTransient) || errors.Is(err, context.DeadlineExceeded) }
	tests := []struct {
		name         string
		of           map[string]behaviour
		attempts     int
		wantErr      map[string]string // node: error substring
		wantAttempts map[string]int
	}{
		{name: "all ok", wantAttempts: map[string]int{"a": 1, "b": 1, "c": 1}},
		{name: "one slow times out on every attempt", of: map[string]behaviour{"b": {hang: true}}, attempts: 2,
			wantErr: map[string]string{"b": `node "b" gave no answer within 10s`}, wantAttempts: map[string]int{"a": 1, "b": 2, "c": 1}},
		{name: "one failing then ok", of: map[string]behaviour{"c": {failFirst: 2}},
			wantAttempts: map[string]int{"a": 1, "b": 1, "c": 3}},
		{name: "one never ok", of: map[string]behaviour{"a": {always: errTransient}},
			wantErr: map[string]string{"a": "transient"}, wantAttempts: map[string]int{"a": 3, "b": 1, "c": 1}},
		{name: "a permanent error is not retried", of: map[string]behaviour{"a": {always: errPermanent}},
			wantErr: map[string]string{"a": "permanent"}, wantAttempts: map[string]int{"a": 1, "b": 1, "c": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeNodes{of: tt.of, attempts: map[string]int{}}
			r := runBubbled(t, f, nodes, Options{Workers: 2, NodeTimeout: 10 * time.Second, Attempts: tt.attempts, Retryable: retryTransient})
			if len(r.Nodes) != len(nodes) {
				t.Fatalf("got %d results, want %d", len(r.Nodes), len(nodes))
			}
			for i, n := range r.Nodes {
				if n.Node != nodes[i] {
					t.Errorf("result %d is of node %q, want %q", i, n.Node, nodes[i])
				}
				want := tt.wantErr[n.Node]
				switch {
				case want == "" && n.Err != nil:
					t.Errorf("node %q: unexpected error %v", n.Node, n.Err)
				case want != "" && (n.Err == nil || !strings.Contains(n.Err.Error(), want)):
					t.Errorf("node %q: error %v, want one containing %q", n.Node, n.Err, want)
				}
				if n.Attempts != tt.wantAttempts[n.Node] {
					t.Errorf("node %q: %d attempts, want %d", n.Node, n.Attempts, tt.wantAttempts[n.Node])
				}
			}
			if len(r.Failed()) != len(tt.wantErr) {
				t.Errorf("failed %v, want %d", r.Failed(), len(tt.wantErr))
			}
		})
	}
}

// Retries wait Backoff, then Factor times longer each time.
func TestRunBacksOff(t *testing.T) {
	f := &fakeNodes{of: map[string]behaviour{"a": {failFirst: 3}}, attempts: map[string]int{}}
	r := runBubbled(t, f, []string{"a"}, Options{Attempts: 4, Backoff: time.Second, Factor: 3, NodeTimeout: time.Hour,
		Retryable: func(err error) bool { return errors.Is(err, errTransient) }})
	if n := r.Nodes[0]; n.Err != nil || n.Attempts != 4 || n.Duration != 13*time.Second {
		t.Errorf("result %+v, want success after 4 attempts and 1s + 3s + 9s of backoff", n)
	}
}

func TestRunBoundsConcurrency(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	nodes := []string{"a", "b", "c", "d", "e", "f", "g"}
	f := &fakeNodes{attempts: map[string]int{}, release: make(chan struct{})}
	done := make(chan Results)
	go func() { done <- Run(ctx, nodes, f.call, Options{Workers: 3}) }()
	for f.active.Load() < 3 {
		runtime.Gosched()
	}
	close(f.release)
	r := <-done
	if got := f.maxSeen.Load(); got != 3 {
		t.Errorf("at most %d calls were in flight, want 3", got)
	}
	if failed := r.Failed(); len(failed) != 0 {
		t.Errorf("failed %v, want none of %v", failed, nodes)
	}
}

func TestRunCancelled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	f := &fakeNodes{attempts: map[string]int{}}
	r := Run(ctx, []string{"a", "b"}, f.call, Options{})
	for _, n := range r.Nodes {
		if n.Err == nil || n.Attempts != 0 {
			t.Errorf("node %q: error %v after %d attempts, want not called", n.Node, n.Err, n.Attempts)
		}
	}
}

func TestMetricsObserve(t *testing.T) {
	m := NewMetrics()
	m.Observe(OperationCreate, Results{Nodes: []Result{{Node: "a"}, {Node: "b", Err: errPermanent}, {Node: "c"}}, Elapsed: time.Second})
	if got := testutil.ToFloat64(m.NodeResults.WithLabelValues(OperationCreate, "ok")); got != 2 {
		t.Errorf("ok results = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.NodeResults.WithLabelValues(OperationCreate, "error")); got != 1 {
		t.Errorf("error results = %v, want 1", got)
	}
	var none *Metrics
	none.Observe(OperationDelete, Results{}) // no panic
}
