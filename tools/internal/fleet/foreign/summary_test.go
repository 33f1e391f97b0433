package foreign

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"hostpath.dev/tools/internal/fleet"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// usages is one fleet.NodeUsage per node: node, PID, RSS, CPU, repeated.
func usages(v ...any) []fleet.NodeUsage {
	var out []fleet.NodeUsage
	for i := 0; i+3 < len(v); i += 4 {
		out = append(out, fleet.NodeUsage{Node: v[i].(string), Usage: fleet.Usage{PID: v[i+1].(int), RSSMiB: v[i+2].(float64), CPUSeconds: v[i+3].(float64)}})
	}
	return out
}

// withAnon sets the anonymous memory of us, in order.
func withAnon(us []fleet.NodeUsage, anon ...float64) []fleet.NodeUsage {
	for i := range us {
		us[i].AnonMiB = anon[i]
	}
	return us
}

// fixture is a run of 10,000 claims over 4 instances: f4 grows and works
// the most; r2's provisioner restarts after the idle reading and r1's is
// not found at the deleted one.
func fixture() Result {
	return Result{
		Date: t0, Provisioner: Provisioner, Claims: 10000, Instances: 4, SettleSeconds: 30,
		RealNodes: []string{"r1", "r2"}, CreateSeconds: 80, AnnotateSeconds: 99.5, DeleteSeconds: 60,
		NodeUpdates: 4, NodeWatch: &WatchCounts{Events: 18, Bytes: 6 << 10},
		Before: Reading{At: t0.Add(-time.Minute), Real: withAnon(usages("r1", 100, 40.0, 1.0, "r2", 200, 50.0, 2.0), 10, 12)},
		Up: Reading{At: t0, Real: usages("r1", 100, 43.0, 1.5),
			Fleet: usages("f1", 11, 29.0, 10.0, "f2", 12, 30.0, 10.0, "f3", 13, 31.0, 10.0, "f4", 14, 32.0, 10.0)},
		Idle: Reading{At: t0.Add(30 * time.Second), Real: withAnon(usages("r1", 100, 44.0, 2.0, "r2", 200, 52.0, 3.0), 11, 12.5),
			Fleet: usages("f1", 11, 30.0, 10.3, "f2", 12, 31.0, 10.6, "f3", 13, 32.0, 10.3, "f4", 14, 33.0, 10.3),
			Watch: &WatchCounts{Events: 1000, Bytes: 1 << 20}},
		Annotated: Reading{At: t0.Add(130 * time.Second),
			Fleet: usages("f1", 11, 40.0, 15.3, "f2", 12, 40.0, 16.6, "f3", 13, 40.0, 14.3, "f4", 14, 40.0, 20.3),
			Watch: &WatchCounts{Events: 2_001_000, Bytes: 2001 << 20}},
		WithClaims: Reading{At: t0.Add(160 * time.Second), Real: withAnon(usages("r1", 100, 44.25, 3.0, "r2", 201, 60.0, 1.0), 10.5, 20),
			Fleet: usages("f1", 11, 30.5, 15.4, "f2", 12, 31.25, 16.7, "f3", 13, 32.125, 14.4, "f4", 14, 34.0, 20.4),
			Watch: &WatchCounts{Events: 2_002_000, Bytes: 2002 << 20}},
		Deleted: Reading{At: t0.Add(300 * time.Second), Real: usages("r2", 201, 55.0, 2.0),
			Fleet: usages("f1", 11, 30.5, 16.0, "f2", 12, 31.0, 17.0, "f3", 13, 32.0, 15.0, "f4", 14, 33.5, 21.0),
			Watch: &WatchCounts{Events: 3_002_000, Bytes: 2502 << 20}},
	}
}

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{3}, Spread{N: 1, Min: 3, Median: 3, Max: 3}},
		{[]float64{3, 1, 2}, Spread{N: 3, Min: 1, Median: 2, Max: 3}},
		{[]float64{4, 1, 3, 2}, Spread{N: 4, Min: 1, Median: 2.5, Max: 4}},
		{[]float64{-1, 5}, Spread{N: 2, Min: -1, Median: 2, Max: 5}},
	} {
		in := append([]float64(nil), tc.in...)
		if got := spreadOf(tc.in); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.in) {
			t.Errorf("spreadOf sorted its input %v", tc.in)
		}
	}
}

// near compares spreads to 1e-9.
func near(a, b Spread) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.N == b.N && eq(a.Min, b.Min) && eq(a.Median, b.Median) && eq(a.Max, b.Max)
}

