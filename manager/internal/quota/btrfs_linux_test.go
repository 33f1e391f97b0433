//go:build linux

package quota

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"hostpath.dev/manager/internal/quota/quotatest"
)

const mib = 1 << 20

// openPool makes the pool directory pool in mnt and opens it as a root.
func openPool(t *testing.T, mnt string) *os.Root {
	t.Helper()
	dir := filepath.Join(mnt, "pool")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// quotaCtl runs BTRFS_IOC_QUOTA_CTL cmd on the filesystem of path.
func quotaCtl(t *testing.T, path string, cmd uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cmd == btrfsQuotaCtlEnableSimple {
		err = EnableSimpleQuotas(f)
	} else {
		args := quotaCtlArgs{cmd: cmd}
		err = ioctl(f, iocQuotaCtl, unsafe.Pointer(&args))
	}
	if err != nil {
		t.Fatalf("quota ctl %d on %s: %v", cmd, path, err)
	}
}

// write appends up to n bytes to the file path, 1 MiB at a time, and
// returns how many it wrote and the first error.
func write(path string, n int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	buf := bytes.Repeat([]byte{0xab}, mib)
	var written int64
	for written < n {
		m, err := f.Write(buf[:min(int64(len(buf)), n-written)])
		written += int64(m)
		if err != nil {
			f.Close()
			return written, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return written, err
	}
	return written, f.Close()
}

// syncfs commits the filesystem of path, so that sysfs shows current
// qgroup counters.
func syncfs(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

func TestBtrfsSimpleQuotas(t *testing.T) {
	mnt := quotatest.MountBtrfs(t)
	quotaCtl(t, mnt, btrfsQuotaCtlEnableSimple)
	root := openPool(t, mnt)
	pool := filepath.Join(mnt, "pool")

	e := Detect(root)
	if got := e.Support(); got.Kind != KindBtrfs {
		t.Fatalf("Support() = %+v, want kind %q", got, KindBtrfs)
	}
	be := e.(*btrfsEnforcer)
	before, err := e.IDs(root)
	if err != nil {
		t.Fatal(err)
	}

	id, err := e.Make(root, "v1", 16*mib)
	if err != nil {
		t.Fatalf("Make: %v", err)
	}
	fi, err := root.Lstat("v1")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != os.ModeDir|0o700 {
		t.Errorf("mode of v1 = %v, want drwx------", fi.Mode())
	}
	if ino := fi.Sys().(*syscall.Stat_t).Ino; ino != btrfsFirstFreeObjectID {
		t.Errorf("v1 has inode %d, not a subvolume", ino)
	}
	ids, err := e.IDs(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids, id) || len(ids) != len(before)+1 {
		t.Errorf("IDs() = %v after making %d, before %v", ids, id, before)
	}
	if _, err := e.Make(root, "v1", 16*mib); !errors.Is(err, os.ErrExist) {
		t.Errorf("Make of an existing volume: %v, want it to exist", err)
	}

	// A second volume, which must not be affected by the first one's limit.
	id2, err := e.Make(root, "v2", 16*mib)
	if err != nil {
		t.Fatalf("Make v2: %v", err)
	}

	// The volume's own data and that of a subvolume the pod makes inside
	// it count against the limit together.
	if n, err := write(filepath.Join(pool, "v1", "a"), 8*mib); err != nil {
		t.Fatalf("write 8 MiB into v1: %v after %d bytes", err, n)
	}
	v1, err := root.Open("v1")
	if err != nil {
		t.Fatal(err)
	}
	err = createSubvolume(v1, "nested")
	v1.Close()
	if err != nil {
		t.Fatalf("create a nested subvolume: %v", err)
	}
	nested := filepath.Join(pool, "v1", "nested")
	nestedID := subvolumeIDOf(t, nested)
	pf, err := root.Open(".")
	if err != nil {
		t.Fatal(err)
	}
	members, err := qgroupMembers(pf, qgroupID(1, id))
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{id, nestedID}; !slices.Equal(members, want) {
		t.Errorf("members of 1/%d = %v, want %v: the nested subvolume did not join", id, members, want)
	}
	n, err := write(filepath.Join(nested, "b"), 32*mib)
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("write 32 MiB into a nested subvolume of a 16 MiB volume: %d bytes, %v; want EDQUOT", n, err)
	}
	t.Logf("EDQUOT in the nested subvolume after %d bytes there, %d in the volume", n, 8*mib+n)
	if total := 8*mib + n; total < 12*mib || total > 16*mib {
		t.Errorf("the volume took %d bytes under a 16 MiB limit, want 12 MiB to 16 MiB", total)
	}
	if n, err := write(filepath.Join(pool, "v1", "c"), 4*mib); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("write 4 MiB more into the full volume: %d bytes, %v; want EDQUOT", n, err)
	}
	if n, err := write(filepath.Join(pool, "v2", "a"), 8*mib); err != nil {
		t.Errorf("write 8 MiB into v2: %v after %d bytes", err, n)
	}

	// A crash in Make after the subvolume was made leaves it without its
	// qgroup 1/ID: ID finds the subvolume's ID and SetLimit sets up the
	// rest. The qgroup is charged what the subvolume already holds.
	if got, err := e.ID(root, "v2"); err != nil || got != id2 {
		t.Errorf("ID(v2) = %d, %v; want %d", got, err, id2)
	}
	if _, err := e.ID(root, "v2/a"); err == nil {
		t.Error("ID of a file succeeded")
	}
	pf, err = root.Open(".")
	if err != nil {
		t.Fatal(err)
	}
	err = release(pf, id2)
	pf.Close()
	if err != nil {
		t.Fatalf("release the qgroup of v2: %v", err)
	}
	if ids, _ := e.IDs(root); slices.Contains(ids, id2) {
		t.Fatalf("IDs() = %v after releasing the qgroup of v2", ids)
	}
	if err := e.SetLimit(root, "v2", id2, 12*mib); err != nil {
		t.Fatalf("SetLimit of v2 without its qgroup: %v", err)
	}
	n, err = write(filepath.Join(pool, "v2", "b"), 8*mib)
	if !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("write 8 MiB into v2 holding 8 MiB under a new limit of 12 MiB: %d bytes, %v; want EDQUOT", n, err)
	}
	t.Logf("EDQUOT in v2 after %d more bytes", n)

	if err := e.SetLimit(root, "v1", id, 48*mib); err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
	if n, err := write(filepath.Join(pool, "v1", "d"), 16*mib); err != nil {
		t.Errorf("write 16 MiB after raising the limit to 48 MiB: %v after %d bytes", err, n)
	}
	if err := e.SetLimit(root, "v1", id2, 48*mib); err == nil {
		t.Error("SetLimit with the ID of another volume succeeded")
	}

	syncfs(t, pool)
	u, err := e.Usage(root, "v1", id)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	t.Logf("Usage of v1: %+v", u)
	if u.LimitBytes != 48*mib || u.UsedInodes != -1 || u.UsedBytes < 28*mib || u.UsedBytes > 34*mib {
		t.Errorf("Usage = %+v, want a limit of 48 MiB, about 30 MiB used and no inode count", u)
	}

	// Remove as the manager does, by emptying the tree and rmdir-ing the
	// subvolumes, then release.
	for _, v := range []struct {
		name string
		id   uint64
	}{{"v1", id}, {"v2", id2}} {
		if err := root.RemoveAll(v.name); err != nil {
			t.Fatalf("remove %s: %v", v.name, err)
		}
		_, err := os.Stat(filepath.Join(be.sysfs.dir, "qgroups", "0_"+strconv.FormatUint(v.id, 10)))
		t.Logf("after rmdir of %s, qgroup 0/%d exists: %v", v.name, v.id, err == nil)
		if err := e.Release(root, v.id); err != nil {
			t.Fatalf("Release %s: %v", v.name, err)
		}
		if err := e.Release(root, v.id); err != nil {
			t.Errorf("Release %s again: %v", v.name, err)
		}
	}
	after, err := e.IDs(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) {
		t.Errorf("IDs() = %v after releasing all, want %v as before", after, before)
	}
	logQgroups(t, be.sysfs, "after Release")
	if btrfs, err := exec.LookPath("btrfs"); err == nil {
		if out, err := exec.Command(btrfs, "subvolume", "sync", mnt).CombinedOutput(); err != nil {
			t.Logf("btrfs subvolume sync: %v: %s", err, out)
		}
		logQgroups(t, be.sysfs, "once the deleted subvolumes are cleaned up")
	}
}

