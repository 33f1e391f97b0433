//go:build linux

package quota

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeProject is a kernel with project quotas: it keeps the limits of each
// project, the project of each directory it was asked about, and charges
// each such directory, while it exists, to its project as one inode.
type fakeProject struct {
	mu sync.Mutex
	// flags is what stateFlags returns, with stateErr.
	flags    uint16
	stateErr error
	// xfs makes getQuota fail with ENOENT for a project without a quota.
	xfs bool
	// quotas holds the limits (and extra usage a test adds) per project.
	quotas map[uint32]ifDqblk
	// dirs holds the project and path of the directories, by inode.
	dirs map[uint64]fakeDir
	// failSetXattr and failSetQuota make setXattr and setQuota fail.
	failSetXattr, failSetQuota error
}

type fakeDir struct {
	path string
	x    fsxattr
}

var _ projectOps = &fakeProject{}

func newFakeProject() *fakeProject {
	return &fakeProject{
		flags:  fsQuotaPDQAcct | fsQuotaPDQEnfd,
		quotas: map[uint32]ifDqblk{},
		dirs:   map[uint64]fakeDir{},
	}
}

// current returns the quota of project id as the kernel would: its limits
// plus the directories charged to it. ok is false when the project has
// neither a quota entry nor a directory.
func (k *fakeProject) current(id uint32) (d ifDqblk, ok bool) {
	d, ok = k.quotas[id]
	for ino, dir := range k.dirs {
		var st unix.Stat_t
		if unix.Lstat(dir.path, &st) != nil || st.Ino != ino {
			continue // removed
		}
		if dir.x.projid == id {
			d.curinodes++
			d.curspace += 4096
			ok = true
		}
	}
	return d, ok
}

func (k *fakeProject) stateFlags(*os.File) (uint16, error) {
	return k.flags, k.stateErr
}

func (k *fakeProject) getQuota(_ *os.File, id uint32) (ifDqblk, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d, ok := k.current(id)
	if !ok && k.xfs {
		return ifDqblk{}, unix.ENOENT
	}
	return d, nil
}

func (k *fakeProject) nextQuota(_ *os.File, id uint32) (uint32, ifDqblk, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ids := map[uint32]bool{}
	for p := range k.quotas {
		ids[p] = true
	}
	for _, dir := range k.dirs {
		ids[dir.x.projid] = true
	}
	for _, p := range slices.Sorted(maps.Keys(ids)) {
		if p < id {
			continue
		}
		if d, ok := k.current(p); ok && (k.xfs || !d.free()) {
			return p, d, nil
		}
	}
	return 0, ifDqblk{}, unix.ENOENT
}

func (k *fakeProject) setQuota(_ *os.File, id uint32, d ifDqblk) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failSetQuota != nil {
		return k.failSetQuota
	}
	q := k.quotas[id]
	if d.valid&qifBLimits != 0 {
		q.bhardlimit, q.bsoftlimit = d.bhardlimit, d.bsoftlimit
	}
	if d.valid&qifILimits != 0 {
		q.ihardlimit, q.isoftlimit = d.ihardlimit, d.isoftlimit
	}
	k.quotas[id] = q
	return nil
}

// inode returns the inode number of f and its path.
func inode(f *os.File) (uint64, string, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	path, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	return fi.Sys().(*syscall.Stat_t).Ino, path, err
}

func (k *fakeProject) getXattr(f *os.File) (fsxattr, error) {
	ino, _, err := inode(f)
	if err != nil {
		return fsxattr{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dirs[ino].x, nil
}

func (k *fakeProject) setXattr(f *os.File, x fsxattr) error {
	ino, path, err := inode(f)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failSetXattr != nil {
		return k.failSetXattr
	}
	k.dirs[ino] = fakeDir{path: path, x: x}
	return nil
}

// limited returns the projects that have a limit.
func (k *fakeProject) limited() []uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []uint32
	for id, d := range k.quotas {
		if d.limited() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// tempRoot opens a new temporary directory as a root.
func tempRoot(t *testing.T) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}
