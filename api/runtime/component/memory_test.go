package component

import (
	"runtime/debug"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func TestSizeHeap(t *testing.T) {
	for _, tc := range []struct {
		name, limit, gomemlimit string
		want                    int64
		wantErr                 bool
	}{
		{name: "no limit: nothing set"},
		{name: "a byte count, as the downward API gives it", limit: "536870912", want: 483183820},
		{name: "a quantity", limit: "256Mi", want: 241591910},
		{name: "GOMEMLIMIT wins", limit: "536870912", gomemlimit: "400MiB"},
		{name: "not a quantity", limit: "lots", wantErr: true},
		{name: "zero", limit: "0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			t.Setenv(EnvMemoryLimit, tc.limit)
			t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			before := debug.SetMemoryLimit(-1)
			t.Cleanup(func() { debug.SetMemoryLimit(before) })
			got, err := SizeHeap(logger)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("SizeHeap = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
			now := debug.SetMemoryLimit(-1)
			if tc.want == 0 && now != before || tc.want != 0 && now != tc.want {
				t.Errorf("the runtime's memory limit is %d, want %d (was %d)", now, tc.want, before)
			}
		})
	}
}
