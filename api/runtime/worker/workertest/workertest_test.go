package workertest

import (
	"slices"
	"testing"

	"k8s.io/client-go/util/workqueue"
)

func TestQueued(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.Add("a")
	if got := Queued(q); !slices.Equal(got, []string{"a", "b"}) || q.Len() != 0 {
		t.Errorf("Queued = %q, then %d left; want [a b], none", got, q.Len())
	}
	q.Add("c")
	if got := Queued(q); !slices.Equal(got, []string{"c"}) {
		t.Errorf("Queued after Done = %q, want [c]", got)
	}
}
