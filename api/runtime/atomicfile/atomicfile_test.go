package atomicfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"hostpath.dev/api/runtime/atomicfile"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		old     string // "" for no file before
		perm    os.FileMode
		missing bool // dir does not exist
	}{
		{name: "new file", perm: 0o644},
		{name: "over an old file", old: "old", perm: 0o600},
		{name: "dir missing", missing: true, perm: 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.missing {
				dir = filepath.Join(dir, "missing")
			}
			path := filepath.Join(dir, "f")
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := atomicfile.Write(dir, "f", []byte("new"), tc.perm)
			if tc.missing {
				if err == nil {
					t.Fatal("Write into a missing directory succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Errorf("content %q, %v; want %q", got, err, "new")
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, %v; want %v", fi.Mode().Perm(), err, tc.perm)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("dir holds %d entries, want only f (no temporary file left)", len(entries))
			}
		})
	}
}
