package benchprovision

import (
	"os"
	"path/filepath"
	"testing"
)

// volumeDirs.left counts what is still there of the directories added, from
// the listings of the directories that hold them.
func TestVolumeDirsLeft(t *testing.T) {
	tests := []struct {
		name   string
		remove []string // of a/v1, a/v2, b/v3
		file   bool     // a/v2 replaced by a file
		gone   []string // holders removed whole
		want   int
	}{
		{name: "all there", want: 3},
		{name: "one removed", remove: []string{"a/v1"}, want: 2},
		{name: "a file in a directory's place counts", remove: []string{"a/v2"}, file: true, want: 3},
		{name: "a holder gone takes its directories", gone: []string{"a"}, want: 1},
		{name: "all removed", remove: []string{"a/v1", "a/v2", "b/v3"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dirs := volumeDirs{}
			for _, d := range []string{"a/v1", "a/v2", "b/v3"} {
				p := filepath.Join(root, d)
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				dirs.add(p)
			}
			// Not one of the volumes: never counted.
			if err := os.Mkdir(filepath.Join(root, "a", "other"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range tt.remove {
				if err := os.Remove(filepath.Join(root, d)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.file {
				if err := os.WriteFile(filepath.Join(root, "a/v2"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tt.gone {
				if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
					t.Fatal(err)
				}
			}
			if got := dirs.count(); got != 3 {
				t.Errorf("count() = %d, want 3", got)
			}
			if got := dirs.left(); got != tt.want {
				t.Errorf("left() = %d, want %d", got, tt.want)
			}
		})
	}
}
