//go:build linux

package quota

import (
	"testing"
	"unsafe"
)

func TestStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"btrfs_ioctl_vol_args", unsafe.Sizeof(volArgs{}), sizeofVolArgs},
		{"btrfs_ioctl_vol_args_v2", unsafe.Sizeof(volArgsV2{}), sizeofVolArgsV2},
		{"btrfs_ioctl_ino_lookup_args", unsafe.Sizeof(inoLookupArgs{}), sizeofInoLookupArgs},
		{"btrfs_ioctl_search_args", unsafe.Sizeof(searchArgs{}), sizeofSearchArgs},
		{"btrfs_ioctl_search_key", unsafe.Sizeof(searchKey{}), sizeofSearchKey},
		{"btrfs_ioctl_search_header", unsafe.Sizeof(searchHeader{}), sizeofSearchHeader},
		{"btrfs_ioctl_fs_info_args", unsafe.Sizeof(fsInfoArgs{}), sizeofFSInfoArgs},
		{"btrfs_ioctl_quota_ctl_args", unsafe.Sizeof(quotaCtlArgs{}), sizeofQuotaCtlArgs},
		{"btrfs_ioctl_qgroup_assign_args", unsafe.Sizeof(qgroupAssignArgs{}), sizeofQgroupAssignArgs},
		{"btrfs_ioctl_qgroup_create_args", unsafe.Sizeof(qgroupCreateArgs{}), sizeofQgroupCreateArgs},
		{"btrfs_ioctl_qgroup_limit_args", unsafe.Sizeof(qgroupLimitArgs{}), sizeofQgroupLimitArgs},
		{"fsxattr", unsafe.Sizeof(fsxattr{}), sizeofFsxattr},
		{"fs_quota_statv", unsafe.Sizeof(fsQuotaStatv{}), 160},
		{"if_nextdqblk", unsafe.Sizeof(ifNextDqblk{}), 72},
	} {
		if tc.got != tc.want {
			t.Errorf("size of %s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	// struct if_dqblk is 68 bytes padded to the alignment of __u64: 72,
	// but 68 where that is 4 (386, arm).
	if got, align := unsafe.Sizeof(ifDqblk{}), unsafe.Alignof(uint64(0)); got != (68+align-1)/align*align {
		t.Errorf("size of if_dqblk = %d with 8-byte integers aligned to %d", got, align)
	}
	if got := qcmd(qGetQuota, prjQuota); got != 0x80000702 {
		t.Errorf("QCMD(Q_GETQUOTA, PRJQUOTA) = %#x, want 0x80000702", got)
	}
	if qXGetQStatV != 0x5808 {
		t.Errorf("Q_XGETQSTATV = %#x, want 0x5808", qXGetQStatV)
	}
}
