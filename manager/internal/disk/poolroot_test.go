package disk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/manager/internal/identity"
)

// rootStore returns a Store of e's pool "default" with the pool root
// base/pools (not created); called again, it is the Store of a restarted
// manager on the same directories.
func (e *testEnv) rootStore(t testing.TB) (*Store, string) {
	t.Helper()
	root := filepath.Join(e.base, "pools")
	return e.newStore(t, func(c *Config) { c.PoolRoot = root }), root
}

func TestValidatePaths(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		pools map[string]string
		root  string
		want  string // "" means valid
	}{
		{desc: "pools only", pools: map[string]string{"a": "/var/a", "b": "/var/b"}},
		{desc: "pool root beside the pools", pools: map[string]string{"default": "/var/hpvolumes"}, root: "/var/hppools"},
		{desc: "pool root alone", root: "/var/hppools"},
		{desc: "prefix that is no parent", pools: map[string]string{"a": "/var/hp"}, root: "/var/hppools"},
		{desc: "pool is the pool root", pools: map[string]string{"a": "/var/hp"}, root: "/var/hp", want: "overlap"},
		{desc: "pool inside the pool root", pools: map[string]string{"fast": "/var/hp/fast"}, root: "/var/hp", want: "overlap"},
		{desc: "pool root inside a pool", pools: map[string]string{"a": "/var/hp"}, root: "/var/hp/pools", want: "overlap"},
		{desc: "relative pool root", root: "var/hp", want: "pool root"},
		{desc: "unclean pool root", root: "/var/hp/", want: "pool root"},
		{desc: "pool root /", root: "/", want: "pool root"},
		{desc: "nested pools", pools: map[string]string{"a": "/var/hp", "b": "/var/hp/b"}, want: "overlap"},
		{desc: "relative pool", pools: map[string]string{"a": "hp"}, want: "absolute"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := ValidatePaths(tc.pools, tc.root)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("ValidatePaths: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidatePaths error = %v, want one mentioning %q", err, tc.want)
			}
			if _, err := New(Config{Pools: tc.pools, PoolRoot: tc.root, Identity: loadIdentity(t, identity.Config{StateDir: t.TempDir()})}); err == nil {
				t.Error("New accepted the paths")
			}
		})
	}
}

func TestPreparePoolNamedOnTheFly(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	for _, tc := range []struct {
		desc       string
		setup      func(t *testing.T, e *testEnv, root string)
		name       string
		wantReason managerapi.Reason
		wantPath   string // relative to the base; root/NAME when empty
		wantInMsg  string
	}{
		{desc: "new pool, pool root missing", name: "fast"},
		{desc: "existing pool directory keeps its data", name: "fast",
			setup: func(t *testing.T, e *testEnv, root string) {
				filetest.Write(t, mkdirIn(t, root, "fast", "vol"), "data")
			}},
		{desc: "invalid name", name: "Fast_1", wantReason: managerapi.ReasonBadRequest},
		{desc: "name with a slash", name: "a/b", wantReason: managerapi.ReasonBadRequest},
		{desc: "configured name wins", name: "default", wantPath: "pool"},
		{desc: "symlink to a directory outside", name: "fast", wantReason: managerapi.ReasonConflict, wantInMsg: "a symlink",
			setup: func(t *testing.T, e *testEnv, root string) {
				mustMkdir(t, root)
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(root, "fast"))
			}},
		{desc: "dangling symlink to outside", name: "fast", wantReason: managerapi.ReasonConflict, wantInMsg: "a symlink",
			setup: func(t *testing.T, e *testEnv, root string) {
				mustMkdir(t, root)
				mustSymlink(t, filepath.Join(e.base, "sibling", "new"), filepath.Join(root, "fast"))
			}},
		{desc: "symlink to another pool", name: "fast", wantReason: managerapi.ReasonConflict, wantInMsg: "a symlink",
			setup: func(t *testing.T, e *testEnv, root string) {
				mustMkdir(t, filepath.Join(root, "slow"))
				mustSymlink(t, "slow", filepath.Join(root, "fast"))
			}},
		{desc: "file", name: "fast", wantReason: managerapi.ReasonConflict, wantInMsg: "a file",
			setup: func(t *testing.T, e *testEnv, root string) {
				mustMkdir(t, root)
				filetest.Write(t, filepath.Join(root, "fast"), "not a pool")
			}},
		{desc: "pool root is a file", name: "fast", wantReason: managerapi.ReasonConflict, wantInMsg: "not a directory",
			setup: func(t *testing.T, e *testEnv, root string) { filetest.Write(t, root, "not a root") }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			s, root := e.rootStore(t)
			if tc.setup != nil {
				tc.setup(t, e, root)
			}
			outside := snapshot(t, filepath.Join(e.base, "sibling"))
			before := snapshotIfExists(t, root)

			p, err := s.PreparePool(ctx, tc.name)
			checkErr(t, "PreparePool("+tc.name+")", err, tc.wantReason, "")
			if d := diff(outside, snapshot(t, filepath.Join(e.base, "sibling"))); len(d) > 0 {
				t.Errorf("changes outside the pool root: %v", d)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.wantInMsg) {
					t.Errorf("error %q does not say %q", err, tc.wantInMsg)
				}
				if d := diff(before, snapshotIfExists(t, root)); len(d) > 0 {
					t.Errorf("refused PreparePool changed the pool root: %v", d)
				}
				return
			}
			for _, c := range diff(before, snapshotIfExists(t, root)) {
				if c.what != "created" {
					t.Errorf("PreparePool %s %s", c.what, c.path)
				}
			}
			want := filepath.Join(root, tc.name)
			if tc.wantPath != "" {
				want = filepath.Join(e.base, tc.wantPath)
			}
			fi, serr := os.Lstat(want)
			if serr != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
				t.Fatalf("pool directory %s: %v, %v; want a directory with mode 0755", want, fi, serr)
			}
			if p.Name != tc.name || p.Path != want || p.CapacityBytes <= 0 || p.Error != "" {
				t.Errorf("PreparePool = %+v, want pool %s at %s with statistics", p, tc.name, want)
			}
			if tc.wantPath != "" {
				if _, err := os.Lstat(filepath.Join(root, tc.name)); err == nil {
					t.Errorf("%s was made in the pool root although it is configured", tc.name)
				}
			}
		})
	}
}

