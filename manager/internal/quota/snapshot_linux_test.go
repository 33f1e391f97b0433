//go:build linux

package quota

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"hostpath.dev/manager/internal/quota/quotatest"
)

// TestBtrfsSnapshot makes a volume as a snapshot of another on btrfs with
// simple quotas: it has the source's content and a limit of its own, it
// can be renamed into place, removed and released like a volume Make made,
// and sources that cannot be snapshotted as a whole are refused.
func TestBtrfsSnapshot(t *testing.T) {
	mnt := quotatest.MountBtrfs(t)
	quotaCtl(t, mnt, btrfsQuotaCtlEnableSimple)
	root := openPool(t, mnt)
	pool := filepath.Join(mnt, "pool")
	e := Detect(root)
	s, ok := e.(Snapshotter)
	if !ok {
		t.Fatalf("the enforcer of kind %q is no Snapshotter", e.Support().Kind)
	}
	before, err := e.IDs(root)
	if err != nil {
		t.Fatal(err)
	}
	srcID, err := e.Make(root, "src", 64*mib)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(pool, "src")
	if n, err := write(filepath.Join(src, "data"), 8*mib); err != nil {
		t.Fatalf("write 8 MiB into src: %v after %d bytes", err, n)
	}
	mustDo(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(src, "d", "f"), []byte("hello"), 0o644))
	mustDo(t, os.Symlink("/", filepath.Join(src, "link")))
	mustDo(t, os.Chmod(src, 0o751))
	mustDo(t, os.MkdirAll(filepath.Join(pool, ".hostpath", "clones"), 0o700))

	refused(t, root, s, pool)

	id, err := s.Snapshot(root, "src", ".hostpath/clones/c", 16*mib)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	clone := filepath.Join(pool, ".hostpath", "clones", "c")
	sameContent(t, src, clone)
	if got := subvolumeIDOf(t, clone); got != id || id == srcID {
		t.Errorf("Snapshot = %d; the snapshot is subvolume %d, the source %d", id, got, srcID)
	}
	if ids, _ := e.IDs(root); !slices.Contains(ids, id) {
		t.Errorf("IDs() = %v, without the snapshot's %d", ids, id)
	}
	pf, err := root.Open(".")
	mustDo(t, err)
	for _, q := range []uint64{srcID, id} {
		members, err := qgroupMembers(pf, qgroupID(1, q))
		if err != nil || !slices.Equal(members, []uint64{q}) {
			t.Errorf("members of 1/%d: %v, %v; want only 0/%d", q, members, err, q)
		}
	}
	pf.Close()
	be := e.(*btrfsEnforcer)
	if u, err := be.sysfs.qgroupUsage(1, id); err != nil || u.LimitBytes != 16*mib {
		t.Errorf("qgroup 1/%d: %+v, %v; want a limit of 16 MiB", id, u, err)
	}

	// The shared 8 MiB stay charged to the source: the snapshot takes 16
	// MiB of new data, no more.
	n, err := write(filepath.Join(clone, "more"), 32*mib)
	if !errors.Is(err, syscall.EDQUOT) || n < 12*mib || n > 16*mib {
		t.Errorf("write 32 MiB into a snapshot limited to 16 MiB: %d bytes, %v; want EDQUOT after 12 to 16 MiB", n, err)
	}
	t.Logf("EDQUOT in the snapshot after %d bytes", n)
	if n, err := write(filepath.Join(src, "more"), 16*mib); err != nil {
		t.Errorf("write 16 MiB more into the source: %v after %d bytes", err, n)
	}

	// Renamed into place, it is a volume like any other.
	mustDo(t, root.Rename(".hostpath/clones/c", "c"))
	if got, err := e.ID(root, "c"); err != nil || got != id {
		t.Errorf("ID(c) = %d, %v; want %d", got, err, id)
	}
	syncfs(t, pool)
	if u, err := e.Usage(root, "c", id); err != nil || u.LimitBytes != 16*mib {
		t.Errorf("Usage(c) = %+v, %v", u, err)
	} else {
		t.Logf("Usage of the snapshot: %+v", u)
	}
	for _, v := range []struct {
		name string
		id   uint64
	}{{"c", id}, {"src", srcID}} {
		if err := root.RemoveAll(v.name); err != nil {
			t.Fatalf("remove %s: %v", v.name, err)
		}
		if err := e.Release(root, v.id); err != nil {
			t.Fatalf("Release %s: %v", v.name, err)
		}
	}
	if after, _ := e.IDs(root); !slices.Equal(after, before) {
		t.Errorf("IDs() = %v after removing both, want %v", after, before)
	}
}

