package benchprovision

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"hostpath.dev/e2e/framework/apimetrics"
)

// fixedResults are two settings' runs of ours and the no-op floor, 4
// claims each, as `benchprovision run` writes them and the script's
// footprints complete them.
func fixedResults() []Result {
	nodes := []string{"hostpath-node-1", "hostpath-node-2"}
	return []Result{
		{
			Label: "ours@200/400", Settings: "2 instances, each --kube-api-qps=50 --kube-api-burst=100 --workers=8", KCM: "200/400",
			Count: 4, Nodes: nodes, Namespace: "hostpath-bench-a",
			CreateSeconds: 0.05, AllPVsSeconds: 1.2, AllBoundSeconds: 2.4, PVsPerSecond: 3.33, BindsPerSecond: 1.67,
			LatencyP50Seconds: 0.6, LatencyP95Seconds: 1.15, LatencyMaxSeconds: 1.15,
			BoundP50Seconds: 1.3, BoundP95Seconds: 2.35, BoundMaxSeconds: 2.35,
			PVTimes: []float64{0.3, 0.65, 0.9, 1.2}, BoundTimes: []float64{0.8, 1.35, 1.9, 2.4}, BoundLatencies: []float64{0.75, 1.3, 1.85, 2.35},
			Dirs: 4, PVsGoneSeconds: 1.5, DirsGoneSeconds: 1.6, DeletesPerSecond: 2.5,
			ReleasedSeconds: 0.9, GoneP50Seconds: 0.4, GoneP95Seconds: 0.6, GoneMaxSeconds: 0.6,
			ReleasedTimes: []float64{0.3, 0.5, 0.7, 0.9}, GoneTimes: []float64{0.7, 1, 1.2, 1.5},
			APIRequests: []apimetrics.RequestCount{
				{Verb: "PUT", Resource: "persistentvolumeclaims", Count: 12},
				{Verb: "POST", Resource: "persistentvolumeclaims", Count: 4},
				{Verb: "POST", Resource: "persistentvolumes", Count: 4},
				{Verb: "PATCH", Resource: "persistentvolumes", Count: 4},
				{Verb: "POST", Resource: "events", Count: 8},
			},
			ProvisionerInstances: 2, ProvisionerPeakMiB: 61.4, ProvisionerCPUSeconds: 3.2,
			ManagerInstances: 2, ManagerPeakMiB: 30.2, ManagerCPUSeconds: 0.8,
		},
		{
			Label: "noop@200/400", Settings: "1 process, --kube-api-qps=100 --kube-api-burst=200 --workers=16", KCM: "200/400",
			Count: 4, Nodes: nodes, Namespace: "hostpath-bench-b",
			CreateSeconds: 0.04, AllPVsSeconds: 0.4, AllBoundSeconds: 1.6, PVsPerSecond: 10, BindsPerSecond: 2.5,
			LatencyP50Seconds: 0.2, LatencyP95Seconds: 0.38, LatencyMaxSeconds: 0.38,
			BoundP50Seconds: 0.9, BoundP95Seconds: 1.58, BoundMaxSeconds: 1.58,
			PVTimes: []float64{0.1, 0.2, 0.3, 0.4}, BoundTimes: []float64{0.5, 0.9, 1.2, 1.6}, BoundLatencies: []float64{0.48, 0.88, 1.18, 1.58},
			PVsGoneSeconds: 0.8, DeletesPerSecond: 5,
			ReleasedSeconds: 0.7, GoneP50Seconds: 0.1, GoneP95Seconds: 0.2, GoneMaxSeconds: 0.2,
			ReleasedTimes: []float64{0.2, 0.4, 0.5, 0.7}, GoneTimes: []float64{0.3, 0.5, 0.6, 0.8},
			APIRequests: []apimetrics.RequestCount{
				{Verb: "PUT", Resource: "persistentvolumeclaims", Count: 8},
				{Verb: "POST", Resource: "persistentvolumeclaims", Count: 4},
				{Verb: "POST", Resource: "persistentvolumes", Count: 4},
				{Verb: "POST", Resource: "events", Count: 4},
			},
			ProvisionerInstances: 1, ProvisionerPeakMiB: 24.6, ProvisionerCPUSeconds: 0.9,
		},
		{
			Label: "ours@default", Settings: "2 instances, each --kube-api-qps=50 --kube-api-burst=100 --workers=8", KCM: "20/30",
			Count: 4, Nodes: nodes, Namespace: "hostpath-bench-c",
			CreateSeconds: 0.05, AllPVsSeconds: 1.3, AllBoundSeconds: 3, PVsPerSecond: 3.08, BindsPerSecond: 1.33,
			LatencyP50Seconds: 0.7, LatencyP95Seconds: 1.25, LatencyMaxSeconds: 1.25,
			BoundP50Seconds: 1.6, BoundP95Seconds: 2.95, BoundMaxSeconds: 2.95,
			PVTimes: []float64{0.35, 0.7, 1, 1.3}, BoundTimes: []float64{1, 1.7, 2.3, 3}, BoundLatencies: []float64{0.95, 1.65, 2.25, 2.95},
			Dirs: 4, PVsGoneSeconds: 1.6, DirsGoneSeconds: 1.7, DeletesPerSecond: 2.35,
		},
		{
			Label: "noop@default", Settings: "1 process, --kube-api-qps=100 --kube-api-burst=200 --workers=16", KCM: "20/30",
			Count: 4, Nodes: nodes, Namespace: "hostpath-bench-d",
			CreateSeconds: 0.04, AllPVsSeconds: 0.5, AllBoundSeconds: 2, PVsPerSecond: 8, BindsPerSecond: 2,
			LatencyP50Seconds: 0.25, LatencyP95Seconds: 0.48, LatencyMaxSeconds: 0.48,
			BoundP50Seconds: 1.1, BoundP95Seconds: 1.98, BoundMaxSeconds: 1.98,
			PVTimes: []float64{0.12, 0.25, 0.38, 0.5}, BoundTimes: []float64{0.6, 1.1, 1.5, 2}, BoundLatencies: []float64{0.58, 1.08, 1.48, 1.98},
			PVsGoneSeconds: 0.9, DeletesPerSecond: 4.44,
		},
	}
}