func TestSummarize(t *testing.T) {
	full := fixture()
	afterIdle := fixture()
	afterIdle.Annotated, afterIdle.WithClaims, afterIdle.Deleted = Reading{}, Reading{}, Reading{}
	noWatch := fixture()
	noWatch.Idle.Watch = nil
	restarted := fixture()
	restarted.WithClaims.Fleet[3].PID = 99
	for _, tc := range []struct {
		name  string
		res   Result
		check func(t *testing.T, s Summary)
	}{
		{"full", full, func(t *testing.T, s Summary) {
			for _, c := range []struct {
				name      string
				got, want Spread
			}{
				{"idle", s.IdleMiB, Spread{4, 30, 31.5, 33}},
				{"claims", s.ClaimsMiB, Spread{4, 30.5, 31.6875, 34}},
				{"deleted", s.DeletedMiB, Spread{4, 30.5, 31.5, 33.5}},
				{"growth", s.GrowthMiBPer1000, Spread{4, 0.0125, 0.0375, 0.1}},
				{"cpu", s.CPUSeconds, Spread{4, 4, 5.5, 10}},
				{"idle cpu", s.IdleCPUSeconds, Spread{4, 1, 1, 2}},
				{"net cpu", s.NetCPUSecondsPer1000, Spread{4, 0.3, 0.4, 0.9}},
				{"per node", s.PerNodeMiBPer100, Spread{2, 50, 75, 100}},
				{"per node, anonymous", s.PerNodeAnonMiBPer100, Spread{2, 12.5, 18.75, 25}},
			} {
				if !near(c.got, c.want) {
					t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
				}
			}
			if s.WindowSeconds != 100 {
				t.Errorf("window %v s, want 100", s.WindowSeconds)
			}
			want := []NodeCost{
				{Node: "r1", PID: 100, BeforeMiB: 40, IdleMiB: 44, ClaimsMiB: 44.25, MiBPer100Nodes: 100, BeforeAnonMiB: 10, IdleAnonMiB: 11, ClaimsAnonMiB: 10.5, AnonMiBPer100Nodes: 25},
				{Node: "r2", PID: 200, BeforeMiB: 50, IdleMiB: 52, MiBPer100Nodes: 50, BeforeAnonMiB: 12, IdleAnonMiB: 12.5, AnonMiBPer100Nodes: 12.5},
			}
			if !reflect.DeepEqual(s.Real, want) {
				t.Errorf("real nodes %+v, want %+v", s.Real, want)
			}
			if len(s.Notes) != 3 || !strings.Contains(s.Notes[0], "r1: its provisioner was not read at the deleted reading") ||
				!strings.Contains(s.Notes[1], "r2: its provisioner is PID 201 at the claims reading, 200 before") {
				t.Errorf("notes %q", s.Notes)
			}
			if *s.CreateWatch != (WatchCounts{Events: 2_000_000, Bytes: 2000 << 20}) || *s.DeleteWatch != (WatchCounts{Events: 1_000_000, Bytes: 500 << 20}) {
				t.Errorf("watch %+v, %+v", s.CreateWatch, s.DeleteWatch)
			}
		}},
		{"failed after idle", afterIdle, func(t *testing.T, s Summary) {
			if s.IdleMiB.N != 4 || s.ClaimsMiB.N != 0 || s.CPUSeconds.N != 0 || s.WindowSeconds != 0 || s.CreateWatch != nil {
				t.Errorf("summary %+v", s)
			}
			if s.PerNodeMiBPer100.N != 2 || len(s.Notes) != 0 {
				t.Errorf("per node %+v, notes %q", s.PerNodeMiBPer100, s.Notes)
			}
		}},
		{"failed at once", Result{Claims: 10, Instances: 2}, func(t *testing.T, s Summary) {
			if !reflect.DeepEqual(s, Summary{}) {
				t.Errorf("summary %+v, want none", s)
			}
		}},
		{"watch not read", noWatch, func(t *testing.T, s Summary) {
			if s.CreateWatch != nil || s.DeleteWatch == nil {
				t.Errorf("watch %+v, %+v", s.CreateWatch, s.DeleteWatch)
			}
		}},
		{"another process", restarted, func(t *testing.T, s Summary) {
			if s.ClaimsMiB.N != 3 || s.GrowthMiBPer1000.N != 3 || s.CPUSeconds.N != 4 {
				t.Errorf("claims %+v, growth %+v, cpu %+v", s.ClaimsMiB, s.GrowthMiBPer1000, s.CPUSeconds)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Summarize(tc.res)) })
	}
}

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  Result
		want []string
	}{
		{"full", fixture(), []string{
			"== 10000 claims of another provisioner (foreign.bench.example) over 4 provisioner instances on fake nodes ==",
			"claims created in 80.0s, all annotated 99.5s after the first create; the namespace and its claims gone 60.0s after its deletion; the idle, claims and deleted readings 30.0s after their step",
			"fleet provisioners, per instance               min    median  max",
			"RSS idle, fleet of 4 (MiB)                     30.0   31.5    33.0",
			"RSS growth per 1,000 claims (MiB)              0.013  0.038   0.100",
			"CPU while created and annotated, 100.0s (s)    4.00   5.50    10.00",
			"CPU per 1,000 claims, idle rate taken off (s)  0.300  0.400   0.900",
			"real nodes' provisioners, RSS (MiB)  PID  before the fleet  fleet of 4 up  with the claims  after deletion  per 100 nodes",
			"r1                                   100  40.0              44.0           44.2             -               100.00         10.0               11.0      10.5             -               25.00",
			"r2                                   200  50.0              52.0           -                -               50.00          12.0               12.5      -                -               12.50",
			"API server watch events for claims: 2000000 events (200.0 per claim, 2000.0 MiB) while created and annotated; 1000000 events (100.0 per claim, 500.0 MiB) while deleted",
			"Node watch events per Node status update: 4.5 (1.5 KiB), 4 updates",
			"per instance: 75.00 MiB per 100 nodes (median of 2 real nodes), 18.75 MiB of it anonymous; 0.038 MiB of RSS and 0.400 CPU-s per 1,000 claims of another provisioner (medians of 4 instances)",
			"note: r2: its provisioner is PID 201 at the deleted reading, 200 before (restarted): left out",
		}},
		{"failed at once", Result{Provisioner: Provisioner, Claims: 50000, Instances: 100}, []string{
			"RSS with the 50000 claims (MiB)                -    -       -",
			"API server watch events for claims: not read while created and annotated; not read while deleted",
			"Node watch events per Node status update: not read, 0 updates",
			"per instance: - MiB per 100 nodes (median of 0 real nodes), - MiB of it anonymous; - MiB of RSS and - CPU-s per 1,000 claims",
		}},
	} {
		var buf bytes.Buffer
		if err := Report(&buf, tc.res); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("%s: report lacks %q:\n%s", tc.name, want, buf.String())
			}
		}
	}
}

