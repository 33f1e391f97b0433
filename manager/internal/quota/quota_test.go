package quota

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

func TestNone(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e := notEnforced("tmpfs has no per-directory quotas")
	if got := e.Support(); got != (Support{Kind: KindNone, Reason: "tmpfs has no per-directory quotas"}) {
		t.Errorf("Support() = %+v", got)
	}
	id, err := e.Make(root, "v", 1<<20)
	if err != nil || id != 0 {
		t.Fatalf("Make = %d, %v; want 0, nil", id, err)
	}
	fi, err := root.Lstat("v")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != fs.ModeDir|0o700 {
		t.Errorf("mode = %v, want drwx------", fi.Mode())
	}
	if _, err := e.Make(root, "v", 1<<20); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Make of an existing directory: %v, want it to exist", err)
	}
	if err := e.SetLimit(root, "v", 0, 2<<20); err != nil {
		t.Errorf("SetLimit: %v", err)
	}
	if _, err := e.Usage(root, "v", 0); !errors.Is(err, ErrNotEnforced) {
		t.Errorf("Usage: %v, want ErrNotEnforced", err)
	}
	if _, err := e.ID(root, "v"); !errors.Is(err, ErrNotEnforced) {
		t.Errorf("ID: %v, want ErrNotEnforced", err)
	}
	if err := e.Release(root, 0); err != nil {
		t.Errorf("Release: %v", err)
	}
	if ids, err := e.IDs(root); err != nil || len(ids) != 0 {
		t.Errorf("IDs() = %v, %v; want none", ids, err)
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"v", true},
		{"pvc-0123", true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a\x00b", false},
		{string(make([]byte, 256)), false},
	} {
		if err := checkName(tc.name); (err == nil) != tc.ok {
			t.Errorf("checkName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := notEnforced("").Make(root, "../escape", 1); err == nil {
		t.Error("Make of ../escape succeeded")
	}
}

func TestFSName(t *testing.T) {
	for _, tc := range []struct {
		magic uint32
		want  string
	}{
		{0x01021994, "tmpfs"},
		{0x794c7630, "overlayfs"},
		{0xef53, "ext4"},
		{0x12345678, "filesystem type 0x12345678"},
	} {
		if got := fsName(tc.magic); got != tc.want {
			t.Errorf("fsName(%#x) = %q, want %q", tc.magic, got, tc.want)
		}
	}
}