// wantReport is Report's text for fixedResults.
const wantReport = `== kube-controller-manager 200/400: ours@200/400 vs noop@200/400 ==
ours@200/400: 4 claims over hostpath-node-1, hostpath-node-2; provisioner: 2 instances, each --kube-api-qps=50 --kube-api-burst=100 --workers=8; kube-controller-manager client limits: 200/400
noop@200/400: 4 claims over hostpath-node-1, hostpath-node-2; provisioner: 1 process, --kube-api-qps=100 --kube-api-burst=200 --workers=16; kube-controller-manager client limits: 200/400
figure                              ours@200/400  noop@200/400  ours/noop
claims created (s)                  0.05          0.04          1.25
all PVs exist (s)                   1.20          0.40          3.00
all claims Bound (s)                2.40          1.60          1.50
PVs/s                               3.3           10.0          0.33
binds/s                             1.7           2.5           0.67
claim->PV p50 (s)                   0.60          0.20          3.00
claim->PV p95 (s)                   1.15          0.38          3.03
claim->PV max (s)                   1.15          0.38          3.03
claim->Bound p50 (s)                1.30          0.90          1.44
claim->Bound p95 (s)                2.35          1.58          1.49
claim->Bound max (s)                2.35          1.58          1.49
all PVs Released (s)                0.90          0.70          1.29
all PVs deleted (s)                 1.50          0.80          1.88
Released->gone p50 (s)              0.40          0.10          4.00
Released->gone p95 (s)              0.60          0.20          3.00
Released->gone max (s)              0.60          0.20          3.00
all directories gone (s)            1.60          -             -
deletes/s                           2.5           5.0           0.50
API requests, all clients           32            20            1.60
claim+PV watch events per watcher   -             -             -
provisioner peak RSS, summed (MiB)  61.4          24.6          2.50
provisioner CPU, summed (s)         3.2           0.9           3.56
manager peak RSS, summed (MiB)      30.2          -             -
manager CPU, summed (s)             0.8           -             -
times: lower is better; rates (/s): higher is better
ratio to baseline: 1.50x (kube-controller-manager 200/400: time until all claims Bound, ours/noop)
API requests from the first claim until every PV was gone, by every client (apiserver_request_total):
verb   resource                ours@200/400  noop@200/400
PUT    persistentvolumeclaims  12            8
POST   events                  8             4
POST   persistentvolumeclaims  4             4
POST   persistentvolumes       4             4
PATCH  persistentvolumes       4             0
total                          32            20

== kube-controller-manager default: ours@default vs noop@default ==
ours@default: 4 claims over hostpath-node-1, hostpath-node-2; provisioner: 2 instances, each --kube-api-qps=50 --kube-api-burst=100 --workers=8; kube-controller-manager client limits: 20/30
noop@default: 4 claims over hostpath-node-1, hostpath-node-2; provisioner: 1 process, --kube-api-qps=100 --kube-api-burst=200 --workers=16; kube-controller-manager client limits: 20/30
figure                              ours@default  noop@default  ours/noop
claims created (s)                  0.05          0.04          1.25
all PVs exist (s)                   1.30          0.50          2.60
all claims Bound (s)                3.00          2.00          1.50
PVs/s                               3.1           8.0           0.39
binds/s                             1.3           2.0           0.67
claim->PV p50 (s)                   0.70          0.25          2.80
claim->PV p95 (s)                   1.25          0.48          2.60
claim->PV max (s)                   1.25          0.48          2.60
claim->Bound p50 (s)                1.60          1.10          1.45
claim->Bound p95 (s)                2.95          1.98          1.49
claim->Bound max (s)                2.95          1.98          1.49
all PVs Released (s)                -             -             -
all PVs deleted (s)                 1.60          0.90          1.78
Released->gone p50 (s)              -             -             -
Released->gone p95 (s)              -             -             -
Released->gone max (s)              -             -             -
all directories gone (s)            1.70          -             -
deletes/s                           2.4           4.4           0.53
API requests, all clients           -             -             -
claim+PV watch events per watcher   -             -             -
provisioner peak RSS, summed (MiB)  -             -             -
provisioner CPU, summed (s)         -             -             -
manager peak RSS, summed (MiB)      -             -             -
manager CPU, summed (s)             -             -             -
times: lower is better; rates (/s): higher is better
ratio to baseline: 1.50x (kube-controller-manager default: time until all claims Bound, ours/noop)
`

