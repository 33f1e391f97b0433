//go:build linux

// Package quotatest mounts real filesystems for the tests of the quota
// package, of the disk code that uses it, and of volume clones.
package quotatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MountBtrfs makes a 300 MiB btrfs image in a temporary directory, mounts
// it through a loop device and returns the mount point; the cleanup
// unmounts it (the loop device detaches itself). It commits every second,
// so that the cleaner drops deleted subvolumes within seconds, not 30. It skips the test unless
// it runs as root with mkfs.btrfs and loop devices.
func MountBtrfs(t testing.TB) string {
	t.Helper()
	return MountBtrfsSize(t, 300<<20)
}

// MountBtrfsSize is MountBtrfs with an image of sizeBytes, for tests and
// benchmarks that need more room.
func MountBtrfsSize(t testing.TB, sizeBytes int64) string {
	t.Helper()
	return mountImage(t, "btrfs", sizeBytes, []string{"-q", "-f"}, "loop,commit=1")
}

// MountXFS makes an xfs image of sizeBytes (at least 300 MiB, xfs's
// minimum) with reflinks enabled in a temporary directory, mounts it
// through a loop device and returns the mount point, as MountBtrfs does.
// It skips the test unless it runs as root with mkfs.xfs, loop devices
// and a kernel that mounts xfs.
func MountXFS(t testing.TB, sizeBytes int64) string {
	t.Helper()
	return mountImage(t, "xfs", sizeBytes, []string{"-q", "-f", "-m", "reflink=1"}, "loop")
}

// mountImage makes a filesystem of type fs in an image file of size
// bytes with mkfs.FS and the arguments mkfsArgs, and mounts it with the
// options opts.
func mountImage(t testing.TB, fs string, size int64, mkfsArgs []string, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("mounting a %s image needs root", fs)
	}
	mkfs, err := exec.LookPath("mkfs." + fs)
	if err != nil {
		t.Skipf("mkfs.%s is not installed", fs)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, fs+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, err := exec.Command(mkfs, append(mkfsArgs, img)...).CombinedOutput(); err != nil {
		t.Skipf("mkfs.%s failed: %v: %s", fs, err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", fs, "-o", opts, img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s image through a loop device: %v: %s", fs, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			// Detach it anyway, so that no mount outlives the test.
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}