// refused checks the sources and destinations Snapshot refuses, and that
// it leaves nothing behind then.
func refused(t *testing.T, root *os.Root, s Snapshotter, pool string) {
	t.Helper()
	mustDo(t, root.Mkdir("plain", 0o700))
	e := s.(Enforcer)
	nestID, err := e.Make(root, "nest", 16*mib)
	mustDo(t, err)
	defer func() {
		mustDo(t, root.RemoveAll("nest"))
		mustDo(t, e.Release(root, nestID))
	}()
	nest, err := root.Open("nest")
	mustDo(t, err)
	mustDo(t, createSubvolume(nest, "inner"))
	nest.Close()
	mustDo(t, os.Symlink(filepath.Join(pool, ".hostpath", "clones"), filepath.Join(pool, ".hostpath", "link")))
	for _, tc := range []struct {
		name, src, dst string
		want           error
	}{
		{"a plain directory", "plain", ".hostpath/clones/x", ErrNotSubvolume},
		{"a subvolume holding a subvolume", "nest", ".hostpath/clones/x", ErrNotSubvolume},
		{"a missing source", "missing", ".hostpath/clones/x", os.ErrNotExist},
		{"a parent through a symlink", "src", ".hostpath/link/x", nil}, // ENOTDIR or ELOOP
		{"an existing destination", "src", "plain", os.ErrExist},
		{"a destination with ..", "src", ".hostpath/../x", nil},
		{"an absolute destination", "src", "/x", nil},
	} {
		_, err := s.Snapshot(root, tc.src, tc.dst, mib)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Snapshot of %s as %s: %v, want %v", tc.src, tc.dst, err, tc.want)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
	}
	for _, p := range []string{"x", ".hostpath/clones/x"} {
		if _, err := root.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after refused snapshots: %v", p, err)
		}
	}
}

// sameContent fails the test unless b has the files, directories and
// symlinks of a with the same data, and a's mode.
func sameContent(t *testing.T, a, b string) {
	t.Helper()
	ai, err := os.Stat(a)
	mustDo(t, err)
	bi, err := os.Stat(b)
	mustDo(t, err)
	if ai.Mode() != bi.Mode() {
		t.Errorf("mode of the snapshot %v, of the source %v", bi.Mode(), ai.Mode())
	}
	for _, rel := range []string{"data", "d/f"} {
		x, err := os.ReadFile(filepath.Join(a, rel))
		mustDo(t, err)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s in the snapshot: %d bytes, %v; want the source's %d", rel, len(y), err, len(x))
		}
	}
	if target, err := os.Readlink(filepath.Join(b, "link")); err != nil || target != "/" {
		t.Errorf("link in the snapshot: %q, %v", target, err)
	}
}

// mustDo fails the test on err.
func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBtrfsSnapshotCleanup: a snapshot whose qgroup cannot be set up is
// deleted again, with the files it holds.
func TestBtrfsSnapshotCleanup(t *testing.T) {
	mnt := quotatest.MountBtrfs(t) // no quotas: creating a qgroup fails
	root := openPool(t, mnt)
	pool, err := root.Open(".")
	mustDo(t, err)
	err = createSubvolume(pool, "src")
	pool.Close()
	mustDo(t, err)
	mustDo(t, os.WriteFile(filepath.Join(mnt, "pool", "src", "f"), []byte("data"), 0o644))
	e := &btrfsEnforcer{sysfs: btrfsSysfs{dir: t.TempDir()}}
	if _, err := e.Snapshot(root, "src", "snap", mib); err == nil {
		t.Fatal("Snapshot without quotas succeeded")
	} else {
		t.Logf("Snapshot without quotas: %v", err)
	}
	if _, err := root.Lstat("snap"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Snapshot left the snapshot behind: %v", err)
	}
}