func TestReport(t *testing.T) {
	var buf bytes.Buffer
	if err := Report(&buf, fixedResults(), BaselineKind); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != wantReport {
		t.Errorf("Report printed\n%s\nwant\n%s", got, wantReport)
	}
}

func TestReportRatioLines(t *testing.T) {
	rs := fixedResults()
	rs[0].AllBoundSeconds = 4.567
	var buf bytes.Buffer
	if err := Report(&buf, rs, BaselineKind); err != nil {
		t.Fatal(err)
	}
	var ratios []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, "ratio to baseline: ") {
			ratios = append(ratios, line)
		}
	}
	want := []string{
		"ratio to baseline: 2.85x (kube-controller-manager 200/400: time until all claims Bound, ours/noop)",
		"ratio to baseline: 1.50x (kube-controller-manager default: time until all claims Bound, ours/noop)",
	}
	if !reflect.DeepEqual(ratios, want) {
		t.Errorf("ratio lines %q, want %q", ratios, want)
	}
}

// TestReportIncomplete: a setting whose baseline run is missing (the
// script failed in between) still gets its figures, without ratios.
func TestReportIncomplete(t *testing.T) {
	rs := fixedResults()[:3]
	var buf bytes.Buffer
	if err := Report(&buf, rs, BaselineKind); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	_, second, _ := strings.Cut(out, "== kube-controller-manager default: ours@default vs noop@default ==")
	if second == "" || strings.Contains(second, "ratio to baseline") || !strings.Contains(second, "all claims Bound (s)                3.00          -             -") {
		t.Errorf("report without noop@default:\n%s", out)
	}
	buf.Reset()
	if err := Report(&buf, fixedResults()[1:2], BaselineKind); err != nil || !strings.Contains(buf.String(), "== kube-controller-manager 200/400: run@200/400 vs noop@200/400 ==") {
		t.Errorf("report of a baseline alone: %v\n%s", err, buf.String())
	}
}

