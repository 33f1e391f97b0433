package benchprovision

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestRunFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "/env/kubeconfig")
	parse := func(args ...string) (*runFlags, error) {
		var f runFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("parse %q: %v", args, err)
		}
		return &f, f.Complete()
	}

	f, err := parse()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	want := Options{Label: "run", Count: 100, StorageClass: "hostpath-immediate", Size: resource.MustParse("1Mi"),
		Workers: 16, Timeout: 10 * time.Minute, PoolPath: "/var/hpvolumes", Poll: 50 * time.Millisecond}
	if !reflect.DeepEqual(f.o, want) || f.kubeconfig != "/env/kubeconfig" || f.out != "" || !f.apiMetrics {
		t.Errorf("defaults: %+v kubeconfig %q out %q; want %+v", f.o, f.kubeconfig, f.out, want)
	}
	if err := f.o.Validate(); err != nil {
		t.Errorf("the default options are not valid: %v", err)
	}

	f, err = parse("--nodes", "a,b", "--size", "2Gi", "--out", "r.json", "--run-id", "x", "--count", "3", "--kcm", "200/400", "--apiserver-metrics=false")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.o.Nodes, []string{"a", "b"}) || f.o.Size.Cmp(resource.MustParse("2Gi")) != 0 ||
		f.out != "r.json" || f.o.RunID != "x" || f.o.Count != 3 || f.o.KCM != "200/400" || f.apiMetrics {
		t.Errorf("set: %+v out %q", f.o, f.out)
	}

	for _, size := range []string{"", "lots", "1Q"} {
		if _, err := parse("--size", size); err == nil || !strings.HasPrefix(err.Error(), "--size: ") {
			t.Errorf("--size %q: %v, want a --size error", size, err)
		}
	}
}

func TestLogf(t *testing.T) {
	var out bytes.Buffer
	c := command{stderr: &out, now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }}
	c.logf("%d claims on %s", 3, "n1")
	if got, want := out.String(), "[03:04:05] 3 claims on n1\n"; got != want {
		t.Errorf("logf printed %q, want %q", got, want)
	}
}

func TestWriteResultJSON(t *testing.T) {
	var out bytes.Buffer
	r := Result{Label: "x", Count: 2, Nodes: []string{"n1"}}
	if err := (command{stdout: &out}).writeResult(r, ""); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || !reflect.DeepEqual(back, r) ||
		!strings.HasPrefix(out.String(), "{\n  \"label\": \"x\",") || !strings.HasSuffix(out.String(), "}\n") {
		t.Errorf("writeResult printed %q (%v)", out.String(), err)
	}
}

// writeJSON writes v as writeResult does into dir/name.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := (command{}).writeResult(v, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	rs := fixedResults()
	var files []string
	for i := range rs {
		r := rs[i]
		// The runs as `run` writes them: the footprints come with report.
		r.ProvisionerInstances, r.ProvisionerPeakMiB, r.ProvisionerCPUSeconds = 0, 0, 0
		r.ManagerInstances, r.ManagerPeakMiB, r.ManagerCPUSeconds = 0, 0, 0
		files = append(files, writeJSON(t, dir, strings.ReplaceAll(r.Label, "/", "-")+".json", r))
	}
	fpOurs := filepath.Join(dir, "ours.footprint")
	fpNoop := filepath.Join(dir, "noop.footprint")
	for f, text := range map[string]string{
		fpOurs: "PROGRAM NODE PID RSS_MiB PEAK_MiB CPU_s UP_s CPU_m\nmanager n1 1 10 15.1 0.4 9 1\nmanager n2 2 10 15.1 0.4 9 1\n" +
			"provisioner n1 3 20 30.7 1.6 9 1\nprovisioner n2 4 20 30.7 1.6 9 1\n",
		fpNoop: "noopprovisioner local 5 20 24.6 0.9 - -\n",
	} {
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plots, all := filepath.Join(dir, "plots"), filepath.Join(dir, "all.json")
	var out bytes.Buffer
	report := Commands(&out, io.Discard)["report"]
	err := report(context.Background(), append([]string{"--footprint", "ours@200/400=" + fpOurs, "--footprint", "noop@200/400=" + fpNoop,
		"--plots", plots, "--json", all}, files...))
	if err != nil {
		t.Fatal(err)
	}
	wantPlots := "plot: " + filepath.Join(plots, "cdf-200-400.svg") + "\nplot: " + filepath.Join(plots, "timeline-200-400.svg") +
		"\nplot: " + filepath.Join(plots, "deletion-200-400.svg") + "\nplot: " + filepath.Join(plots, "cdf-default.svg") + "\nplot: " + filepath.Join(plots, "timeline-default.svg") + "\n"
	if got := out.String(); got != wantReport+wantPlots {
		t.Errorf("report printed\n%s\nwant\n%s", got, wantReport+wantPlots)
	}
	var back []Result
	if b, err := os.ReadFile(all); err != nil || json.Unmarshal(b, &back) != nil || !reflect.DeepEqual(back, fixedResults()) {
		t.Errorf("--json wrote %+v (%v), want the results with their footprints", back, err)
	}

	for _, argv := range [][]string{
		nil,
		{filepath.Join(dir, "missing.json")},
		{"--footprint", "nobody@x=" + fpOurs, files[0]},
		{"--footprint", "ours@200/400=" + filepath.Join(dir, "missing"), files[0]},
	} {
		if err := report(context.Background(), argv); err == nil {
			t.Errorf("report %q: no error", argv)
		}
	}
	var l labelFiles = map[string]string{}
	for _, bad := range []string{"x", "=f", "l="} {
		if err := l.Set(bad); err == nil {
			t.Errorf("--footprint %q: no error", bad)
		}
	}
}

func TestLimitsCommand(t *testing.T) {
	help := filepath.Join(t.TempDir(), "help")
	if err := os.WriteFile(help, []byte("      --kube-api-burst int   Burst. (default 100)\n      --kube-api-qps float32   QPS. (default 50)\n      --workers int   Workers. (default 8)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv    []string
		want    string
		wantErr string
	}{
		{argv: []string{`["--metrics-address=:8081","--v=2"]`, "2", help}, want: "100 200 16 0 0\n"},
		{argv: []string{"", "1", help}, want: "50 100 8 0 0\n"},
		{argv: []string{`["--kube-api-qps=5","--kube-api-burst=10"]`, "3", help}, want: "15 30 24 0 0\n"},
		{argv: []string{`["--event-qps=5","--event-burst=10"]`, "2", help}, want: "100 200 16 10 20\n"},
		{argv: []string{"[]", "2"}, wantErr: "usage: benchprovision limits ARGS_JSON INSTANCES HELP_FILE"},
		{argv: []string{"--v=2", "2", help}, wantErr: `args "--v=2": `},
		{argv: []string{"[]", "0", help}, wantErr: `bad number of instances "0"`},
		{argv: []string{"[]", "2", help + ".missing"}, wantErr: "open "},
		{argv: []string{`["--workers=x"]`, "2", help}, wantErr: `--workers "x": `},
	} {
		var out bytes.Buffer
		limits := Commands(&out, io.Discard)["limits"]
		err := limits(context.Background(), tc.argv)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("limits %q = %v, want an error starting %q", tc.argv, err, tc.wantErr)
			}
			continue
		}
		if err != nil || out.String() != tc.want {
			t.Errorf("limits %q printed %q, %v; want %q", tc.argv, out.String(), err, tc.want)
		}
	}
}
