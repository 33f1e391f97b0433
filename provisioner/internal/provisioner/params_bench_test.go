package provisioner

import (
	"strings"
	"testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// benchPV is a PV name as the library makes them.
const benchPV = "pvc-0f5c3a8e-5d4b-4c3e-9a2f-6b7c8d9e0f1a"

// BenchmarkDirectory expands a pathPattern for one claim, as every
// Provision does: the default pattern, a pattern with literal text, and
// names so long that the result is shortened with a hash.
func BenchmarkDirectory(b *testing.B) {
	for _, tc := range []struct {
		name, pattern, namespace, claim string
	}{
		{"default", DefaultPathPattern, "default", "data"},
		{"literal", "vol-${pv.metadata.name}_of_${pvc.metadata.namespace}.${pvc.metadata.name}", "default", "data"},
		{"shortened", DefaultPathPattern, strings.Repeat("n", 63), strings.Repeat("c", 253)},
	} {
		p := Parameters{Mode: DefaultMode, Pool: hostpathv1.DefaultPool, PathPattern: tc.pattern, DirMode: hostpathv1.DefaultDirMode, VolumeType: DefaultVolumeType}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Directory(tc.namespace, tc.claim, benchPV); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseParameters validates a StorageClass's parameters, as every
// Provision does before it expands the pathPattern.
func BenchmarkParseParameters(b *testing.B) {
	for _, tc := range []struct {
		name   string
		params map[string]string
	}{
		{"defaults", nil},
		{"all", map[string]string{hostpathv1.ParamMode: DefaultMode, hostpathv1.ParamPool: "fast", ParamPathPattern: DefaultPathPattern, hostpathv1.ParamDirMode: "0770", ParamVolumeType: VolumeTypeLocal}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseParameters(tc.params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
