// Package cachetrimtest is for tests only: what the cache trims of the
// programs save, measured the same way by each. Only _test.go files import
// it (make verify keeps it, like every package whose name ends in "test",
// out of the binaries); it is exported, beside the mechanism, because the
// benchmarks of the provisioner and the host definer use it.
package cachetrimtest

import "runtime"

// HeapPerObject is the live heap one object takes: the growth of the heap,
// after a GC, while n objects made by newObj (a decoded object, trimmed or
// not) are kept, divided by n.
func HeapPerObject(n int, newObj func() any) float64 {
	objs := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range objs {
		objs[i] = newObj()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(objs)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
