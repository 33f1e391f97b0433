package docscheck

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hostpath.dev/api/runtime/filetest"
)

// managerHelp is the shape of a pflag program's --help (klog's flags
// included), trimmed.
const managerHelp = `Usage of manager:
      --add_dir_header                      If true, adds the file directory to the header of the log messages
      --pool stringArray                    Storage pool as NAME=PATH; repeat the flag for more pools. (default [default=/var/hpvolumes])
      --pool-overcommit stringArray         How many times its capacity a pool may promise, as NAME=RATIO.
      --selinux string                      on, off, or auto. (default "auto")
  -v, --v Level                             number for the log level verbosity
`

// pluginHelp is the shape of cobra's help: prose that starts a line with
// a flag, an example that names one, then the flags.
const pluginHelp = `Compares volume directories.
--manager-address NODE=127.0.0.1:PORT. Each manager's certificate is verified
Examples:
  kubectl hostpath orphans --manager-address node-1=127.0.0.1:18443

Flags:
      --exit-zero                     Exit 0 even when something is found.
  -h, --help                          help for orphans
  -o, --output string                 The output format: table or json. (default "table")
`

func TestHelpFlags(t *testing.T) {
	tests := []struct {
		name, help string
		want       []string
	}{
		{"pflag", managerHelp, []string{"add_dir_header", "pool", "pool-overcommit", "selinux", "v"}},
		{"cobra, prose and examples ignored, help left out", pluginHelp, []string{"exit-zero", "output"}},
		{"nothing", "Usage of x:\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HelpFlags(tc.help); !slices.Equal(got, tc.want) {
				t.Errorf("HelpFlags = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDocuments(t *testing.T) {
	tests := []struct {
		page, flag string
		want       bool
	}{
		{"| `--pool` | `default=/var/hpvolumes` |", "pool", true},
		{"`--pool NAME=PATH`, repeatable", "pool", true},
		{"the overlay gives `--selinux=on`", "selinux", true},
		{"| `--pool-overcommit` | none |", "pool", false}, // a longer flag is not this one
		{"--pool without backquotes", "pool", false},
		{"`-v`, `--v`", "v", true},
	}
	for _, tc := range tests {
		if got := Documents(tc.page, tc.flag); got != tc.want {
			t.Errorf("Documents(%q, %q) = %v, want %v", tc.page, tc.flag, got, tc.want)
		}
	}
}

// TestCheckFailsOnUndocumentedFlag is the check make verify runs, on a
// repository of its own: a program whose --help prints a flag its page
// lacks fails it, naming the flag, the page and the program; documenting
// the flag makes it pass.
func TestCheckFailsOnUndocumentedFlag(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	page := "Flags: `--add_dir_header`, `--pool NAME=PATH`, `--selinux`, `--v`.\n"
	for _, p := range Programs {
		help := managerHelp
		if p.Binary == "kubectl-hostpath" {
			help = pluginHelp
		}
		filetest.WriteMode(t, filepath.Join(bin, p.Binary), "#!/bin/sh\ncat <<'EOF'\n"+help+"EOF\nexit 2\n", 0o755)
		filetest.WriteMode(t, filepath.Join(root, p.Page), page+"`--exit-zero`, `-o`, `--output`\n", 0o644)
	}
	filetest.WriteMode(t, filepath.Join(root, "README.md"), "# x\n\nSee [the manager](docs/manager.md).\n", 0o644)

	problems, err := Check(root, bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"docs/manager.md: flag `--pool-overcommit` (manager --help) is not documented",
		"docs/provisioner.md: flag `--pool-overcommit` (provisioner --help) is not documented",
		"docs/hostdefiner.md: flag `--pool-overcommit` (hostdefiner --help) is not documented",
	}
	if !slices.Equal(problems, want) {
		t.Fatalf("Check with an undocumented flag = %q, want %q", problems, want)
	}
	// What make check-docs runs: the command fails, naming the flag.
	var stdout bytes.Buffer
	err = Command(&stdout, &stdout)(context.Background(), []string{"-bin", bin, root})
	if err == nil || !strings.Contains(err.Error(), "3 problem(s)") || !strings.Contains(err.Error(), "docs/manager.md: flag `--pool-overcommit` (manager --help) is not documented") {
		t.Fatalf("docscheck check with an undocumented flag: %v, want it to fail naming --pool-overcommit", err)
	}

	for _, p := range Programs {
		filetest.WriteMode(t, filepath.Join(root, p.Page), page+"`--exit-zero`, `-o`, `--output`, `--pool-overcommit NAME=RATIO`\n", 0o644)
	}
	if problems, err := Check(root, bin, nil); err != nil || len(problems) > 0 {
		t.Fatalf("Check with every flag documented = %q, %v; want nothing", problems, err)
	}
	stdout.Reset()
	if err := Command(&stdout, &stdout)(context.Background(), []string{"-bin", bin, root}); err != nil || !strings.HasPrefix(stdout.String(), "docscheck: ok") {
		t.Fatalf("docscheck check with every flag documented: %v, %q; want ok", err, stdout.String())
	}
}

func TestCheckFlagsErrors(t *testing.T) {
	root := t.TempDir()
	filetest.WriteMode(t, filepath.Join(root, "docs/p.md"), "`--a`\n", 0o644)
	programs := []Program{{Binary: "p", Page: "docs/p.md"}}
	if _, err := CheckFlags(root, programs, func(Program) (string, error) { return "no flags here\n", nil }); err == nil || !strings.Contains(err.Error(), "no flag in its output") {
		t.Errorf("a help without flags: %v, want an error", err)
	}
	if _, err := CheckFlags(root, []Program{{Binary: "p", Page: "docs/none.md"}}, func(Program) (string, error) { return "  --a x\n", nil }); err == nil {
		t.Error("a missing page: no error")
	}
	if _, err := RunHelp(filepath.Join(root, "no-such-binary")); err == nil {
		t.Error("RunHelp of a missing binary: no error")
	}
}

func TestCheckReadme(t *testing.T) {
	root := t.TempDir()
	filetest.WriteMode(t, filepath.Join(root, "README.md"), strings.Repeat("line\n", MaxReadmeLines), 0o644)
	if problems, err := CheckReadme(root); err != nil || len(problems) > 0 {
		t.Errorf("%d lines: %q, %v; want nothing", MaxReadmeLines, problems, err)
	}
	filetest.WriteMode(t, filepath.Join(root, "README.md"), strings.Repeat("line\n", MaxReadmeLines+1), 0o644)
	if problems, _ := CheckReadme(root); len(problems) != 1 || !strings.Contains(problems[0], "301 lines") {
		t.Errorf("%d lines: %q, want one problem", MaxReadmeLines+1, problems)
	}
}

func TestAnchors(t *testing.T) {
	text := "# Title\n## Install on your cluster\n```sh\n# not a heading\n```\n### `--pool` and `--pool-root`\n## Switching from kubevirt's hostpath-provisioner\n## Flags\n## Flags\n#nospace\n"
	want := []string{"title", "install-on-your-cluster", "--pool-and---pool-root", "switching-from-kubevirts-hostpath-provisioner", "flags", "flags-1"}
	if got := Anchors(text); !slices.Equal(got, want) {
		t.Errorf("Anchors = %q, want %q", got, want)
	}
}

func TestCheckLinks(t *testing.T) {
	root := t.TempDir()
	filetest.WriteMode(t, filepath.Join(root, "docs/a.md"), "# A\n## Sizes\nSee [b](b.md#top), [bad](b.md#nowhere), [self](#sizes), [gone](gone.md), [up](../../x.md).\n"+
		"`[not](a-link.md)` and\n```\n[not](either.md)\n```\n[site](https://example.com/x) ![plot](../tools/bench/runs/p.svg) [later](clones.md)\n", 0o644)
	filetest.WriteMode(t, filepath.Join(root, "docs/b.md"), "# Top\n", 0o644)
	filetest.WriteMode(t, filepath.Join(root, "tools/bench/runs/p.svg"), "<svg/>", 0o644)
	problems, err := CheckLinks(root, []string{"docs/a.md"}, []string{"docs/clones.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"docs/a.md:3: link b.md#nowhere: no heading #nowhere in docs/b.md",
		"docs/a.md:3: link gone.md: no file docs/gone.md",
		"docs/a.md:3: link ../../x.md: leads outside the repository",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("CheckLinks = %q, want %q", problems, want)
	}
}