// mkdirIn makes root/pool/name and returns root/pool/name/data.
func mkdirIn(t *testing.T, root, pool, name string) string {
	mustMkdir(t, filepath.Join(root, pool, name))
	return filepath.Join(root, pool, name, "data")
}

// snapshotIfExists is snapshot, or nil when dir does not exist.
func snapshotIfExists(t testing.TB, dir string) map[string]string {
	if _, err := os.Lstat(dir); err != nil {
		return nil
	}
	if fi, _ := os.Lstat(dir); !fi.IsDir() {
		return map[string]string{dir: fi.Mode().String()}
	}
	return snapshot(t, dir)
}

// TestPoolNamedOnTheFlyServed: once prepared, a pool named on the fly
// holds volumes with owner records, Host lists it, and a restarted manager
// (a new Store on the same directories) serves it again.
func TestPoolNamedOnTheFlyServed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	s, root := e.rootStore(t)
	if _, err := s.PreparePool(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	v, created, err := s.CreateVolume(ctx, "fast", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a", RequiredBytes: 1, ReclaimPolicy: managerapi.ReclaimDelete}, 0o750, "")
	if err != nil || !created || v.Path != filepath.Join(root, "fast", "v1") || v.Pool != "fast" || v.Owner != "pv-a" {
		t.Fatalf("CreateVolume = %+v, %t, %v", v, created, err)
	}
	if _, err := os.Stat(filepath.Join(root, "fast", OwnersDir, "v1")); err != nil {
		t.Errorf("no owner record in the pool named on the fly: %v", err)
	}
	// Entries of the pool root that are no pools named on the fly.
	mustMkdir(t, filepath.Join(root, "lost+found"))
	mustMkdir(t, filepath.Join(root, "default"))
	filetest.Write(t, filepath.Join(root, "file"), "x")
	mustSymlink(t, filepath.Join(root, "fast"), filepath.Join(root, "link"))

	for i, store := range []*Store{s, restart(t, e)} {
		l, err := store.ListVolumes(ctx, "fast")
		if err != nil || len(l.Items) != 1 || l.Items[0].Owner != "pv-a" || l.Items[0].Mode != "0750" {
			t.Errorf("store %d: ListVolumes = %+v, %v", i, l, err)
		}
		if _, err := store.GetVolume(ctx, "fast", "v1"); err != nil {
			t.Errorf("store %d: GetVolume: %v", i, err)
		}
		h, err := store.Host(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := poolSummary(h.Pools); got != "default="+e.pool+" fast="+filepath.Join(root, "fast") {
			t.Errorf("store %d: Host pools = %s", i, got)
		}
	}
	_, err = restart(t, e).SetOwner(ctx, "fast", "v1", managerapi.SetOwnerRequest{Owner: "pv-b", Previous: "pv-a"}, "")
	checkErr(t, "SetOwner after restart", err, "", "")
	deleted, err := restart(t, e).DeleteVolume(ctx, "fast", "v1", "pv-b", false, "")
	if err != nil || !deleted {
		t.Errorf("DeleteVolume after restart = %t, %v", deleted, err)
	}
}

// restart is e's Store with a pool root, made anew.
func restart(t *testing.T, e *testEnv) *Store {
	s, _ := e.rootStore(t)
	return s
}

// poolSummary is "name=path ..." of pools with statistics; a pool without
// them is "name=path!error".
func poolSummary(pools []managerapi.Pool) string {
	var out []string
	for _, p := range pools {
		s := p.Name + "=" + p.Path
		if p.Error != "" || p.CapacityBytes <= 0 {
			s += "!" + p.Error
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// TestUnusablePoolNamedOnTheFly: the calls on a pool named on the fly that
// is not prepared are PoolNotFound with the hint to prepare it, like those
// on a configured pool without its directory (DeleteVolume too: a missing
// pool is no removed volume); on a name that is a symlink or a file in the
// pool root they are Conflict; and nothing is created anywhere.
func TestUnusablePoolNamedOnTheFly(t *testing.T) {
	calls := map[string]func(s *Store) error{
		"ListVolumes": func(s *Store) error { _, err := s.ListVolumes(ctxOf(t), "fast"); return err },
		"GetVolume":   func(s *Store) error { _, err := s.GetVolume(ctxOf(t), "fast", "v1"); return err },
		"CreateVolume": func(s *Store) error {
			_, _, err := s.CreateVolume(ctxOf(t), "fast", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a"}, 0o777, "")
			return err
		},
		"SetOwner": func(s *Store) error {
			_, err := s.SetOwner(ctxOf(t), "fast", "v1", managerapi.SetOwnerRequest{Owner: "pv-a"}, "")
			return err
		},
		"DeleteVolume": func(s *Store) error {
			deleted, err := s.DeleteVolume(ctxOf(t), "fast", "v1", "pv-a", false, "")
			if deleted {
				t.Error("DeleteVolume reports a removal")
			}
			return err
		},
	}
	for _, tc := range []struct {
		desc       string
		setup      func(t *testing.T, e *testEnv, root string)
		noRoot     bool
		wantReason managerapi.Reason
		wantInMsg  string
	}{
		{desc: "pool root missing", wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "prepare it with PUT /v1/pools/fast"},
		{desc: "pool directory missing", wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "prepare it with PUT /v1/pools/fast",
			setup: func(t *testing.T, e *testEnv, root string) { mustMkdir(t, filepath.Join(root, "slow")) }},
		{desc: "no pool root configured", noRoot: true, wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "not configured"},
		{desc: "symlink to outside", wantReason: managerapi.ReasonConflict, wantInMsg: "a symlink",
			setup: func(t *testing.T, e *testEnv, root string) {
				mustMkdir(t, root)
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(root, "fast"))
			}},
		{desc: "file", wantReason: managerapi.ReasonConflict, wantInMsg: "a file",
			setup: func(t *testing.T, e *testEnv, root string) {
				mustMkdir(t, root)
				filetest.Write(t, filepath.Join(root, "fast"), "x")
			}},
	} {
		for op, call := range calls {
			t.Run(tc.desc+"/"+op, func(t *testing.T) {
				e := newTestEnv(t)
				s, root := e.rootStore(t)
				if tc.noRoot {
					s = e.store
				}
				if tc.setup != nil {
					tc.setup(t, e, root)
				}
				before := snapshot(t, e.base)
				err := call(s)
				checkErr(t, op, err, tc.wantReason, "")
				if !strings.Contains(err.Error(), tc.wantInMsg) {
					t.Errorf("%s error %q does not say %q", op, err, tc.wantInMsg)
				}
				if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
					t.Errorf("%s changed files: %v", op, d)
				}
			})
		}
	}
}

// TestDeleteInUnpreparedPoolNamedOnTheFly: like on a configured pool
// without its directory, a delete is PoolNotFound, never a success; once
// the pool is prepared, a delete of a volume it does not hold succeeds.
func TestDeleteInUnpreparedPoolNamedOnTheFly(t *testing.T) {
	e := newTestEnv(t)
	s, _ := e.rootStore(t)
	deleted, err := s.DeleteVolume(ctxOf(t), "fast", "v1", "pv-a", false, "")
	checkErr(t, "DeleteVolume before PreparePool", err, managerapi.ReasonPoolNotFound, "")
	if deleted {
		t.Error("DeleteVolume before PreparePool reports a removal")
	}
	if _, err := s.PreparePool(ctxOf(t), "fast"); err != nil {
		t.Fatal(err)
	}
	if deleted, err := s.DeleteVolume(ctxOf(t), "fast", "v1", "pv-a", false, ""); err != nil || deleted {
		t.Errorf("DeleteVolume after PreparePool = %t, %v; want nothing deleted, no error", deleted, err)
	}
}

// ctxOf is a test's context with its logger.
func ctxOf(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}
