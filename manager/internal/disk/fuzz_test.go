package disk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/manager/internal/identity"
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
	"inner", "inner/..", "owned", "owned/data", ".hostpath", ".hostpath/owners", ".hostpath/owners/owned", "hostpath", "file", "file/x", ".hidden", "pool", "sibling", "outside-file",
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
	filetest.Write(t, filepath.Join(pool, "file"), "pool file")
	filetest.Write(t, filepath.Join(base, "outside-file"), "outside")
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

// FuzzConfinement creates, adopts, reads and deletes volumes with arbitrary
// names, pool names and owners through the Store, next to symlinks planted
// inside the pool that point to /, to a sibling directory and to an outside
// file, and checks the filesystem after every call: nothing outside the pool
// root is created, changed or removed; inside it, only the volume's own
// subtree and its owner record (with the metadata directories) change, and
// only when the name is valid and the directory is free, the owner's or
// adopted first (a directory without a record is refused until SetOwner
// adopts it); a name that succeeds is exactly one valid directory entry
// under the pool with a record naming its owner, and a second
// PersistentVolume can neither take nor remove it.
func FuzzConfinement(f *testing.F) {
	for _, s := range confinementSeeds {
		f.Add("default", s, "pv-a", uint16(0o755))
	}
	f.Add("..", "x", "pv-a", uint16(0o777))
	f.Add("default/..", "x", "pv-a", uint16(0o777))
	f.Add("other", "x", "pv-a", uint16(0o777)) // a valid pool name, not configured: PoolNotFound
	f.Add("default", "x", "pv-a", uint16(0o7777))
	for _, o := range []string{"", "pv-b", "../x", "a/b", ".hostpath", "PV", strings.Repeat("a", 254), "owned"} {
		f.Add("default", "x", o, uint16(0o700))
	}
	f.Add("default", "owned", "pv-b", uint16(0o700))

	base := f.TempDir()
	work := filepath.Join(base, "work") // everything the test owns
	pool := filepath.Join(work, "pool")
	mustMkdir(f, pool)
	mustMkdir(f, filepath.Join(work, "sibling", "data"))
	filetest.Write(f, filepath.Join(work, "sibling", "data", "keep.txt"), "keep")
	filetest.Write(f, filepath.Join(base, "boot_id"), "boot\n")
	filetest.Write(f, filepath.Join(base, "mountinfo"), "28 1 259:2 / / rw - ext4 /dev/root rw\n")
	plantEscapes(f, work, pool)
	_, ctx := ktesting.NewTestContext(f)
	ctx = context.WithoutCancel(ctx)
	store, err := New(Config{
		NodeName:      "fuzz",
		Pools:         map[string]string{"default": pool},
		Identity:      loadIdentity(f, identity.Config{StateDir: filepath.Join(base, "state"), BootIDFile: filepath.Join(base, "boot_id")}),
		MountInfoFile: filepath.Join(base, "mountinfo"),
	})
	if err != nil {
		f.Fatal(err)
	}
	// "owned" is a volume of PersistentVolume pv-owner, which no input
	// names: it must survive every input.
	if _, _, err := store.CreateVolume(ctx, "default", "owned", managerapi.CreateVolumeRequest{Owner: "pv-owner"}, 0o755, ""); err != nil {
		f.Fatal(err)
	}
	filetest.Write(f, filepath.Join(pool, "owned", "data"), "owned data")
	wantRoot := rootNames(f)
	records := filepath.Join(pool, OwnersDir)

	f.Fuzz(func(t *testing.T, poolName, name, owner string, mode uint16) {
		if owner == "pv-owner" {
			t.Skip("the owner of the volume that must survive")
		}
		_, ctx := ktesting.NewTestContext(t) // f's logger may not be used inside the target
		// "inner" is a directory without a record holding a symlink out
		// of the pool; put it back if an earlier input adopted and
		// deleted it.
		if _, err := os.Lstat(filepath.Join(pool, "inner")); errors.Is(err, fs.ErrNotExist) {
			mustMkdir(t, filepath.Join(pool, "inner"))
			mustSymlink(t, "../../sibling", filepath.Join(pool, "inner", "up"))
		}
		before := snapshot(t, work)
		vol := filepath.Join(pool, name)
		rec := filepath.Join(records, name)
		recordOwner := ""
		if data, err := os.ReadFile(rec); err == nil && ValidateVolumeName(name) == nil {
			var r record
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("record %s: %v", rec, err)
			}
			recordOwner = r.Owner
		}
		// Only the volume's own subtree and its record may change, and
		// only when the names are valid, the name is held by a directory
		// or nothing, and the owner record (if any) names owner (or the
		// directory has no record: SetOwner adopts it).
		valid := poolName == "default" && ValidateVolumeName(name) == nil && managerapi.ValidateOwner(owner) == nil &&
			(before[vol] == "" || strings.HasPrefix(before[vol], "d"))
		exists := before[vol] != ""
		adopt := valid && exists && recordOwner == ""
		mayChange := valid && (recordOwner == owner || recordOwner == "")
		check := func(step string, err error) map[string]string {
			t.Helper()
			after := snapshot(t, work)
			for _, d := range diff(before, after) {
				inVolume := d.path == vol || strings.HasPrefix(d.path, vol+"/")
				inMeta := d.path == rec || d.path == filepath.Join(pool, MetadataDir) || d.path == records
				if !mayChange || !(inVolume || inMeta) {
					t.Fatalf("%s(%q, %q, %q, %o) (err %v) changed the filesystem outside the volume: %s %s",
						step, poolName, name, owner, mode, err, d.what, d.path)
				}
			}
			if got := rootNames(t); got != wantRoot {
				t.Fatalf("%s(%q, %q) changed /: now\n%s", step, poolName, name, got)
			}
			if _, err := os.Stat(filepath.Join(pool, "owned", "data")); err != nil {
				t.Fatalf("%s(%q, %q, %q) removed another PersistentVolume's data: %v", step, poolName, name, owner, err)
			}
			return after
		}
		checkReason := func(step string, err error) {
			t.Helper()
			switch r := managerapi.ReasonOf(err); r {
			case managerapi.ReasonBadRequest, managerapi.ReasonNotFound, managerapi.ReasonPoolNotFound, managerapi.ReasonConflict, managerapi.ReasonOwnerConflict:
			default:
				t.Fatalf("%s(%q, %q, %q): unexpected error %v", step, poolName, name, owner, err)
			}
		}

		if adopt {
			// A directory without a record is refused until it is adopted.
			_, _, err := store.CreateVolume(ctx, poolName, name, managerapi.CreateVolumeRequest{Owner: owner}, fs.FileMode(mode)&fs.ModePerm, "")
			var ce *managerapi.Error
			if !errors.As(err, &ce) || ce.Reason != managerapi.ReasonOwnerConflict || ce.Owner != "" {
				t.Fatalf("CreateVolume(%q, %q) over a directory without a record: %v, want OwnerConflict", name, owner, err)
			}
			if d := diff(before, snapshot(t, work)); len(d) > 0 {
				t.Fatalf("refused CreateVolume(%q) changed %v", name, d)
			}
			if _, err := store.SetOwner(ctx, poolName, name, managerapi.SetOwnerRequest{Owner: owner}, ""); err != nil {
				t.Fatalf("SetOwner(%q, %q) adopting a directory: %v", name, owner, err)
			}
			check("SetOwner", nil)
		}
		v, created, err := store.CreateVolume(ctx, poolName, name, managerapi.CreateVolumeRequest{Owner: owner}, fs.FileMode(mode)&fs.ModePerm, "")
		check("CreateVolume", err)
		if err == nil {
			if !mayChange {
				t.Fatalf("CreateVolume(%q, %q, %q) succeeded on an invalid name, over a non-directory or over another owner's directory", poolName, name, owner)
			}
			if v.Path != vol || filepath.Dir(v.Path) != pool || v.Owner != owner {
				t.Fatalf("CreateVolume(%q) returned %+v", name, v)
			}
			if fi, err := os.Lstat(v.Path); err != nil || !fi.IsDir() || fi.Mode().Perm() != fs.FileMode(mode)&fs.ModePerm {
				t.Fatalf("CreateVolume(%q, %o) left %v (err %v)", name, mode, fi, err)
			}
			if data, err := os.ReadFile(rec); err != nil || !strings.Contains(string(data), fmt.Sprintf("%q", owner)) {
				t.Fatalf("CreateVolume(%q, %q) left record %q (err %v)", name, owner, data, err)
			}
			// Another PersistentVolume can neither take nor remove it.
			other := "other-" + strings.TrimPrefix(owner, "other-")
			if len(other) > 253 {
				other = "other-pv"
			}
			snap := snapshot(t, work)
			_, _, err1 := store.CreateVolume(ctx, poolName, name, managerapi.CreateVolumeRequest{Owner: other}, 0o777, "")
			_, err2 := store.DeleteVolume(ctx, poolName, name, other, false, "")
			_, err3 := store.SetOwner(ctx, poolName, name, managerapi.SetOwnerRequest{Owner: other}, "")
			for _, err := range []error{err1, err2, err3} {
				var ce *managerapi.Error
				if !errors.As(err, &ce) || ce.Reason != managerapi.ReasonOwnerConflict || ce.Owner != owner {
					t.Fatalf("%q acting on %q's volume %q: %v, want OwnerConflict naming %q", other, owner, name, err, owner)
				}
			}
			if d := diff(snap, snapshot(t, work)); len(d) > 0 {
				t.Fatalf("%q acting on %q's volume %q changed %v", other, owner, name, d)
			}
			// The owner may mark it retained.
			if _, err := store.SetOwner(ctx, poolName, name, managerapi.SetOwnerRequest{Owner: owner, Previous: owner, Retained: true}, ""); err != nil {
				t.Fatalf("SetOwner(%q, %q) by its owner: %v", name, owner, err)
			}
			check("SetOwner", err)
		} else {
			checkReason("CreateVolume", err)
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

		deleted, err := store.DeleteVolume(ctx, poolName, name, owner, false, "")
		after := check("DeleteVolume", err)
		if err == nil && mayChange {
			for p := range after {
				if p == vol || strings.HasPrefix(p, vol+"/") || p == rec {
					t.Fatalf("DeleteVolume(%q) left %s", name, p)
				}
			}
		}
		if err != nil {
			checkReason("DeleteVolume", err)
		}
		if created && !deleted {
			t.Fatalf("DeleteVolume(%q) deleted nothing after CreateVolume created it (err %v)", name, err)
		}
	})
}