func TestParseLabel(t *testing.T) {
	for label, want := range map[string][2]string{
		"ours@200/400": {"ours", "200/400"},
		"noop@default": {"noop", "default"},
		"ours":         {"ours", ""},
		"a@b@c":        {"a", "b@c"},
	} {
		if k, s := ParseLabel(label); k != want[0] || s != want[1] {
			t.Errorf("ParseLabel(%q) = %q, %q; want %q", label, k, s, want)
		}
	}
}

func TestParseFootprint(t *testing.T) {
	text := `PROGRAM      NODE                   PID  RSS_MiB  PEAK_MiB   CPU_s    UP_s  CPU_m
manager      hostpath-node-1       1234     20.1      25.5     1.5     100   15.0
manager      hostpath-node-2       1235     19.9      24.5     0.5     100    5.0
provisioner  hostpath-node-1       2234     30.0      40.2     2.0     100   20.0
provisioner  hostpath-node-2       2235     31.0      41.3     2.5     100   25.0
hostdefiner  hostpath-node-1       3234     10.0      12.0     0.1     100    1.0

noopprovisioner local              4444     22.0      26.0     3.3       -      -
`
	got, err := ParseFootprint(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Footprint{
		"manager":     {Instances: 2, PeakMiB: 50, CPUSeconds: 2},
		"provisioner": {Instances: 3, PeakMiB: 107.5, CPUSeconds: 7.8},
	}
	if len(got) != 2 || got["manager"] != want["manager"] || got["provisioner"].Instances != 3 ||
		!near(got["provisioner"].PeakMiB, 107.5) || !near(got["provisioner"].CPUSeconds, 7.8) {
		t.Errorf("ParseFootprint = %+v, want %+v", got, want)
	}
	var r Result
	ApplyFootprint(&r, want)
	if r.ProvisionerInstances != 3 || r.ProvisionerPeakMiB != 107.5 || r.ProvisionerCPUSeconds != 7.8 ||
		r.ManagerInstances != 2 || r.ManagerPeakMiB != 50 || r.ManagerCPUSeconds != 2 {
		t.Errorf("ApplyFootprint: %+v", r)
	}
	for _, bad := range []string{
		"provisioner n1 1 2.0\n",
		"provisioner n1 1 2.0 lots 1.0\n",
		"manager n1 1 2.0 3.0 x\n",
	} {
		if _, err := ParseFootprint(strings.NewReader(bad)); err == nil || !strings.HasPrefix(err.Error(), "line 1: ") {
			t.Errorf("ParseFootprint(%q) = %v, want a line 1 error", bad, err)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestFlagDefaults(t *testing.T) {
	help := `Usage of provisioner:
      --kube-api-burst int                 The burst of queries to the API server. (default 100)
      --kube-api-qps float32               The sustained queries per second to the API server. (default 50)
      --kubeconfig string                  The kubeconfig file to reach the API server with. Defaults to the in-cluster configuration.
      --metrics-address string             The address that serves /healthz. (default ":8081")
      --resync-period duration             How often. (default 15m0s)
  -v, --v Level                            number for the log level verbosity
      --workers int                        The number of claim workers and of volume workers, each. (default 8)
pflag: help requested
`
	got, err := FlagDefaults(strings.NewReader(help))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kube-api-burst": "100", "kube-api-qps": "50", "metrics-address": ":8081", "resync-period": "15m0s", "workers": "8"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FlagDefaults = %v, want %v", got, want)
	}
}

func TestInstanceLimits(t *testing.T) {
	defaults := map[string]string{"kube-api-qps": "50", "kube-api-burst": "100", "workers": "8"}
	withEvents := map[string]string{"kube-api-qps": "50", "kube-api-burst": "100", "workers": "8", "event-qps": "50", "event-burst": "100"}
	for _, tc := range []struct {
		args     []string
		defaults map[string]string
		want     Limits
		wantErr  string
	}{
		{args: []string{"--metrics-address=:8081", "--v=2"}, defaults: defaults, want: Limits{50, 100, 8, 0, 0}},
		{args: []string{"--kube-api-qps=20", "--kube-api-burst", "40", "--workers=4", "--kube-api-qps=25.5"}, defaults: defaults, want: Limits{25.5, 40, 4, 0, 0}},
		{args: []string{"--workers-extra=3", "--kube-api-qps-x=1"}, defaults: defaults, want: Limits{50, 100, 8, 0, 0}},
		{args: nil, defaults: withEvents, want: Limits{50, 100, 8, 50, 100}},
		{args: []string{"--event-qps=5", "--event-burst", "7"}, defaults: withEvents, want: Limits{50, 100, 8, 5, 7}},
		{args: nil, defaults: map[string]string{"kube-api-qps": "50"}, wantErr: "--kube-api-burst is neither"},
		{args: []string{"--workers=many"}, defaults: defaults, wantErr: `--workers "many": `},
		{args: []string{"--event-burst=x"}, defaults: withEvents, wantErr: `--event-burst "x": `},
		{args: []string{"--workers=0"}, defaults: defaults, wantErr: "limits 50 100 0 0 0 are not all positive"},
		{args: []string{"--event-qps=-1"}, defaults: withEvents, wantErr: "limits 50 100 8 -1 100 are not all positive"},
	} {
		got, err := InstanceLimits(tc.args, tc.defaults)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("InstanceLimits(%q) = %v, want an error starting %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("InstanceLimits(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	if got := (Limits{50, 100, 8, 50, 100}).Times(2).String(); got != "100 200 16 100 200" {
		t.Errorf("two instances: %q", got)
	}
	if got := (Limits{2.5, 5, 1, 0, 0}).Times(3).String(); got != "7.5 15 3 0 0" {
		t.Errorf("three instances: %q", got)
	}
}

func TestWritePlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	files, err := WritePlots(dir, fixedResults())
	if err != nil {
		t.Fatal(err)
	}
	// The default setting's runs recorded no deletion timeline: no plot.
	names := []string{"cdf-200-400.svg", "timeline-200-400.svg", "deletion-200-400.svg", "cdf-default.svg", "timeline-default.svg"}
	if len(files) != len(names) {
		t.Fatalf("WritePlots wrote %q, want %q", files, names)
	}
	series := map[string][]string{
		"cdf":      {"ours@200/400", "noop@200/400"},
		"timeline": {"ours@200/400 PVs", "ours@200/400 Bound", "noop@200/400 PVs", "noop@200/400 Bound"},
		"deletion": {"ours@200/400 Released", "ours@200/400 gone", "noop@200/400 Released", "noop@200/400 gone"},
	}
	for i, f := range files {
		if f != filepath.Join(dir, names[i]) {
			t.Errorf("file %d: %s, want %s", i, f, names[i])
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validXML(b); err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s is not valid SVG: %v", f, err)
		}
		kind, setting, _ := strings.Cut(strings.TrimSuffix(names[i], ".svg"), "-")
		for _, s := range series[kind] {
			if setting == "default" {
				s = strings.ReplaceAll(s, "200/400", "default")
			}
			if !bytes.Contains(b, []byte(">"+s+"<")) {
				t.Errorf("%s lacks the series %q", f, s)
			}
		}
	}
	// The same results give the same files.
	again, err := WritePlots(filepath.Join(t.TempDir(), "again"), fixedResults())
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		a, _ := os.ReadFile(files[i])
		b, _ := os.ReadFile(again[i])
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two renderings of the same results", names[i])
		}
	}
}

// validXML checks that b is well-formed XML.
func validXML(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{"200/400": "200-400", "default": "default", "": "run", "/x y/": "x-y", "20.5/30": "20-5-30"} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWriteRequestsFoldsSmallRows: pairs under MinRequestShare of the larger
// total go into one row of others; the total counts every request.
func TestWriteRequestsFoldsSmallRows(t *testing.T) {
	run := &Result{APIRequests: []apimetrics.RequestCount{{Verb: "POST", Resource: "persistentvolumes", Count: 1000}, {Verb: "DELETE", Resource: "roles", Count: 3}, {Verb: "LIST", Resource: "roles", Count: 2}}}
	base := &Result{APIRequests: []apimetrics.RequestCount{{Verb: "POST", Resource: "persistentvolumes", Count: 990}, {Verb: "DELETE", Resource: "roles", Count: 3}}}
	var sb strings.Builder
	if err := writeRequests(&sb, pair{setting: "default", run: run, base: base}, "ours", "noop"); err != nil {
		t.Fatal(err)
	}
	want := `API requests from the first claim until every PV was gone, by every client (apiserver_request_total):
verb        resource           ours  noop
POST        persistentvolumes  1000  990
(2 others)  (under 5 each)     5     3
total                          1005  993
`
	if got := sb.String(); got != want {
		t.Errorf("table\n%s\nwant\n%s", got, want)
	}
}

// TestReportRounds: three alternating rounds at one setting are each
// compared with the baseline run of their own round, and the report ends
// the setting with every figure's ratio over the rounds, min, median, max.
func TestReportRounds(t *testing.T) {
	var rs []Result
	for i, bound := range [][2]float64{{27.73, 24.93}, {25.02, 25.72}, {26.42, 26.87}} {
		ours, noop := fixedResults()[0], fixedResults()[1]
		ours.Label, noop.Label = "ours@1000/2000", "noop@1000/2000"
		ours.Round, noop.Round = i+1, i+1
		ours.AllBoundSeconds, noop.AllBoundSeconds = bound[0], bound[1]
		rs = append(rs, noop, ours)
	}
	var buf bytes.Buffer
	if err := Report(&buf, rs, BaselineKind); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"== kube-controller-manager 1000/2000: ours@1000/2000 vs noop@1000/2000, round 2 ==",
		"ratio to baseline: 0.97x (kube-controller-manager 1000/2000: time until all claims Bound, ours/noop)",
		"== kube-controller-manager 1000/2000: ours/noop over 3 rounds, each against the noop run of its round ==",
		"all claims Bound (s)                0.97x  0.98x   1.11x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestWatchEvents checks the watch events and watchers read from the API
// server's metrics, and the claim and PV events per watcher of a run.
func TestWatchEvents(t *testing.T) {
	metrics := func(pvcEvents, pvEvents, podEvents int) []byte {
		return fmt.Appendf(nil, `# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="persistentvolumeclaims",version="v1"} %d
apiserver_watch_events_total{group="",resource="persistentvolumes",version="v1"} %d
apiserver_watch_events_total{group="",resource="pods",version="v1"} %d
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="persistentvolumeclaims",scope="cluster",subresource="",verb="WATCH",version="v1"} 4
apiserver_longrunning_requests{component="apiserver",group="",resource="persistentvolumes",scope="cluster",subresource="",verb="WATCH",version="v1"} 5
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="GET",version="v1"} 7
`, pvcEvents, pvEvents, podEvents)
	}
	before, err := apimetrics.ParseWatchEvents(metrics(100, 50, 10))
	if err != nil {
		t.Fatal(err)
	}
	if w := before[apimetrics.RequestKey{Verb: "watchers", Resource: "persistentvolumeclaims"}]; w != 4 {
		t.Errorf("claim watchers = %d, want 4", w)
	}
	if _, ok := before[apimetrics.RequestKey{Verb: "watchers", Resource: "pods"}]; ok {
		t.Error("a GET counted as a watcher")
	}
	after, err := apimetrics.ParseWatchEvents(metrics(500, 1050, 40))
	if err != nil {
		t.Fatal(err)
	}
	since, perWatcher := watchEventsSince(after, before)
	want := []apimetrics.RequestCount{{Verb: "event", Resource: "persistentvolumes", Count: 1000}, {Verb: "event", Resource: "persistentvolumeclaims", Count: 400},
		{Verb: "event", Resource: "pods", Count: 30}}
	if !reflect.DeepEqual(since, want) {
		t.Errorf("events since = %v, want %v", since, want)
	}
	// 400 claim events to 4 watchers, 1000 PV events to 5.
	if perWatcher != 300 {
		t.Errorf("claim and PV events per watcher = %v, want 300", perWatcher)
	}
}
