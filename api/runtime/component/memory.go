package component

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// EnvMemoryLimit is the environment variable that carries the container's
// memory limit, from the downward API (env valueFrom resourceFieldRef
// limits.memory, a byte count), in every program's manifest.
const EnvMemoryLimit = "MEMORY_LIMIT"

// memoryLimitPercent is the share of the container's memory limit that the
// Go heap is sized to (SizeHeap).
const memoryLimitPercent = 90

// SizeHeap sizes the Go heap to the container: it sets the runtime's soft
// memory limit (debug.SetMemoryLimit, what GOMEMLIMIT sets) to 90% of the
// memory limit in EnvMemoryLimit, so that the garbage collector works
// harder as the process nears its limit rather than letting the kernel kill
// it there. It returns the limit it set, 0 when it set none: when
// EnvMemoryLimit is unset or empty (a process outside a pod), or when
// GOMEMLIMIT is set, which the runtime applied at start and which wins. A
// value that is not a positive quantity is an error.
//
// Why 90% and not GOMEMLIMIT from the downward API, which accepts its byte
// count as it is: the runtime's limit counts only the memory it manages
// (heap, goroutine stacks, its own structures), while the kernel counts
// against the container's limit everything the process's memory cgroup is
// charged with: the binary's pages in memory, page tables, socket buffers,
// and the heap's growth between two collections. With the limit at 100% the
// collector would push back only once the container is already at its
// limit; 10% leaves 25 MiB of room at the manifests' 256 MiB limits (51 MiB
// at the provisioner's 512 MiB), several times what the runtime does not
// count here. Without a memory limit in the pod spec, the downward API
// gives the node's allocatable memory, and 90% of it changes nothing in
// practice.
func SizeHeap(logger klog.Logger) (int64, error) {
	value := os.Getenv(EnvMemoryLimit)
	if value == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes (env valueFrom resourceFieldRef limits.memory)", EnvMemoryLimit, value)
	}
	if gomemlimit := os.Getenv("GOMEMLIMIT"); gomemlimit != "" {
		logger.Info("GOMEMLIMIT is set, not sizing the Go heap to the memory limit", "GOMEMLIMIT", gomemlimit, "memoryLimit", q.Value())
		return 0, nil
	}
	limit := q.Value() / 100 * memoryLimitPercent
	if q.Value() < math.MaxInt64/memoryLimitPercent {
		limit = q.Value() * memoryLimitPercent / 100
	}
	debug.SetMemoryLimit(limit)
	logger.V(2).Info("Sized the Go heap to the container", "memoryLimit", q.Value(), "goMemoryLimit", limit)
	return limit, nil
}
