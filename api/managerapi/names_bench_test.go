package managerapi

import (
	"strings"
	"testing"
)

// BenchmarkValidateVolumeName checks the names the manager gets: the
// default pathPattern's (namespace-claim-pv), the longest allowed, and a
// bad one (whose error message is built).
func BenchmarkValidateVolumeName(b *testing.B) {
	for _, tc := range []struct{ name, volume string }{
		{"default", "default-data-pvc-0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a"},
		{"max", strings.Repeat("a", MaxVolumeNameLength)},
		{"invalid", "../etc"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = ValidateVolumeName(tc.volume)
			}
		})
	}
}

// BenchmarkValidatePoolName checks a pool name, as every pool route does.
func BenchmarkValidatePoolName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = ValidatePoolName("default")
	}
}

// BenchmarkValidateOwner checks a PersistentVolume name, as every create,
// owner change and delete does.
func BenchmarkValidateOwner(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = ValidateOwner("pvc-0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a")
	}
}
