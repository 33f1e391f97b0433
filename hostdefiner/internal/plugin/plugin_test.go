package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2/ktesting"
)

// fakeProgram finds something, nothing, or fails, as its flags say.
type fakeProgram struct {
	found, fail, invalid bool
	ran                  bool
}

func (p *fakeProgram) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&p.found, "found", false, "Find something.")
	fs.BoolVar(&p.fail, "fail", false, "Fail.")
	fs.BoolVar(&p.invalid, "invalid", false, "Be invalid.")
}

func (p *fakeProgram) Validate() error {
	if p.invalid {
		return errors.Join(errors.New("--invalid is set"), errors.New("and another"))
	}
	return nil
}

func (p *fakeProgram) Run(_ context.Context, out io.Writer) (bool, error) {
	p.ran = true
	if p.fail {
		return false, errors.New("list PersistentVolumes: forbidden")
	}
	_, _ = io.WriteString(out, "report\n")
	return p.found, nil
}

func TestPluginMain(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
		wantRan    bool
	}{
		{name: "no command lists the commands", wantCode: ExitOK, wantStdout: []string{"Usage:\n  kubectl hostpath COMMAND [flags]", "  fake  Does nothing real"}},
		{name: "help", args: []string{"help"}, wantCode: ExitOK, wantStdout: []string{"Commands:"}},
		{name: "unknown command", args: []string{"nope"}, wantCode: ExitError, wantStderr: []string{`Error: unknown command "nope" for "kubectl hostpath"`, "Commands:"}},
		{name: "command help", args: []string{"fake", "--help"}, wantCode: ExitOK, wantStdout: []string{"Fake help.\n\nUsage:\n  kubectl hostpath fake [flags]", "--found"}},
		{name: "bad flag", args: []string{"fake", "--nope"}, wantCode: ExitError, wantStderr: []string{"Error: unknown flag: --nope", "See 'kubectl hostpath fake --help'."}},
		{name: "arguments", args: []string{"fake", "x"}, wantCode: ExitError, wantStderr: []string{`unexpected arguments ["x"]`}},
		{name: "invalid", args: []string{"fake", "--invalid"}, wantCode: ExitError, wantStderr: []string{"Error: --invalid is set\n  and another"}},
		{name: "nothing found", args: []string{"fake"}, wantCode: ExitOK, wantStdout: []string{"report"}, wantRan: true},
		{name: "found", args: []string{"fake", "--found"}, wantCode: ExitFound, wantStdout: []string{"report"}, wantRan: true},
		{name: "failed", args: []string{"fake", "--fail"}, wantCode: ExitError, wantStderr: []string{"Error: list PersistentVolumes: forbidden\n"}, wantRan: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			p := &fakeProgram{}
			var stdout, stderr bytes.Buffer
			code := Main(ctx, tc.args, &stdout, &stderr, Command{
				Name: "fake", Summary: "Does nothing real", Help: "Fake help.",
				New: func() Program { return p },
			})
			if code != tc.wantCode {
				t.Errorf("Main() = %d, want %d; stderr %q", code, tc.wantCode, stderr.String())
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("Stdout %q, want it to contain %q", stdout.String(), w)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("Stderr %q, want it to contain %q", stderr.String(), w)
				}
			}
			if len(tc.wantStderr) == 0 && stderr.Len() > 0 {
				t.Errorf("Stderr %q, want none", stderr.String())
			}
			if p.ran != tc.wantRan {
				t.Errorf("Ran = %v, want %v", p.ran, tc.wantRan)
			}
		})
	}
}