// subvolumeIDOf returns the ID of the subvolume whose top is path.
func subvolumeIDOf(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := subvolumeID(f)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// logQgroups logs the qgroups sysfs lists.
func logQgroups(t *testing.T, s btrfsSysfs, when string) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "qgroups"))
	if err != nil {
		t.Log(err)
		return
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	t.Logf("qgroups %s: %s", when, strings.Join(names, " "))
}

func TestBtrfsNotEnforced(t *testing.T) {
	mnt := quotatest.MountBtrfs(t)
	root := openPool(t, mnt)

	got := Detect(root).Support()
	if got.Kind != KindNone || !strings.Contains(got.Reason, "not enabled") || !strings.Contains(got.Reason, "--simple "+root.Name()) {
		t.Errorf("Support() without quotas = %+v", got)
	}

	// A failure after the subvolume is made leaves nothing behind: without
	// quotas, creating the qgroup fails.
	e := &btrfsEnforcer{sysfs: btrfsSysfs{dir: t.TempDir()}}
	if _, err := e.Make(root, "v", mib); err == nil {
		t.Error("Make without quotas succeeded")
	} else {
		t.Logf("Make without quotas: %v", err)
	}
	if _, err := root.Lstat("v"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Make left the subvolume behind: %v", err)
	}

	quotaCtl(t, mnt, 1) // BTRFS_QUOTA_CTL_ENABLE: full qgroup accounting
	got = Detect(root).Support()
	if got.Kind != KindNone || !strings.Contains(got.Reason, "full qgroup mode") {
		t.Errorf("Support() in full qgroup mode = %+v", got)
	}
	f, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := EnableSimpleQuotas(f); err == nil || !strings.Contains(err.Error(), `mode "qgroup"`) {
		t.Errorf("EnableSimpleQuotas in full qgroup mode: %v, want an error naming the mode", err)
	}
	quotaCtl(t, mnt, 2) // BTRFS_QUOTA_CTL_DISABLE
	for range 2 {
		if err := EnableSimpleQuotas(f); err != nil {
			t.Errorf("EnableSimpleQuotas: %v", err)
		}
	}
	if got := Detect(root).Support(); got.Kind != KindBtrfs {
		t.Errorf("Support() with simple quotas = %+v", got)
	}
}
