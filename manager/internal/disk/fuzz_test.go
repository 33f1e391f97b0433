package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// confinementSeeds are traversal attempts; some name the symlinks that
// plantEscapes puts inside the pool.
var confinementSeeds = []string{
	"ok", "..", ".", "", "/", "../x", "../sibling", "../outside-file", "a/../../b", "./x", "x/", "x/.",
	"%2e%2e%2f", "..%2fx", "%2e%2e", "a%2Fb", "a%2fb", "..%5cx", `..\x`, `a\b`,
	"/etc", "/tmp/x", "//x", "/..", "\x00", "a\x00b", "..\x00", "x\x00/../..",
	strings.Repeat("a", 255), strings.Repeat("a", 256), strings.Repeat("../", 100) + "x",
	"escape-root", "escape-root/tmp", "escape-root/etc/passwd", "escape-sibling", "escape-sibling/new",
	"escape-sibling/..", "escape-abs", "escape-abs/keep.txt", "escape-outside-file", "loop", "loop/x",
	"inner", "inner/..", "file", "file/x", ".hidden", "pool", "sibling", "outside-file",
}

// plantEscapes fills the pool with the traps a pod could leave behind.
func plantEscapes(t testing.TB, base, pool string) {
	mustSymlink(t, "/", filepath.Join(pool, "escape-root"))
	mustSymlink(t, "../sibling", filepath.Join(pool, "escape-sibling"))
	mustSymlink(t, filepath.Join(base, "sibling"), filepath.Join(pool, "escape-abs"))
	mustSymlink(t, "../outside-file", filepath.Join(pool, "escape-outside-file"))
	mustSymlink(t, "loop", filepath.Join(pool, "loop"))
	mustMkdir(t, filepath.Join(pool, "inner"))
	mustSymlink(t, "../../sibling", filepath.Join(pool, "inner", "up"))
	mustWrite(t, filepath.Join(pool, "file"), "pool file")
	mustWrite(t, filepath.Join(base, "outside-file"), "outside")
}

// snapshot records every entry below dir (type, mode, size of files, link
// target), without following symlinks.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fmt.Sprintf("%v %d", fi.Mode(), fi.Size())
		if fi.IsDir() {
			v = fi.Mode().String() // a directory's size varies by filesystem
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			v += " -> " + target
		}
		m[p] = v
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return m
}

// rootNames lists the entries of /, where a symlink to / would lead.
func rootNames(t testing.TB) string {
	entries, err := os.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, "\n")
}

type change struct{ what, path string }

func diff(before, after map[string]string) []change {
	var out []change
	for p, v := range before {
		if w, ok := after[p]; !ok {
			out = append(out, change{"removed", p})
		} else if v != w {
			out = append(out, change{fmt.Sprintf("changed (%s => %s)", v, w), p})
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, change{"created", p})
		}
	}
	return out
}

// FuzzConfinement creates, reads and deletes volumes with arbitrary names
// (and pool names) through the Store, next to symlinks planted inside the
// pool that point to /, to a sibling directory and to an outside file, and
// checks the filesystem after every call: nothing outside the pool root is
// created, changed or removed, the planted entries stay as they were, and a
// name that succeeds is exactly one valid directory entry under the pool.
func FuzzConfinement(f *testing.F) {
	for _, s := range confinementSeeds {
		f.Add("default", s, uint16(0o755))
	}
	f.Add("..", "x", uint16(0o777))
	f.Add("default/..", "x", uint16(0o777))
	f.Add("default", "x", uint16(0o7777))

	base := f.TempDir()
	work := filepath.Join(base, "work") // everything the test owns
	pool := filepath.Join(work, "pool")
	mustMkdir(f, pool)
	mustMkdir(f, filepath.Join(work, "sibling", "data"))
	mustWrite(f, filepath.Join(work, "sibling", "data", "keep.txt"), "keep")
	mustWrite(f, filepath.Join(base, "boot_id"), "boot\n")
	plantEscapes(f, work, pool)
	_, ctx := ktesting.NewTestContext(f)
	ctx = context.WithoutCancel(ctx)
	store, err := New(ctx, Config{
		NodeName: "fuzz",
		Pools:    map[string]string{"default": pool},
		Identity: IdentityConfig{StateDir: filepath.Join(base, "state"), BootIDFile: filepath.Join(base, "boot_id")},
	})
	if err != nil {
		f.Fatal(err)
	}
	wantRoot := rootNames(f)

	f.Fuzz(func(t *testing.T, poolName, name string, mode uint16) {
		// "inner" is a real volume holding a symlink out of the pool; put it
		// back if an earlier input deleted it.
		if _, err := os.Lstat(filepath.Join(pool, "inner")); errors.Is(err, fs.ErrNotExist) {
			mustMkdir(t, filepath.Join(pool, "inner"))
			mustSymlink(t, "../../sibling", filepath.Join(pool, "inner", "up"))
		}
		before := snapshot(t, work)
		vol := filepath.Join(pool, name)
		// Only the volume's own subtree may change, and only when the name
		// is valid and held by a directory or nothing.
		mayChange := poolName == "default" && ValidateVolumeName(name) == nil &&
			(before[vol] == "" || strings.HasPrefix(before[vol], "d"))
		check := func(step string, err error) map[string]string {
			t.Helper()
			after := snapshot(t, work)
			for _, d := range diff(before, after) {
				if !mayChange || (d.path != vol && !strings.HasPrefix(d.path, vol+"/")) {
					t.Fatalf("%s(%q, %q, %o) (err %v) changed the filesystem outside the volume: %s %s",
						step, poolName, name, mode, err, d.what, d.path)
				}
			}
			if got := rootNames(t); got != wantRoot {
				t.Fatalf("%s(%q, %q) changed /: now\n%s", step, poolName, name, got)
			}
			return after
		}

		v, created, err := store.CreateVolume(ctx, poolName, name, fs.FileMode(mode)&fs.ModePerm, 0)
		check("CreateVolume", err)
		if err == nil {
			if !mayChange {
				t.Fatalf("CreateVolume(%q, %q) succeeded on an invalid name or over a non-directory", poolName, name)
			}
			if v.Path != vol || filepath.Dir(v.Path) != pool {
				t.Fatalf("CreateVolume(%q) path %q is not directly under the pool", name, v.Path)
			}
			if fi, err := os.Lstat(v.Path); err != nil || !fi.IsDir() || fi.Mode().Perm() != fs.FileMode(mode)&fs.ModePerm {
				t.Fatalf("CreateVolume(%q, %o) left %v (err %v)", name, mode, fi, err)
			}
		} else if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) {
			t.Fatalf("CreateVolume(%q, %q): unexpected error %v", poolName, name, err)
		}

		_, _ = store.GetVolume(ctx, poolName, name)
		if l, err := store.ListVolumes(ctx, poolName); err == nil {
			for _, item := range l.Items {
				if filepath.Dir(item.Path) != pool || ValidateVolumeName(item.Name) != nil {
					t.Fatalf("ListVolumes returned %+v", item)
				}
			}
		}
		check("Get/ListVolumes", nil)

		deleted, err := store.DeleteVolume(ctx, poolName, name)
		after := check("DeleteVolume", err)
		if err == nil && mayChange {
			for p := range after {
				if p == vol || strings.HasPrefix(p, vol+"/") {
					t.Fatalf("DeleteVolume(%q) left %s", name, p)
				}
			}
		}
		if created && !deleted {
			t.Fatalf("DeleteVolume(%q) deleted nothing after CreateVolume created it (err %v)", name, err)
		}
	})
}
