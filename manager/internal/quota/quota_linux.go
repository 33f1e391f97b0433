//go:build linux

package quota

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// capSysAdmin is the bit of CAP_SYS_ADMIN in a capability set.
const capSysAdmin = 21

// env is what Detect consults besides the pool directory; tests replace
// parts of it.
type env struct {
	// fsType returns the statfs type (magic number) of the filesystem of f.
	fsType func(f *os.File) (uint32, error)
	// btrfsFSID returns the fsid of the btrfs filesystem of f.
	btrfsFSID func(f *os.File) (string, error)
	// sysfs is the btrfs sysfs directory, /sys/fs/btrfs.
	sysfs string
	// procStatus is the process's status file, /proc/self/status.
	procStatus string
	// project makes the system calls of project quotas.
	project projectOps
	// projectBase and projectCount delimit the project IDs to use.
	projectBase, projectCount uint32
}

// defaultEnv returns the environment of the running system.
func defaultEnv() env {
	return env{
		fsType:       fsType,
		btrfsFSID:    btrfsFSID,
		sysfs:        btrfsSysfsRoot,
		procStatus:   "/proc/self/status",
		project:      sysProjectOps{},
		projectBase:  ProjectIDBase,
		projectCount: ProjectIDCount,
	}
}

// detect is Detect in the environment e.
func detect(root *os.Root, e env) Enforcer {
	pool, err := openDir(root, ".")
	if err != nil {
		return notEnforced("cannot open the pool directory %s to detect its filesystem: %v", root.Name(), err)
	}
	defer pool.Close()
	magic, err := e.fsType(pool)
	if err != nil {
		return notEnforced("cannot tell the filesystem of %s: %v", root.Name(), err)
	}
	switch magic {
	case unix.BTRFS_SUPER_MAGIC:
		return detectBtrfs(root, pool, e)
	case unix.XFS_SUPER_MAGIC:
		return detectProject(root, pool, KindXFS, e)
	case unix.EXT4_SUPER_MAGIC:
		return detectProject(root, pool, KindExt4, e)
	}
	return notEnforced("%s has no per-directory quotas: sizes are enforced on btrfs (simple quotas), xfs and ext4 (project quotas) only", fsName(magic))
}

// fsType returns the statfs type of the filesystem of f.
func fsType(f *os.File) (uint32, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st unix.Statfs_t
	var serr error
	if err := conn.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("statfs: %w", serr)
	}
	return uint32(st.Type), nil
}

// hasCapSysAdmin reports whether CAP_SYS_ADMIN is in the effective set
// (CapEff) of the process status file path.
func hasCapSysAdmin(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		hex, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		set, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return false, fmt.Errorf("parse CapEff of %s: %w", path, err)
		}
		return set&(1<<capSysAdmin) != 0, nil
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return false, fmt.Errorf("no CapEff in %s", path)
}
