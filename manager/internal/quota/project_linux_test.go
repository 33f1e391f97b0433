//go:build linux

package quota

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

const testBase = 1000

// newProjectEnforcer returns an enforcer of count project IDs from
// testBase on the fake kernel k.
func newProjectEnforcer(k *fakeProject, count uint32) *projectEnforcer {
	return &projectEnforcer{kind: KindXFS, ops: k, base: testBase, count: count}
}

func TestProjectMake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		xfs     bool
		quotas  map[uint32]ifDqblk // the state of the kernel before
		count   uint32
		want    uint64
		wantErr string
	}{
		{name: "empty", want: testBase},
		{name: "empty xfs", xfs: true, want: testBase},
		{
			name: "skips limited and used projects",
			quotas: map[uint32]ifDqblk{
				testBase:     {bhardlimit: 1},
				testBase + 1: {curinodes: 3},
				testBase + 2: {isoftlimit: 5},
				testBase + 3: {curspace: 4096},
			},
			want: testBase + 4,
		},
		{
			name: "takes a free project the kernel still lists",
			xfs:  true,
			quotas: map[uint32]ifDqblk{
				testBase:     {bhardlimit: 1},
				testBase + 1: {},
				testBase + 2: {bhardlimit: 1},
			},
			want: testBase + 1,
		},
		{
			name:   "ignores projects outside the range",
			quotas: map[uint32]ifDqblk{testBase - 1: {bhardlimit: 1}, testBase + 10: {bhardlimit: 1}},
			want:   testBase,
		},
		{
			name:    "range exhausted",
			quotas:  map[uint32]ifDqblk{testBase: {bhardlimit: 1}, testBase + 1: {curinodes: 1}},
			count:   2,
			wantErr: "all 2 project IDs from 1000 are in use",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeProject()
			k.xfs = tc.xfs
			for id, d := range tc.quotas {
				k.quotas[id] = d
			}
			count := tc.count
			if count == 0 {
				count = 100
			}
			e := newProjectEnforcer(k, count)
			root := tempRoot(t)
			id, err := e.Make(root, "v", 10*mib+1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Make = %d, %v; want error %q", id, err, tc.wantErr)
				}
				if _, err := root.Lstat("v"); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a failed Make left the directory: %v", err)
				}
				return
			}
			if err != nil || id != tc.want {
				t.Fatalf("Make = %d, %v; want %d", id, err, tc.want)
			}
			fi, err := root.Lstat("v")
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != fs.ModeDir|0o700 {
				t.Errorf("mode = %v, want drwx------", fi.Mode())
			}
			f, err := root.Open("v")
			if err != nil {
				t.Fatal(err)
			}
			x, _ := k.getXattr(f)
			f.Close()
			if x.projid != uint32(id) || x.xflags&fsXflagProjInherit == 0 {
				t.Errorf("fsxattr of the directory = %+v, want project %d inherited", x, id)
			}
			if got := k.quotas[uint32(id)]; got.bhardlimit != 10*1024+1 || got.bsoftlimit != 0 {
				t.Errorf("quota of project %d = %+v, want a hard limit of 10241 KiB", id, got)
			}
		})
	}
}

func TestProjectMakeFailure(t *testing.T) {
	for _, tc := range []struct {
		name         string
		failSetXattr error
		failSetQuota error
		want         string
	}{
		{name: "FS_IOC_FSSETXATTR", failSetXattr: unix.EOPNOTSUPP, want: "set project 1000 on volume directory"},
		{name: "Q_SETQUOTA", failSetQuota: unix.EPERM, want: "limit project 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeProject()
			k.failSetXattr, k.failSetQuota = tc.failSetXattr, tc.failSetQuota
			e := newProjectEnforcer(k, 100)
			root := tempRoot(t)
			_, err := e.Make(root, "v", mib)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Make: %v, want an error with %q", err, tc.want)
			}
			if _, err := root.Lstat("v"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a failed Make left the directory: %v", err)
			}
			if ids := k.limited(); len(ids) != 0 {
				t.Errorf("a failed Make left limits on projects %v", ids)
			}
			if d, _ := k.getQuota(nil, testBase); !d.free() {
				t.Errorf("a failed Make left project %d in use: %+v", testBase, d)
			}
			// The ID is free for the next volume.
			k.failSetXattr, k.failSetQuota = nil, nil
			if id, err := e.Make(root, "v", mib); err != nil || id != testBase {
				t.Errorf("Make after a failure = %d, %v; want %d", id, err, testBase)
			}
		})
	}
}

