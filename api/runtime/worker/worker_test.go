package worker

import (
	"context"
	"errors"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func TestProcessNextWorkItem(t *testing.T) {
	tests := []struct {
		name         string
		err          error
		wantRequeues int
	}{
		{name: "success is forgotten"},
		{name: "failure is requeued with backoff", err: errors.New("boom"), wantRequeues: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var synced []string
			q := NewQueue("test", func(_ context.Context, key string) error {
				synced = append(synced, key)
				return tc.err
			})
			t.Cleanup(q.ShutDown)
			q.Add("a")
			if !q.ProcessNextWorkItem(ctx) {
				t.Fatal("ProcessNextWorkItem = false, want true")
			}
			if len(synced) != 1 || synced[0] != "a" {
				t.Errorf("synced %q, want [a]", synced)
			}
			if got := q.NumRequeues("a"); got != tc.wantRequeues {
				t.Errorf("requeues = %d, want %d", got, tc.wantRequeues)
			}
		})
	}
}

func TestProcessNextWorkItemAfterShutDown(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	q := NewQueue("test", func(context.Context, string) error { return nil })
	q.ShutDown()
	if q.ProcessNextWorkItem(ctx) {
		t.Error("ProcessNextWorkItem after ShutDown = true, want false")
	}
}

func TestRunWithoutSyncedCaches(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	q := NewQueue("test", func(context.Context, string) error { return nil })
	if err := q.Run(ctx, 1, func() bool { return false }); err == nil {
		t.Error("Run = nil, want an error: the caches never synced")
	}
}
