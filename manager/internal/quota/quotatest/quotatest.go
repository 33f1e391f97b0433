//go:build linux

// Package quotatest mounts real filesystems with quotas for the tests of
// the quota package and of the disk code that uses it.
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
	if os.Geteuid() != 0 {
		t.Skip("mounting a btrfs image needs root")
	}
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		t.Skip("mkfs.btrfs is not installed (btrfs-progs)")
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "btrfs.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(300 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, err := exec.Command(mkfs, "-q", "-f", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.btrfs failed: %v: %s", err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop,commit=1", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a btrfs image through a loop device: %v: %s", err, out)
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