func TestProjectConcurrentMakes(t *testing.T) {
	k := newFakeProject()
	e := newProjectEnforcer(k, 100)
	root := tempRoot(t)
	const n = 16
	ids := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ids[i], errs[i] = e.Make(root, fmt.Sprintf("v%d", i), mib)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if got := slices.Compact(slices.Clone(ids)); len(got) != n {
		t.Errorf("concurrent Makes got IDs %v, not %d distinct ones", ids, n)
	}
	listed, err := e.IDs(root)
	if err != nil || !slices.Equal(listed, ids) {
		t.Errorf("IDs() = %v, %v; want %v", listed, err, ids)
	}
}

func TestProjectLimitAndUsage(t *testing.T) {
	k := newFakeProject()
	e := newProjectEnforcer(k, 100)
	root := tempRoot(t)
	id, err := e.Make(root, "v", 4*mib)
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.Make(root, "w", 4*mib)
	if err != nil {
		t.Fatal(err)
	}
	k.quotas[uint32(id)] = ifDqblk{bhardlimit: k.quotas[uint32(id)].bhardlimit, curspace: 1 << 20, curinodes: 9}

	for _, tc := range []struct {
		name    string
		volume  string
		id      uint64
		limit   int64
		want    Usage
		wantErr string
	}{
		{name: "raise", volume: "v", id: id, limit: 8 * mib, want: Usage{LimitBytes: 8 * mib, UsedBytes: 1<<20 + 4096, UsedInodes: 10}},
		{name: "rounds up to KiB", volume: "v", id: id, limit: 8*mib + 1, want: Usage{LimitBytes: 8*mib + 1024, UsedBytes: 1<<20 + 4096, UsedInodes: 10}},
		{name: "another volume's ID", volume: "v", id: other, limit: 8 * mib, wantErr: "has project 1000, not 1001"},
		{name: "ID out of range", volume: "v", id: testBase + 100, limit: 8 * mib, wantErr: "not in the range"},
		{name: "zero limit", volume: "v", id: id, limit: 0, wantErr: "not positive"},
		{name: "missing volume", volume: "x", id: id, limit: mib, wantErr: "open volume directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.SetLimit(root, tc.volume, tc.id, tc.limit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("SetLimit: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetLimit: %v", err)
			}
			u, err := e.Usage(root, tc.volume, tc.id)
			if err != nil || u != tc.want {
				t.Errorf("Usage = %+v, %v; want %+v", u, err, tc.want)
			}
		})
	}
	if _, err := e.Usage(root, "w", id); err == nil {
		t.Error("Usage with another volume's ID succeeded")
	}
}

func TestProjectID(t *testing.T) {
	k := newFakeProject()
	e := newProjectEnforcer(k, 100)
	root := tempRoot(t)
	id, err := e.Make(root, "v", mib)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Mkdir("plain", 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		want    uint64
		wantErr string
	}{
		{name: "v", want: id},
		{name: "plain", wantErr: "project ID 0 is not in the range"},
		{name: "missing", wantErr: "open volume directory"},
		{name: "..", wantErr: "invalid volume name"},
	} {
		got, err := e.ID(root, tc.name)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ID(%q) = %d, %v; want an error with %q", tc.name, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ID(%q) = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

func TestProjectRelease(t *testing.T) {
	for _, xfs := range []bool{false, true} {
		t.Run(fmt.Sprintf("xfs=%v", xfs), func(t *testing.T) {
			k := newFakeProject()
			k.xfs = xfs
			e := newProjectEnforcer(k, 100)
			root := tempRoot(t)
			id, err := e.Make(root, "v", mib)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Release(root, id); err == nil || !strings.Contains(err.Error(), "still in use") {
				t.Errorf("Release of a volume that exists: %v, want it in use", err)
			}
			if err := root.Remove("v"); err != nil {
				t.Fatal(err)
			}
			if ids, err := e.IDs(root); err != nil || !slices.Equal(ids, []uint64{id}) {
				t.Errorf("IDs() before Release = %v, %v; want [%d]", ids, err, id)
			}
			for i := range 2 {
				if err := e.Release(root, id); err != nil {
					t.Errorf("Release %d: %v", i+1, err)
				}
			}
			if ids, err := e.IDs(root); err != nil || len(ids) != 0 {
				t.Errorf("IDs() after Release = %v, %v; want none", ids, err)
			}
			if err := e.Release(root, 7); err == nil {
				t.Error("Release of a project outside the range succeeded")
			}
			// The released ID is taken again.
			if again, err := e.Make(root, "w", mib); err != nil || again != id {
				t.Errorf("Make after Release = %d, %v; want %d", again, err, id)
			}
		})
	}
}
