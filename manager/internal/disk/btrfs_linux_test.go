//go:build linux

package disk

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	testingclock "k8s.io/utils/clock/testing"

	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/manager/internal/quota"
	"hostpath.dev/manager/internal/quota/quotatest"
)

// TestBtrfsVolumeLifecycle runs the Store on a real btrfs pool with simple
// quotas: a volume is a subvolume limited to its size, subvolumes a pod
// makes inside it (nested, and in deep trees) count against the limit and
// do not stop its removal, and deleting it leaves no qgroup behind.
func TestBtrfsVolumeLifecycle(t *testing.T) {
	mnt := quotatest.MountBtrfs(t)
	btrfsCLI, err := exec.LookPath("btrfs")
	if err != nil {
		t.Skip("the btrfs command is not installed (btrfs-progs)")
	}
	dir, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	err = quota.EnableSimpleQuotas(dir)
	dir.Close()
	if err != nil {
		t.Skipf("simple quotas: %v", err)
	}
	e := newTestEnv(t)
	pool := filepath.Join(mnt, "pool")
	mustMkdir(t, pool)
	s, err := New(Config{
		NodeName: "node-a", Pools: map[string]string{"default": pool}, Identity: e.identity,
		Clock: testingclock.NewFakePassiveClock(t1),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxOf(t)
	v, created, err := s.CreateVolume(ctx, "default", "v1", sized("pv-a", 16<<20), 0o777, "")
	if err != nil || !created {
		t.Fatalf("CreateVolume = %v, %v", created, err)
	}
	if v.Enforcement != quota.KindBtrfs || v.SizeBytes != 16<<20 {
		t.Fatalf("volume = %+v, want btrfs, 16Mi", v)
	}
	other, _, err := s.CreateVolume(ctx, "default", "v2", sized("pv-b", 16<<20), 0o777, "")
	if err != nil {
		t.Fatal(err)
	}

	// What a pod could leave: subvolumes at the top, deep inside trees,
	// inside each other, with files and directories in them.
	vol := filepath.Join(pool, "v1")
	subvolume := func(p string) {
		t.Helper()
		if out, err := exec.Command(btrfsCLI, "subvolume", "create", p).CombinedOutput(); err != nil {
			t.Fatalf("btrfs subvolume create %s: %v: %s", p, err, out)
		}
	}
	mustMkdir(t, filepath.Join(vol, "x", "y"))
	subvolume(filepath.Join(vol, "a"))
	subvolume(filepath.Join(vol, "x", "y", "deep"))
	subvolume(filepath.Join(vol, "a", "inner"))
	for _, d := range []string{"a/b/c/d", "a/inner/e/f", "x/y/deep/g/h"} {
		mustMkdir(t, filepath.Join(vol, d))
		filetest.Write(t, filepath.Join(vol, d, "file"), "data")
	}
	mustSymlink(t, "/", filepath.Join(vol, "a", "inner", "e", "root"))

	// The nested subvolumes count against the volume's limit.
	if _, err := writeFile(filepath.Join(vol, "a", "inner", "big"), 32<<20); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("writing 32Mi in a subvolume nested in a 16Mi volume: %v, want EDQUOT", err)
	}
	if _, err := writeFile(filepath.Join(other.Path, "big"), 8<<20); err != nil {
		t.Errorf("writing 8Mi in the other volume: %v", err)
	}

	// Growing lets the pod write further.
	if _, err := s.SetSize(ctx, "default", "v1", "pv-a", 64<<20, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := writeFile(filepath.Join(vol, "x", "y", "deep", "more"), 16<<20); err != nil {
		t.Errorf("writing 16Mi after growing to 64Mi: %v", err)
	}

	root, err := os.OpenRoot(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	enf := quota.Detect(root)
	before, err := enf.IDs(root)
	if err != nil || len(before) != 2 {
		t.Fatalf("quota IDs before deleting = %v, %v; want two", before, err)
	}
	for _, name := range []string{"v1", "v2"} {
		if _, err := s.DeleteVolume(ctx, "default", name, map[string]string{"v1": "pv-a", "v2": "pv-b"}[name], false, ""); err != nil {
			t.Fatalf("DeleteVolume %s: %v", name, err)
		}
		if _, err := os.Lstat(filepath.Join(pool, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after DeleteVolume: %v", name, err)
		}
	}
	if ids, err := enf.IDs(root); err != nil || len(ids) != 0 {
		t.Errorf("quota IDs after deleting = %v, %v; want none (no qgroup left)", ids, err)
	}
	if _, err := os.Stat("/"); err != nil {
		t.Errorf("the symlink's target: %v", err)
	}
}

// writeFile writes n zero bytes to the new file p, syncs it and returns how
// many bytes it wrote.
func writeFile(p string, n int) (int, error) {
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	written := 0
	for written < n {
		m, err := f.Write(buf)
		written += m
		if err != nil {
			return written, err
		}
	}
	return written, f.Sync()
}
