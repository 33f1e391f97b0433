package disk

import "testing"

// BenchmarkValidateVolumeName is the Store's check of every volume name
// (managerapi.ValidateVolumeName, its error turned into a BadRequest).
func BenchmarkValidateVolumeName(b *testing.B) {
	for _, tc := range []struct{ name, volume string }{
		{"valid", "default-data-pvc-0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a"},
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

// BenchmarkValidateOwner is the Store's check of an owner (a PV name).
func BenchmarkValidateOwner(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = validateOwner("pvc-0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a")
	}
}
