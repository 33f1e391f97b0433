package quota

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// btrfsSysfsRoot is where the kernel shows btrfs filesystems in sysfs.
const btrfsSysfsRoot = "/sys/fs/btrfs"

// Quota modes of a btrfs filesystem, as btrfsSysfs.quotaMode reports them.
const (
	btrfsModeOff    = ""       // quotas are disabled
	btrfsModeFull   = "qgroup" // full qgroup accounting
	btrfsModeSimple = "squota" // simple quotas (Linux 6.7)
	// btrfsModeLegacy is full qgroup accounting on a kernel older than
	// 6.7, which does not say the mode.
	btrfsModeLegacy = "qgroup (no mode file)"
)

// btrfsSysfs reads the quota state of one btrfs filesystem from its sysfs
// directory, /sys/fs/btrfs/FSID. Its qgroups directory exists only while
// quotas are enabled, and holds a directory LEVEL_ID per qgroup with its
// counters in bytes (referenced, exclusive, max_referenced, ...).
type btrfsSysfs struct {
	dir string
}

// quotaMode returns the filesystem's quota mode, one of the btrfsMode
// constants or whatever else the kernel writes into qgroups/mode.
func (s btrfsSysfs) quotaMode() (string, error) {
	if _, err := os.Stat(s.dir); err != nil {
		return "", fmt.Errorf("is /sys mounted? %w", err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "qgroups")); errors.Is(err, fs.ErrNotExist) {
		return btrfsModeOff, nil
	} else if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "qgroups", "mode"))
	if errors.Is(err, fs.ErrNotExist) {
		return btrfsModeLegacy, nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// qgroupUsage returns the limit and referenced bytes of the qgroup
// level/id. Inodes are not counted: UsedInodes is -1.
func (s btrfsSysfs) qgroupUsage(level, id uint64) (Usage, error) {
	dir := filepath.Join(s.dir, "qgroups", fmt.Sprintf("%d_%d", level, id))
	used, err := readInt(filepath.Join(dir, "referenced"))
	if err != nil {
		return Usage{}, fmt.Errorf("qgroup %d/%d: %w", level, id, err)
	}
	limit, err := readInt(filepath.Join(dir, "max_referenced"))
	if err != nil {
		return Usage{}, fmt.Errorf("qgroup %d/%d: %w", level, id, err)
	}
	return Usage{LimitBytes: limit, UsedBytes: used, UsedInodes: -1}, nil
}

// qgroupIDs lists the IDs of the qgroups of level, in increasing order.
func (s btrfsSysfs) qgroupIDs(level uint64) ([]uint64, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "qgroups"))
	if err != nil {
		return nil, fmt.Errorf("list btrfs qgroups: %w", err)
	}
	prefix := strconv.FormatUint(level, 10) + "_"
	var ids []uint64
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		if id, err := strconv.ParseUint(rest, 10, 48); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// readInt reads the decimal number a sysfs file holds.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return n, nil
}