// TestResultJSON checks that a Result survives its --out file, for
// foreign-report.
func TestResultJSON(t *testing.T) {
	res := fixture()
	res.Summary = Summarize(res)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"withClaims":{`, `"rssMiB":30.5`, `"pid":11`, `"perNodeMiBPer100":{"n":2`, `"createWatch":{"events":2000000`, `"nodeUpdates":4`, `"nodeWatch":{"events":18`, `"nodeWatchPerUpdate":{"events":4.5`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	checkReportRoundTrip(t, res, b)
}

// TestNodeWatchPerUpdate checks the figure and the report line of the Node
// status updates, read or not.
func TestNodeWatchPerUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		updates int
		watch   *WatchCounts
		want    *WatchCounts
		line    string
	}{
		{"read", 100, &WatchCounts{Events: 400, Bytes: 100 * 1229}, &WatchCounts{Events: 4, Bytes: 1229},
			"Node watch events per Node status update: 4.0 (1.2 KiB), 100 updates"},
		{"only the cluster-wide watchers", 100, &WatchCounts{Events: 300, Bytes: 300 << 10}, &WatchCounts{Events: 3, Bytes: 3 << 10},
			"Node watch events per Node status update: 3.0 (3.0 KiB), 100 updates"},
		{"counters not read after", 100, nil, nil, "Node watch events per Node status update: not read, 100 updates"},
		{"not updated", 0, nil, nil, "Node watch events per Node status update: not read, 0 updates"},
		{"no update but counts", 0, &WatchCounts{Events: 5}, nil, "Node watch events per Node status update: not read, 0 updates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Result{Provisioner: Provisioner, Claims: 1000, Instances: 100, NodeUpdates: tc.updates, NodeWatch: tc.watch}
			got := Summarize(res).NodeWatchPerUpdate
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("NodeWatchPerUpdate = %+v, want %+v", got, tc.want)
			}
			var buf bytes.Buffer
			if err := Report(&buf, res); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), tc.line+"\n") {
				t.Errorf("report lacks %q:\n%s", tc.line, buf.String())
			}
		})
	}
}

// checkReportRoundTrip checks that b, res as JSON, reads back as a Result
// whose report is res's.
func checkReportRoundTrip(t *testing.T, res Result, b []byte) {
	t.Helper()
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var want, got bytes.Buffer
	if err := Report(&want, res); err != nil {
		t.Fatal(err)
	}
	if err := Report(&got, back); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("report of the JSON:\n%s\nwant:\n%s", got.String(), want.String())
	}
}
