//go:build linux

package quota

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	capsAll     = "CapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n"
	capsNoAdmin = "CapPrm:\t000001ffffdfffff\nCapEff:\t000001ffffdfffff\n"
)

func TestDetect(t *testing.T) {
	const fsid = "0a1b2c3d-0000-4000-8000-00000000000f"
	for _, tc := range []struct {
		name               string
		magic              uint32
		fsTypeErr, fsidErr error
		sysfs              map[string]string // the btrfs sysfs tree
		caps               string
		flags              uint16 // project quota state
		stateErr           error
		want               string // the kind
		reason             string // in the reason
	}{
		{name: "tmpfs", magic: unix.TMPFS_MAGIC, reason: "tmpfs has no per-directory quotas"},
		{name: "overlayfs", magic: unix.OVERLAYFS_SUPER_MAGIC, reason: "overlayfs has no per-directory quotas"},
		{name: "unknown", magic: 0x12345678, reason: "filesystem type 0x12345678 has no per-directory quotas"},
		{name: "statfs fails", fsTypeErr: unix.EIO, reason: "cannot tell the filesystem"},

		{name: "btrfs simple quotas", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/qgroups/mode": "squota\n"}, caps: capsAll, want: KindBtrfs},
		{name: "btrfs without CAP_SYS_ADMIN", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/qgroups/mode": "squota\n"}, caps: capsNoAdmin, reason: "setting btrfs qgroups needs CAP_SYS_ADMIN: install the manager's btrfs variant"},
		{name: "btrfs without CapEff", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/qgroups/mode": "squota\n"}, caps: "Name:\tmanager\n", reason: "cannot read the manager's capabilities"},
		{name: "btrfs quotas off", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/features/": ""}, caps: capsAll, reason: "btrfs quotas are not enabled on this filesystem: btrfs quota enable --simple POOL (btrfs-progs >= 6.7, kernel >= 6.7)"},
		{name: "btrfs full qgroups", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/qgroups/mode": "qgroup\n"}, caps: capsAll, reason: "btrfs quotas are in full qgroup mode, where a subvolume a pod creates inside its volume escapes its limit"},
		{name: "btrfs qgroups before 6.7", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/qgroups/": ""}, caps: capsAll, reason: "full qgroup mode"},
		{name: "btrfs unknown mode", magic: unix.BTRFS_SUPER_MAGIC, sysfs: map[string]string{fsid + "/qgroups/mode": "future\n"}, caps: capsAll, reason: `unknown mode "future"`},
		{name: "btrfs without sysfs", magic: unix.BTRFS_SUPER_MAGIC, caps: capsAll, reason: "is /sys mounted?"},
		{name: "btrfs fsid fails", magic: unix.BTRFS_SUPER_MAGIC, fsidErr: unix.ENOTTY, caps: capsAll, reason: "cannot read the btrfs filesystem ID"},

		{name: "xfs prjquota", magic: unix.XFS_SUPER_MAGIC, flags: fsQuotaPDQAcct | fsQuotaPDQEnfd, caps: capsAll, want: KindXFS},
		{name: "xfs without quotas", magic: unix.XFS_SUPER_MAGIC, flags: fsQuotaUDQAcctForTest, caps: capsAll, reason: "xfs is not mounted with prjquota"},
		{name: "xfs pqnoenforce", magic: unix.XFS_SUPER_MAGIC, flags: fsQuotaPDQAcct, caps: capsAll, reason: "xfs project quotas are accounted but not enforced"},
		{name: "xfs without CAP_SYS_ADMIN", magic: unix.XFS_SUPER_MAGIC, flags: fsQuotaPDQAcct | fsQuotaPDQEnfd, caps: capsNoAdmin, reason: "setting xfs project quotas needs CAP_SYS_ADMIN"},
		{name: "kernel without quotas", magic: unix.XFS_SUPER_MAGIC, stateErr: unix.ENOSYS, caps: capsAll, reason: "this kernel has no quota support"},
		{name: "quota state fails", magic: unix.XFS_SUPER_MAGIC, stateErr: unix.EPERM, caps: capsAll, reason: "cannot read the xfs quota state"},
		{name: "ext4 prjquota", magic: unix.EXT4_SUPER_MAGIC, flags: fsQuotaPDQAcct | fsQuotaPDQEnfd, caps: capsAll, want: KindExt4},
		{name: "ext4 without project quotas", magic: unix.EXT4_SUPER_MAGIC, caps: capsAll, reason: "ext4 project quotas are not enabled"},
		{name: "ext4 not enforced", magic: unix.EXT4_SUPER_MAGIC, flags: fsQuotaPDQAcct, caps: capsAll, reason: "ext4 project quotas are accounted but not enforced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tempRoot(t)
			dir := t.TempDir()
			writeTree(t, dir, tc.sysfs)
			status := filepath.Join(dir, "status")
			if err := os.WriteFile(status, []byte(tc.caps), 0o644); err != nil {
				t.Fatal(err)
			}
			k := newFakeProject()
			k.flags, k.stateErr = tc.flags, tc.stateErr
			e := env{
				fsType:     func(*os.File) (uint32, error) { return tc.magic, tc.fsTypeErr },
				btrfsFSID:  func(*os.File) (string, error) { return fsid, tc.fsidErr },
				sysfs:      dir,
				procStatus: status,
				project:    k,
			}
			got := detect(root, e).Support()
			reason := strings.ReplaceAll(tc.reason, "POOL", root.Name())
			if got.Kind != tc.want || !strings.Contains(got.Reason, reason) || (got.Kind == KindNone) != (got.Reason != "") {
				t.Errorf("Support() = %+v, want kind %q and a reason with %q", got, tc.want, reason)
			}
		})
	}
}

// fsQuotaUDQAcctForTest is FS_QUOTA_UDQ_ACCT: user quotas are accounted.
const fsQuotaUDQAcctForTest = 1 << 0

// TestDetectHere detects the filesystem of a temporary directory, whatever
// it is: never an error, and a reason exactly when nothing is enforced.
func TestDetectHere(t *testing.T) {
	got := Detect(tempRoot(t)).Support()
	t.Logf("Support() of the temporary directory: %+v", got)
	if (got.Kind == KindNone) != (got.Reason != "") {
		t.Errorf("Support() = %+v", got)
	}
}

func TestHasCapSysAdmin(t *testing.T) {
	for _, tc := range []struct {
		status  string
		want    bool
		wantErr bool
	}{
		{status: capsAll, want: true},
		{status: capsNoAdmin, want: false},
		{status: "CapEff:\t0000000000200000\n", want: true},
		{status: "CapEff:\t0000000000000000\n", want: false},
		{status: "CapEff:\tzz\n", wantErr: true},
		{status: "Name:\tx\n", wantErr: true},
	} {
		path := filepath.Join(t.TempDir(), "status")
		if err := os.WriteFile(path, []byte(tc.status), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := hasCapSysAdmin(path)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("hasCapSysAdmin(%q) = %v, %v; want %v, error %v", tc.status, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := hasCapSysAdmin(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("hasCapSysAdmin of a missing file: %v", err)
	}
}
