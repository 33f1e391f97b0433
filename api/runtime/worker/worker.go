// Package worker runs the workers of a typed, rate-limited workqueue in the
// shape of Kubernetes' sample-controller: event handlers add keys, workers
// take one key at a time and sync it from the listers, a failed sync is
// retried with backoff and a successful one is forgotten. The provisioner's
// reclaim controller and claim sync, and the host definer's controller,
// share it.
package worker

import (
	"context"
	"fmt"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Queue is a rate-limited workqueue of keys with the function that syncs one
// key. Its embedded queue takes the keys (Add) and tells the retries
// (NumRequeues).
type Queue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	name string
	sync func(context.Context, T) error
}

// NewQueue returns a Queue named name (in logs and workqueue metrics) whose
// workers call sync, with client-go's default controller rate limiter.
func NewQueue[T comparable](name string, sync func(context.Context, T) error) *Queue[T] {
	return &Queue[T]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[T](),
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name}),
		name: name,
		sync: sync,
	}
}

// Run waits for the caches of synced, then syncs keys with workers
// goroutines until ctx is done, and shuts the queue down.
func (q *Queue[T]) Run(ctx context.Context, workers int, synced ...cache.InformerSynced) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer q.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting the workers", "queue", q.name, "workers", workers)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return fmt.Errorf("%s: wait for the informer caches: %w", q.name, context.Cause(ctx))
	}
	for range workers {
		go wait.UntilWithContext(ctx, q.runWorker, time.Second)
	}
	<-ctx.Done()
	logger.Info("Stopped the workers", "queue", q.name)
	return nil
}

// runWorker processes queued keys until the queue shuts down.
func (q *Queue[T]) runWorker(ctx context.Context) {
	for q.ProcessNextWorkItem(ctx) {
	}
}

// ProcessNextWorkItem syncs one queued key, requeuing it with backoff when
// the sync fails and forgetting its retries when it succeeds. It returns
// false once the queue has shut down.
func (q *Queue[T]) ProcessNextWorkItem(ctx context.Context) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if err := q.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to sync, will retry", "queue", q.name, "key", key)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}
