package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"

	"hostpath.dev/e2e/framework/cli"
)

// result is a benchmark's result in the tests.
type result struct {
	N    int      `json:"n"`
	Runs []string `json:"runs"`
}

func reportResult(w io.Writer, r result) error {
	_, err := fmt.Fprintf(w, "%d runs: %s\n", r.N, strings.Join(r.Runs, ", "))
	return err
}

// TestRunAndReport checks that the result is written, when run failed too,
// and reported only when it did not, and that run sees the API server.
func TestRunAndReport(t *testing.T) {
	dir := t.TempDir()
	kubeconfig, out := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "result.json")
	writeKubeconfig(t, kubeconfig, "a", testCA(t, "a"), testCA(t, "b"))
	failed := errors.New("failed")
	for _, tc := range []struct {
		name, out string
		runErr    error
		report    string
	}{
		{"ok", out, nil, "2 runs: a, b\n"},
		{"failed", out, failed, ""},
		{"no out", "", nil, "2 runs: a, b\n"},
	} {
		_ = os.Remove(out)
		var o Options
		var stdout bytes.Buffer
		f := Flags{Kubeconfig: kubeconfig, Out: tc.out}
		err := RunAndReport(&f, &o, &stdout, func(kubernetes.Interface, hostpathclient.Interface) (result, error) {
			if o.Server != "https://a:6443" {
				t.Errorf("%s: run sees server %q", tc.name, o.Server)
			}
			return result{N: 2, Runs: []string{"a", "b"}}, tc.runErr
		}, reportResult)
		if !errors.Is(err, tc.runErr) || stdout.String() != tc.report {
			t.Errorf("%s: %v, report %q; want %v, %q", tc.name, err, stdout.String(), tc.runErr, tc.report)
		}
		b, err := os.ReadFile(out)
		if tc.out == "" {
			if err == nil {
				t.Errorf("%s: result written", tc.name)
			}
			continue
		}
		if want := "{\n  \"n\": 2,\n  \"runs\": [\n    \"a\",\n    \"b\"\n  ]\n}\n"; err != nil || string(b) != want {
			t.Errorf("%s: written %q, %v; want %q", tc.name, b, err, want)
		}
	}
}

// TestReportCommand checks that the report subcommand reports what
// RunAndReport wrote, and its errors.
func TestReportCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "result.json")
	if err := writeResult(file, result{N: 3, Runs: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd := ReportCommand(&stdout, "report RESULT.json", reportResult)
	if err := cmd(context.Background(), []string{file}); err != nil || stdout.String() != "3 runs: x\n" {
		t.Errorf("report: %q, %v", stdout.String(), err)
	}
	var exit *cli.ExitError
	if err := cmd(context.Background(), nil); !errors.As(err, &exit) || exit.Code != 2 || err.Error() != "usage: report RESULT.json" {
		t.Errorf("report without an argument: %v", err)
	}
	if err := os.WriteFile(file, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd(context.Background(), []string{file}); err == nil || !strings.HasPrefix(err.Error(), file+": ") {
		t.Errorf("report of bad JSON: %v", err)
	}
}
