package app

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/runtime/cachetrim/cachetrimtest"
)

// sizeCases are the big objects of the caches: a worker Node with 30
// images and a manager pod (testdata), as the API server sends them.
var sizeCases = []struct {
	name, file string
	newObj     func() k8sruntime.Object
}{
	{"node", "node.json", func() k8sruntime.Object { return &v1.Node{} }},
	{"pod", "pod.json", func() k8sruntime.Object { return &v1.Pod{} }},
}

// BenchmarkTransform decodes an object and trims it (cacheTrim), as an
// informer does with each object it lists or watches, and reports what one
// object costs: "json-B/whole" and "json-B/trimmed" are the sizes of its
// JSON encoding, "heap-B/whole" and "heap-B/trimmed" the live heap it
// takes once decoded (measured over 500 copies), before and after
// cacheTrim.
// BenchmarkDecode is the decoding alone, for the cost of cacheTrim.
func BenchmarkTransform(b *testing.B) {
	for _, tc := range sizeCases {
		b.Run(tc.name, func(b *testing.B) {
			data := hostpathtest.Testdata(b, tc.file)
			whole := decode(b, data, tc.newObj)
			trimmed, _ := cacheTrim(decode(b, data, tc.newObj))
			metrics := map[string]float64{
				"json-B/whole":   float64(jsonSize(b, whole)),
				"json-B/trimmed": float64(jsonSize(b, trimmed)),
				"heap-B/whole":   heapPerObject(b, data, tc.newObj, false),
				"heap-B/trimmed": heapPerObject(b, data, tc.newObj, true),
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cacheTrim(decode(b, data, tc.newObj)); err != nil {
					b.Fatal(err)
				}
			}
			for unit, v := range metrics {
				b.ReportMetric(v, unit)
			}
		})
	}
}

// BenchmarkDecode decodes an object without trimming it.
func BenchmarkDecode(b *testing.B) {
	for _, tc := range sizeCases {
		b.Run(tc.name, func(b *testing.B) {
			data := hostpathtest.Testdata(b, tc.file)
			b.ReportAllocs()
			for b.Loop() {
				decode(b, data, tc.newObj)
			}
		})
	}
}

// decode returns a new object of newObj holding the JSON data.
func decode(b *testing.B, data []byte, newObj func() k8sruntime.Object) k8sruntime.Object {
	obj := newObj()
	hostpathtest.Decode(b, data, obj)
	return obj
}

func jsonSize(b *testing.B, obj any) int {
	data, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	return len(data)
}

// heapPerObject returns the live heap bytes that one decoded object takes,
// trimmed or not, over 500 kept.
func heapPerObject(b *testing.B, data []byte, newObj func() k8sruntime.Object, trim bool) float64 {
	return cachetrimtest.HeapPerObject(500, func() any {
		obj := any(decode(b, data, newObj))
		if trim {
			obj, _ = cacheTrim(obj)
		}
		return obj
	})
}
