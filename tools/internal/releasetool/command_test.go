package releasetool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostpath.dev/e2e/framework/releases"
	"hostpath.dev/e2e/framework/releases/releasestest"
)

// TestCommands runs check and commit on a repository with two releases,
// and on one whose record names a commit it lacks.
func TestCommands(t *testing.T) {
	root := t.TempDir()
	releasestest.Git(t, root, nil, "init", "-q", "-b", "main")
	a := releasestest.Commit(t, root, "a", "2026-11-23T10:00:00Z")
	b := releasestest.Commit(t, root, "b", "2026-11-24T10:00:00Z")
	write := func(record string) {
		t.Helper()
		changelog := "## Unreleased\n\n## v0.2.0 - 2026-11-24\n\n## v0.1.0 - 2026-11-23\n"
		if err := os.WriteFile(filepath.Join(root, releases.Changelog), []byte(changelog), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, releases.File), []byte(record), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := "v0.1.0 " + a + " 2026-11-23 supported\nv0.2.0 " + b + " 2026-11-24 supported\n"
	tests := []struct {
		name    string
		record  string
		args    []string
		want    string
		wantErr string
	}{
		{name: "check", record: good, args: []string{"check", root}, want: "releases: ok (2 recorded, newest v0.2.0)\n"},
		{name: "commit", record: good, args: []string{"commit", "v0.1.0", root}, want: a + "\n"},
		{name: "commit of an unrecorded version", record: good, args: []string{"commit", "v0.3.0", root}, wantErr: "RELEASES records no release v0.3.0 (it has v0.1.0, v0.2.0)"},
		{name: "commit of a broken record", record: "v0.1.0 " + a + " 2026-11-23 supported\nv0.2.0 " + strings.Repeat("0", 40) + " 2026-11-24 supported\n",
			args: []string{"commit", "v0.1.0", root}, wantErr: "is not in this repository"},
		{name: "commit without a version", record: good, args: []string{"commit"}, wantErr: "usage: releases commit VERSION [REPO]"},
		{name: "supported", record: good, args: []string{"supported", root}, want: "v0.1.0 " + a + "\nv0.2.0 " + b + "\n"},
		{name: "supported leaves out the unsupported", record: "v0.1.0 " + a + " 2026-11-23 unsupported\nv0.2.0 " + b + " 2026-11-24 supported\n",
			args: []string{"supported", root}, want: "v0.2.0 " + b + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.record)
			var out strings.Builder
			err := Commands(&out)[tc.args[0]](t.Context(), tc.args[1:])
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%v: %v, want an error with %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil || out.String() != tc.want {
				t.Fatalf("%v: %q, %v; want %q", tc.args, out.String(), err, tc.want)
			}
		})
	}
}
