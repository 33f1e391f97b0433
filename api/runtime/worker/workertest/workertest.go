// Package workertest helps the tests of the controllers that run a
// worker.Queue: it takes out what their event handlers queued.
package workertest

import "k8s.io/client-go/util/workqueue"

// Queued takes every key out of q (those added without a delay), each
// Done and forgotten, in the order taken.
func Queued[T comparable](q workqueue.TypedRateLimitingInterface[T]) []T {
	var keys []T
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		q.Forget(k)
		keys = append(keys, k)
	}
	return keys
}
