package benchfleet

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/tools/internal/benchprovision"
)

// run is a benchprovision.Result of n claims with the given requests.
func run(n int, reqs ...apimetrics.RequestCount) benchprovision.Result {
	return benchprovision.Result{Count: n, AllPVsSeconds: 10, AllBoundSeconds: 20, PVsPerSecond: float64(n) / 10, APIRequests: reqs}
}

func TestWritesPerVolume(t *testing.T) {
	r := run(100,
		apimetrics.RequestCount{Verb: "POST", Resource: "persistentvolumes", Count: 100},
		apimetrics.RequestCount{Verb: "PUT", Resource: "persistentvolumeclaims", Count: 300},
		apimetrics.RequestCount{Verb: "PUT", Resource: "leases", Count: 5000},
		apimetrics.RequestCount{Verb: "GET", Resource: "persistentvolumes", Count: 900},
		apimetrics.RequestCount{Verb: "DELETE", Resource: "persistentvolumes", Count: 100},
		apimetrics.RequestCount{Verb: "POST", Resource: "tokenreviews", Count: 30},
		apimetrics.RequestCount{Verb: "POST", Resource: "subjectaccessreviews", Count: 20},
	)
	if got := ReviewsPerVolume(r); got != 0.5 {
		t.Errorf("reviews per volume = %v, want 0.5", got)
	}
	got, by := WritesPerVolume(r)
	if got != 5 {
		t.Errorf("writes per volume = %v, want 5 (leases, reviews and reads left out)", got)
	}
	want := []string{"PUT persistentvolumeclaims", "DELETE persistentvolumes", "POST persistentvolumes"}
	if len(by) != len(want) {
		t.Fatalf("by resource = %v, want %v", by, want)
	}
	for i, c := range by {
		if c.Verb+" "+c.Resource != want[i] {
			t.Errorf("by resource[%d] = %s %s, want %s", i, c.Verb, c.Resource, want[i])
		}
	}
	if got, _ := WritesPerVolume(benchprovision.Result{}); got != 0 {
		t.Errorf("no claims: %v, want 0", got)
	}
}

func TestReport(t *testing.T) {
	res := Result{
		Instances: []InstanceResult{
			{Instances: 10, Run: run(1000, apimetrics.RequestCount{Verb: "POST", Resource: "events", Count: 4000}, apimetrics.RequestCount{Verb: "PUT", Resource: "leases", Count: 10}, apimetrics.RequestCount{Verb: "DELETE", Resource: "roles", Count: 1}, apimetrics.RequestCount{Verb: "DELETE", Resource: "pods", Count: 1}),
				Footprint: Footprint{Processes: 20, ProvisionerSumMiB: 400, ProvisionerMaxMiB: 41.5, ManagerSumMiB: 200, ManagerMaxMiB: 20.25}},
			{Instances: 100, Run: run(200, apimetrics.RequestCount{Verb: "POST", Resource: "events", Count: 880}, apimetrics.RequestCount{Verb: "PUT", Resource: "leases", Count: 900})},
		},
		Multihost: []MultihostResult{{Endpoints: 10, Latencies: []float64{0.3, 0.1, 0.2}}},
		Backfill:  &BackfillResult{Volumes: 1000, Node: "n9", DirsSeconds: 3.5, ReadySeconds: 4.25, PVsSeconds: 6},
	}
	var buf bytes.Buffer
	if err := Report(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"figure                                   K=10   K=100",
		"claims                                   1000   200",
		"API writes per volume (leases left out)  4.00   4.40",
		"provisioner peak RSS, max (MiB)          41.5   0.0",
		"  K=10: POST events 4.00, others 0.00",
		"writes per volume, K=100 / K=10: 1.10x",
		"10        3       0.200  0.300",
		"== backfill of 1000 multihost volumes onto a new node (n9), from its manager pod Ready ==",
		"every directory on its disk (s)         3.50",
		"every PV lists it (s)                   6.00",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestParseInstances(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []InstanceRun
		err  bool
	}{
		{in: "", want: nil},
		{in: "10:1000,100:200", want: []InstanceRun{{10, 1000}, {100, 200}}},
		{in: "10", err: true},
		{in: "0:5", err: true},
		{in: "5:x", err: true},
		{in: "251:1", err: true},
	} {
		got, err := ParseInstances(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseInstances(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParseInstances(%q) = %v, want %v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseInstances(%q)[%d] = %v, want %v", tc.in, i, got[i], tc.want[i])
			}
		}
	}
}

func TestPeakMiB(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       float64
		err        bool
	}{
		{name: "ok", text: "Name:\tmanager\nVmPeak:\t 1000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t 10240 kB\n", want: 20},
		{name: "missing", text: "Name:\tx\n", err: true},
		{name: "unit", text: "VmHWM:\t 5 MB\n", err: true},
	} {
		f := filepath.Join(dir, tc.name)
		if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := PeakMiB(f)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: PeakMiB = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
	if _, err := PeakMiB("/proc/self/status"); err != nil {
		t.Errorf("this process's status: %v", err)
	}
}
