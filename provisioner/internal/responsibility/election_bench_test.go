package responsibility

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkWinner elects the instance for a claim UID among n live instances,
// as every Qualifier and DeletionGuard call of a multihost claim does.
func BenchmarkWinner(b *testing.B) {
	for _, n := range []int{2, 10, 100, 1000} {
		candidates := make([]string, n)
		for i := range candidates {
			candidates[i] = fmt.Sprintf("hostpath-node-%d", i)
		}
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Winner("0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a", candidates)
			}
		})
	}
}

// BenchmarkElected is Winner behind the pod lister: list the instance pods
// of the namespace from the cache, keep the serving ones, sort, elect.
func BenchmarkElected(b *testing.B) {
	for _, n := range []int{2, 10, 100, 1000} {
		var pods []*v1.Pod
		for i := range n {
			pods = append(pods, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("hostpath-node-%d", i), true, false))
		}
		inst := NewPodInstances(podCache(b, pods...), "hostpath-node-0")
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := inst.Elected("0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWeightIsSHA256 pins the weight to the first 8 bytes, big-endian, of
// SHA-256(key NUL candidate): instances of different versions must agree
// on every election, so weight may get faster but never different.
func TestWeightIsSHA256(t *testing.T) {
	long := string(make([]byte, 300))
	for _, tc := range []struct{ key, candidate string }{
		{"", ""},
		{"uid-1", "n1"},
		{"0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a", "hostpath-node-1"},
		{long, "n"},
		{"k", long},
	} {
		sum := sha256.Sum256([]byte(tc.key + "\x00" + tc.candidate))
		if got, want := weight(tc.key, tc.candidate), binary.BigEndian.Uint64(sum[:8]); got != want {
			t.Errorf("weight(%.20q, %.20q) = %d, want %d", tc.key, tc.candidate, got, want)
		}
	}
}
