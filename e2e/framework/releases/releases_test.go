package releases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostpath.dev/e2e/framework/releases/releasestest"
)

const (
	commitA = "dcbf82897d6e9e95f912d8e52861f521e6f756a4"
	commitB = "467a7cf3971d1e0a41f3c131191261bfba48282b"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // versions
		wantErr string
	}{
		{name: "two releases with comments", in: "# version commit date upgrade\n\nv0.1.0 " + commitA + " 2026-11-23 supported # first\n  v0.2.0\t" + commitB + " 2026-11-23 unsupported\n", want: []string{"v0.1.0", "v0.2.0"}},
		{name: "minor compared as a number", in: "v0.9.0 " + commitA + " 2026-11-23 supported\nv0.10.0 " + commitB + " 2026-11-24 supported\n", want: []string{"v0.9.0", "v0.10.0"}},
		{name: "empty", in: "# nothing yet\n", wantErr: "no release recorded"},
		{name: "three fields", in: "v0.1.0 " + commitA + " 2026-11-23\n", wantErr: "line 1: 3 fields, want 4"},
		{name: "no v", in: "0.1.0 " + commitA + " 2026-11-23 supported\n", wantErr: `version "0.1.0" is not vMAJOR.MINOR.PATCH`},
		{name: "pre-release", in: "v0.1.0-rc.1 " + commitA + " 2026-11-23 supported\n", wantErr: "is not vMAJOR.MINOR.PATCH"},
		{name: "leading zero", in: "v0.01.0 " + commitA + " 2026-11-23 supported\n", wantErr: "is not vMAJOR.MINOR.PATCH"},
		{name: "short commit", in: "v0.1.0 dcbf828 2026-11-23 supported\n", wantErr: `commit "dcbf828" of v0.1.0 is not a full commit hash`},
		{name: "upper-case commit", in: "v0.1.0 " + strings.ToUpper(commitA) + " 2026-11-23 supported\n", wantErr: "is not a full commit hash"},
		{name: "bad date", in: "v0.1.0 " + commitA + " 23.11.2026 supported\n", wantErr: `date "23.11.2026" of v0.1.0`},
		{name: "bad upgrade", in: "v0.1.0 " + commitA + " 2026-11-23 yes\n", wantErr: `upgrade "yes" of v0.1.0 is neither supported nor unsupported`},
		{name: "decreasing", in: "v0.2.0 " + commitB + " 2026-11-23 supported\nv0.1.0 " + commitA + " 2026-11-23 supported\n", wantErr: "line 2: version v0.1.0 is not greater than v0.2.0 (line 1)"},
		{name: "repeated", in: "v0.1.0 " + commitA + " 2026-11-23 supported\nv0.1.0 " + commitB + " 2026-11-23 supported\n", wantErr: "line 2: version v0.1.0 is not greater than v0.1.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rels, err := Parse(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, r := range rels {
				got = append(got, r.Version)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("versions %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	rels, err := Parse(strings.NewReader("\nv0.1.0 " + commitA + " 2026-11-23 supported\nv0.2.0 " + commitB + " 2026-11-24 unsupported\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Release{
		{Version: "v0.1.0", Commit: commitA, Date: "2026-11-23", Upgrade: UpgradeSupported, Line: 2},
		{Version: "v0.2.0", Commit: commitB, Date: "2026-11-24", Upgrade: UpgradeUnsupported, Line: 3},
	}
	if len(rels) != len(want) {
		t.Fatalf("got %+v, want %+v", rels, want)
	}
	for i := range want {
		if rels[i] != want[i] {
			t.Errorf("release %d: %+v, want %+v", i, rels[i], want[i])
		}
	}
	if !rels[0].Supported() || rels[1].Supported() || rels[0].Short() != "dcbf828" {
		t.Errorf("Supported %v %v, Short %q", rels[0].Supported(), rels[1].Supported(), rels[0].Short())
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"v0.1.0", "v0.2.0", -1},
		{"v0.2.0", "v0.1.0", 1},
		{"v0.2.0", "v0.2.0", 0},
		{"v0.10.0", "v0.9.9", 1},
		{"v1.0.0", "v0.99.99", 1},
		{"v1.2.3", "v1.2.10", -1},
	} {
		if got := Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCheckChangelog(t *testing.T) {
	rels := []Release{
		{Version: "v0.1.0", Commit: commitA, Date: "2026-11-23"},
		{Version: "v0.2.0", Commit: commitB, Date: "2026-11-24"},
	}
	tests := []struct {
		name string
		text string
		want []string // one substring per error
	}{
		{name: "complete", text: "# Changelog\n\n## Unreleased\n\n## v0.2.0 - 2026-11-24\n\ntext\n\n## v0.1.0 - 2026-11-23\n"},
		{name: "missing section", text: "## v0.2.0 - 2026-11-24\n", want: []string{`no section "## v0.1.0 - 2026-11-23"`}},
		{name: "wrong date", text: "## v0.2.0 - 2026-11-25\n## v0.1.0 - 2026-11-23\n", want: []string{"line 1: v0.2.0 dated 2026-11-25, but RELEASES says 2026-11-24"}},
		{name: "unrecorded version", text: "## v0.3.0 - 2026-11-30\n## v0.2.0 - 2026-11-24\n## v0.1.0 - 2026-11-23\n", want: []string{"line 1: section v0.3.0, but RELEASES records no such release"}},
		{name: "oldest first", text: "## v0.1.0 - 2026-11-23\n## v0.2.0 - 2026-11-24\n", want: []string{"line 2: section v0.2.0 after v0.1.0: releases go newest first"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkChangelog([]byte(tc.text), rels)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d: %q", errs, len(tc.want), tc.want)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.want[i]) {
					t.Errorf("error %d: %v, want %q", i, err, tc.want[i])
				}
			}
		})
	}
}

// TestCheck builds a repository of three commits (a, b on main; c on a
// branch) and checks records against it.
func TestCheck(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	releasestest.Git(t, root, nil, "init", "-q", "-b", "main")
	a := releasestest.Commit(t, root, "a", "2026-11-22T23:30:00-02:00") // 2026-11-23 in UTC
	b := releasestest.Commit(t, root, "b", "2026-11-24T10:00:00Z")
	releasestest.Git(t, root, nil, "checkout", "-q", "-b", "side", a)
	c := releasestest.Commit(t, root, "c", "2026-11-25T10:00:00Z")
	releasestest.Git(t, root, nil, "checkout", "-q", "main")
	changelog := "## v0.2.0 - 2026-11-24\n## v0.1.0 - 2026-11-23\n"
	if err := os.WriteFile(filepath.Join(root, Changelog), []byte(changelog), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		rels []Release
		want string
	}{
		{name: "ancestors with their dates", rels: []Release{{Version: "v0.1.0", Commit: a, Date: "2026-11-23"}, {Version: "v0.2.0", Commit: b, Date: "2026-11-24"}}},
		{name: "not an ancestor", rels: []Release{{Version: "v0.1.0", Commit: a, Date: "2026-11-23"}, {Version: "v0.2.0", Commit: c, Date: "2026-11-24"}}, want: "commit " + c + " of v0.2.0 is not an ancestor of HEAD"},
		{name: "unknown commit", rels: []Release{{Version: "v0.1.0", Commit: a, Date: "2026-11-23"}, {Version: "v0.2.0", Commit: strings.Repeat("0", 40), Date: "2026-11-24"}}, want: "is not in this repository"},
		{name: "wrong date", rels: []Release{{Version: "v0.1.0", Commit: a, Date: "2026-11-22"}, {Version: "v0.2.0", Commit: b, Date: "2026-11-24"}}, want: "v0.1.0 has date 2026-11-22, but its commit " + a[:7] + " was made on 2026-11-23 (UTC)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(ctx, root, tc.rels)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want an error with %q", err, tc.want)
			}
		})
	}

	rels := []Release{{Version: "v0.1.0", Commit: a}}
	for _, step := range []struct{ rev, want string }{{a, "v0.1.0"}, {b, "v0.1.0-1-g" + b[:7]}} {
		releasestest.Git(t, root, nil, "checkout", "-q", step.rev)
		if got, err := Describe(ctx, root, rels); err != nil || got != step.want {
			t.Errorf("Describe at %s = %q, %v; want %q", step.rev[:7], got, err, step.want)
		}
	}
}
