package quota

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeTree makes the files of tree (path to content; a path ending in /
// is a directory) under dir.
func writeTree(t *testing.T, dir string, tree map[string]string) {
	t.Helper()
	for path, content := range tree {
		p := filepath.Join(dir, path)
		if path[len(path)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQuotaMode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tree    map[string]string
		want    string
		wantErr bool
	}{
		{name: "no filesystem directory", wantErr: true},
		{name: "quotas off", tree: map[string]string{"FSID/features/": ""}, want: btrfsModeOff},
		{name: "simple", tree: map[string]string{"FSID/qgroups/mode": "squota\n"}, want: btrfsModeSimple},
		{name: "full", tree: map[string]string{"FSID/qgroups/mode": "qgroup\n"}, want: btrfsModeFull},
		{name: "kernel before 6.7", tree: map[string]string{"FSID/qgroups/0_5/referenced": "16384\n"}, want: btrfsModeLegacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.tree)
			got, err := btrfsSysfs{dir: filepath.Join(dir, "FSID")}.quotaMode()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("quotaMode() = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestQgroups(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"qgroups/mode":                  "squota\n",
		"qgroups/0_5/referenced":        "16384\n",
		"qgroups/0_256/referenced":      "1000\n",
		"qgroups/1_256/referenced":      "5000\n",
		"qgroups/1_256/max_referenced":  "16777216\n",
		"qgroups/1_1000/referenced":     "0\n",
		"qgroups/1_1000/max_referenced": "0\n",
		"qgroups/1_259/referenced":      "garbage\n",
		"qgroups/1_259/max_referenced":  "1\n",
		"qgroups/2_7/referenced":        "0\n",
		"qgroups/1_x/":                  "",
		"qgroups/1_300":                 "a file, not a qgroup",
	})
	s := btrfsSysfs{dir: dir}
	ids, err := s.qgroupIDs(1)
	if want := []uint64{256, 259, 1000}; err != nil || !slices.Equal(ids, want) {
		t.Errorf("qgroupIDs(1) = %v, %v; want %v", ids, err, want)
	}
	for _, tc := range []struct {
		id      uint64
		want    Usage
		wantErr bool
	}{
		{id: 256, want: Usage{LimitBytes: 16777216, UsedBytes: 5000, UsedInodes: -1}},
		{id: 1000, want: Usage{UsedInodes: -1}},
		{id: 259, wantErr: true},
		{id: 257, wantErr: true},
	} {
		got, err := s.qgroupUsage(1, tc.id)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("qgroupUsage(1, %d) = %+v, %v; want %+v, error %v", tc.id, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := (btrfsSysfs{dir: t.TempDir()}).qgroupIDs(1); err == nil {
		t.Error("qgroupIDs without a qgroups directory succeeded")
	}
}
