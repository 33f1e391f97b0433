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
	if !reflect.DeepEqual(f.o, want) || f.kubeconfig != "/env/kubeconfig" || f.out != "" {
		t.Errorf("defaults: %+v kubeconfig %q out %q; want %+v", f.o, f.kubeconfig, f.out, want)
	}
	if err := f.o.Validate(); err != nil {
		t.Errorf("the default options are not valid: %v", err)
	}

	f, err = parse("--nodes", "a,b", "--size", "2Gi", "--out", "r.json", "--run-id", "x", "--count", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.o.Nodes, []string{"a", "b"}) || f.o.Size.Cmp(resource.MustParse("2Gi")) != 0 ||
		f.out != "r.json" || f.o.RunID != "x" || f.o.Count != 3 {
		t.Errorf("set: %+v out %q", f.o, f.out)
	}

	for _, size := range []string{"", "lots", "1Q"} {
		if _, err := parse("--size", size); err == nil || !strings.HasPrefix(err.Error(), "--size: ") {
			t.Errorf("--size %q: %v, want a --size error", size, err)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		argv    []string
		want    argsInput
		wantErr string
	}{
		{argv: []string{`["--v=2"]`}, want: argsInput{args: []string{"--v=2"}}},
		{argv: []string{" "}, want: argsInput{}},
		{argv: []string{`["--v=2"]`, "5", "10"}, want: argsInput{args: []string{"--v=2"}, qps: 5, burst: 10}},
		{argv: []string{`[]`, "0.5", "1"}, want: argsInput{args: []string{}, qps: 0.5, burst: 1}},
		{argv: nil, wantErr: "usage: benchprovision args ARGS_JSON [QPS BURST]"},
		{argv: []string{"[]", "5"}, wantErr: "usage: "},
		{argv: []string{"[]", "5", "10", "x"}, wantErr: "usage: "},
		{argv: []string{"--v=2"}, wantErr: `args "--v=2": `},
		{argv: []string{"[]", "fast", "10"}, wantErr: `bad QPS "fast"`},
		{argv: []string{"[]", "0", "10"}, wantErr: `bad QPS "0"`},
		{argv: []string{"[]", "5", "0"}, wantErr: `bad burst "0"`},
		{argv: []string{"[]", "5", "1.5"}, wantErr: `bad burst "1.5"`},
	} {
		got, err := parseArgs(tc.argv)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("parseArgs(%q) = %v, want an error starting %q", tc.argv, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseArgs(%q) = %+v, %v; want %+v", tc.argv, got, err, tc.want)
		}
	}
}

func TestArgsCommand(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{""}, "[]\n"},
		{[]string{`["--a=<b>&c", "--kube-api-qps", "9"]`}, "[\"--a=<b>&c\"]\n"},
		{[]string{`["--kube-api-burst=3"]`, "5", "10"}, "[\"--kube-api-qps=5\",\"--kube-api-burst=10\"]\n"},
	} {
		var out bytes.Buffer
		if err := Commands(&out, io.Discard)["args"](context.Background(), tc.argv); err != nil || out.String() != tc.want {
			t.Errorf("args %q printed %q, %v; want %q", tc.argv, out.String(), err, tc.want)
		}
	}
}

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r Result) string {
		p := filepath.Join(dir, name)
		var out bytes.Buffer
		if err := (command{stdout: &out}).writeResult(r, ""); err != nil {
			t.Fatal(err)
		}
		if err := (command{}).writeResult(r, p); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, out.Bytes()) {
			t.Fatalf("file %s differs from stdout: %q vs %q (%v)", p, b, out.Bytes(), err)
		}
		return p
	}
	a := write("a.json", Result{Label: "defaults", Count: 10, AllPVsSeconds: 2, PVsPerSecond: 5})
	b := write("b.json", Result{Label: "baseline", Count: 10, AllPVsSeconds: 8, PVsPerSecond: 1.25})
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	compare := Commands(&out, io.Discard)["compare"]
	if err := compare(context.Background(), []string{a, b}); err != nil || !strings.Contains(out.String(), "defaults/baseline") {
		t.Errorf("compare: %v\n%s", err, out.String())
	}
	for _, argv := range [][]string{nil, {a}, {a, b, b}, {a, filepath.Join(dir, "missing.json")}, {bad, a}} {
		if err := compare(context.Background(), argv); err == nil {
			t.Errorf("compare %q: no error", argv)
		}
	}
	if err := compare(context.Background(), []string{bad, a}); err == nil || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("compare with bad JSON: %v, want it to name the file", err)
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
