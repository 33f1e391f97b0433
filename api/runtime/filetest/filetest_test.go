package filetest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode os.FileMode // 0: Write
		want os.FileMode
	}{
		{name: "a/b/default", want: 0o644},
		{name: "c/d/executable", mode: 0o755, want: 0o755},
		{name: "private", mode: 0o600, want: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), tc.name)
			if tc.mode == 0 {
				Write(t, p, "content\n")
			} else {
				WriteMode(t, p, "content\n", tc.mode)
			}
			data, err := os.ReadFile(p)
			if err != nil || string(data) != "content\n" {
				t.Fatalf("ReadFile = %q, %v; want %q", data, err, "content\n")
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm() &^ 0o022; got != tc.want&^0o022 {
				t.Errorf("mode %v, want %v (less a 022 umask)", fi.Mode().Perm(), tc.want)
			}
		})
	}
}
