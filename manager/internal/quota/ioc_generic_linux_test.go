//go:build linux && !(mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc64)

package quota

import "testing"

// TestIoctlNumbers compares the request numbers with those the C headers
// give on x86 and arm.
func TestIoctlNumbers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uint64
	}{
		{"BTRFS_IOC_SUBVOL_CREATE", iocSubvolCreate, 0x5000940e},
		{"BTRFS_IOC_TREE_SEARCH", iocTreeSearch, 0xd0009411},
		{"BTRFS_IOC_INO_LOOKUP", iocInoLookup, 0xd0009412},
		{"BTRFS_IOC_FS_INFO", iocFSInfo, 0x8400941f},
		{"BTRFS_IOC_QUOTA_CTL", iocQuotaCtl, 0xc0109428},
		{"BTRFS_IOC_QGROUP_ASSIGN", iocQgroupAssign, 0x40189429},
		{"BTRFS_IOC_QGROUP_CREATE", iocQgroupCreate, 0x4010942a},
		{"BTRFS_IOC_QGROUP_LIMIT", iocQgroupLimit, 0x8030942b},
		{"FS_IOC_FSGETXATTR", iocFSGetXattr, 0x801c581f},
		{"FS_IOC_FSSETXATTR", iocFSSetXattr, 0x401c5820},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.name, tc.got, tc.want)
		}
	}
}
