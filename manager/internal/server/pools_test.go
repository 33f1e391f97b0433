package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/disk"
)

// fakeIdentity is a host identity that reads no file.
type fakeIdentity struct{}

func (fakeIdentity) HostID() string                   { return "host-1" }
func (fakeIdentity) BootID() (string, error)          { return "boot-1", nil }
func (fakeIdentity) MachineID(context.Context) string { return "" }

// diskDirs are the directories of a manager on a real disk.Store: pool
// "default" at base/default, the pool root base/pools and a directory
// base/outside that no call may touch; the pool root does not exist yet.
type diskDirs struct{ base, def, root, outside string }

func newDiskDirs(t *testing.T) diskDirs {
	t.Helper()
	base := t.TempDir()
	d := diskDirs{base: base, def: filepath.Join(base, "default"), root: filepath.Join(base, "pools"), outside: filepath.Join(base, "outside")}
	for _, dir := range []string{d.def, d.outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.outside, "keep"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := "28 1 259:2 / / rw - ext4 /dev/root rw\n"
	if err := os.WriteFile(filepath.Join(base, "mountinfo"), []byte(mounts), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// server is a manager on a new disk.Store of d (a restart when called
// again), with the fake authorizer.
func (d diskDirs) server(t *testing.T) *env {
	t.Helper()
	return d.serverWithRoot(t, d.root)
}

// serverWithRoot is server with pool root poolRoot ("" for none: only
// pool default is served).
func (d diskDirs) serverWithRoot(t *testing.T, poolRoot string) *env {
	t.Helper()
	e := &env{authz: &fakeAuthorizer{}}
	e.srv = d.newServer(t, poolRoot, e.authz)
	return e
}

// newServer is a Server of node-a on a new disk.Store of d with pool root
// poolRoot, authorised by authz, that asks no API server about PVs and
// claims.
func (d diskDirs) newServer(t *testing.T, poolRoot string, authz auth.Authorizer) *Server {
	t.Helper()
	return d.newServerOwners(t, poolRoot, authz, nil)
}

// newServerOwners is newServer whose Store asks owners about PVs and
// claims.
func (d diskDirs) newServerOwners(t *testing.T, poolRoot string, authz auth.Authorizer, owners disk.Owners) *Server {
	t.Helper()
	store, err := disk.New(disk.Config{
		NodeName: "node-a", Pools: map[string]string{"default": d.def}, PoolRoot: poolRoot,
		Identity: fakeIdentity{}, MountInfoFile: filepath.Join(d.base, "mountinfo"), Owners: owners,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{NodeName: "node-a", Backend: store, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// untouched fails when anything in d.outside changed.
func (d diskDirs) untouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(d.outside)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		t.Errorf("outside directory holds %v (%v), want only keep", entries, err)
	}
}

// diskStep is one call of a scenario against a real disk.Store, with
// token ("admin" when empty).
type diskStep struct {
	desc       string
	method     string
	path, body string
	token      string
	wantCode   int
	wantReason managerapi.Reason
	wantInMsg  string
	check      func(t *testing.T, d diskDirs, body []byte)
	// before, when set, runs before the call.
	before func(t *testing.T)
}

// run makes the calls of steps in order on e.
func (d diskDirs) run(t *testing.T, e *env, steps []diskStep) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.desc, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			token := s.token
			if token == "" {
				token = "admin"
			}
			w := e.do(t, httpCall{method: s.method, path: s.path, body: s.body, token: token})
			st := checkAnswer(t, w, s.wantCode, s.wantReason)
			if !strings.Contains(st.Message, s.wantInMsg) {
				t.Errorf("message %q does not say %q", st.Message, s.wantInMsg)
			}
			if s.check != nil {
				s.check(t, d, w.Body.Bytes())
			}
			d.untouched(t)
		})
	}
}

// TestPoolsNamedOnTheFly: with a pool root, PUT /v1/pools/NAME of a pool
// that is not configured makes root/NAME, which is then served like a
// configured pool, also by a restarted manager.
func TestPoolsNamedOnTheFly(t *testing.T) {
	d := newDiskDirs(t)
	e := d.server(t)
	d.run(t, e, []diskStep{
		{desc: "list before prepare", method: "GET", path: "/v1/pools/fast/volumes", wantCode: 404, wantReason: managerapi.ReasonPoolNotFound,
			wantInMsg: "prepare it with PUT /v1/pools/fast"},
		{desc: "create before prepare", method: "PUT", path: "/v1/pools/fast/volumes/v1", body: `{"owner":"pv-a"}`, wantCode: 404,
			wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "prepare it with PUT /v1/pools/fast",
			check: func(t *testing.T, d diskDirs, _ []byte) { mustNotExist(t, d.root) }},
		{desc: "delete before prepare", method: "DELETE", path: "/v1/pools/fast/volumes/v1?owner=pv-a", wantCode: 404,
			wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "prepare it with PUT /v1/pools/fast",
			check: func(t *testing.T, d diskDirs, _ []byte) { mustNotExist(t, d.root) }},
		{desc: "invalid name", method: "PUT", path: "/v1/pools/Fast_1", wantCode: 400, wantReason: managerapi.ReasonBadRequest,
			check: func(t *testing.T, d diskDirs, _ []byte) { mustNotExist(t, d.root) }},
		{desc: "prepare", method: "PUT", path: "/v1/pools/fast", wantCode: 200,
			check: func(t *testing.T, d diskDirs, body []byte) {
				checkPool(t, body, "fast", filepath.Join(d.root, "fast"))
				if fi, err := os.Lstat(filepath.Join(d.root, "fast")); err != nil || !fi.IsDir() {
					t.Errorf("pool directory: %v, %v", fi, err)
				}
			}},
		{desc: "prepare again", method: "PUT", path: "/v1/pools/fast", wantCode: 200},
		{desc: "create volume", method: "PUT", path: "/v1/pools/fast/volumes/v1", body: `{"owner":"pv-a","mode":"0750"}`, wantCode: 201,
			check: func(t *testing.T, d diskDirs, _ []byte) {
				if fi, err := os.Lstat(filepath.Join(d.root, "fast", "v1")); err != nil || fi.Mode().Perm() != 0o750 {
					t.Errorf("volume directory: %v, %v", fi, err)
				}
			}},
		{desc: "list volumes", method: "GET", path: "/v1/pools/fast/volumes", wantCode: 200, check: checkList("v1 pv-a")},
		{desc: "host lists the pool", method: "GET", path: "/v1/host", wantCode: 200, check: checkHostPools},
		{desc: "configured pool wins", method: "PUT", path: "/v1/pools/default", wantCode: 200,
			check: func(t *testing.T, d diskDirs, body []byte) {
				checkPool(t, body, "default", d.def)
				mustNotExist(t, filepath.Join(d.root, "default"))
			}},
	})
	t.Run("restart", func(t *testing.T) {
		d.run(t, d.server(t), []diskStep{
			{desc: "get volume", method: "GET", path: "/v1/pools/fast/volumes/v1", wantCode: 200, check: checkVolume("v1", "pv-a")},
			{desc: "host lists the pool", method: "GET", path: "/v1/host", wantCode: 200, check: checkHostPools},
			{desc: "delete volume", method: "DELETE", path: "/v1/pools/fast/volumes/v1?owner=pv-a", wantCode: 204},
			{desc: "list volumes", method: "GET", path: "/v1/pools/fast/volumes", wantCode: 200, check: checkList("")},
		})
	})
}

// TestPoolNamedOnTheFlyNotADirectory: a symlink or a file with the pool's
// name in the pool root is refused with Conflict, and neither followed nor
// replaced.
func TestPoolNamedOnTheFlyNotADirectory(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		plant func(d diskDirs, entry string) error
		kind  string
	}{
		{desc: "symlink to a directory outside", kind: "a symlink",
			plant: func(d diskDirs, entry string) error { return os.Symlink(d.outside, entry) }},
		{desc: "dangling symlink to outside", kind: "a symlink",
			plant: func(d diskDirs, entry string) error { return os.Symlink(filepath.Join(d.outside, "new"), entry) }},
		{desc: "relative symlink out of the root", kind: "a symlink",
			plant: func(d diskDirs, entry string) error { return os.Symlink("../outside", entry) }},
		{desc: "file", kind: "a file",
			plant: func(d diskDirs, entry string) error { return os.WriteFile(entry, []byte("x"), 0o644) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := newDiskDirs(t)
			entry := filepath.Join(d.root, "fast")
			if err := os.MkdirAll(d.root, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(d, entry); err != nil {
				t.Fatal(err)
			}
			before, err := os.Lstat(entry)
			if err != nil {
				t.Fatal(err)
			}
			d.run(t, d.server(t), []diskStep{
				{desc: "prepare", method: "PUT", path: "/v1/pools/fast", wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: tc.kind},
				{desc: "create volume", method: "PUT", path: "/v1/pools/fast/volumes/v1", body: `{"owner":"pv-a"}`, wantCode: 409,
					wantReason: managerapi.ReasonConflict, wantInMsg: tc.kind},
				{desc: "list volumes", method: "GET", path: "/v1/pools/fast/volumes", wantCode: 409, wantReason: managerapi.ReasonConflict},
				{desc: "host leaves it out", method: "GET", path: "/v1/host", wantCode: 200,
					check: func(t *testing.T, d diskDirs, body []byte) {
						var h managerapi.Host
						if mustUnmarshal(t, body, &h); len(h.Pools) != 1 || h.Pools[0].Name != "default" {
							t.Errorf("host pools = %+v, want default only", h.Pools)
						}
					}},
			})
			if after, err := os.Lstat(entry); err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Errorf("%s changed: %v, %v", entry, after, err)
			}
		})
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v), want nothing", path, err)
	}
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("%s: %v, want it kept", path, err)
	}
}

func checkPool(t *testing.T, body []byte, name, path string) {
	t.Helper()
	var p managerapi.Pool
	if mustUnmarshal(t, body, &p); p.Name != name || p.Path != path || p.CapacityBytes <= 0 || p.Error != "" {
		t.Errorf("pool = %+v, want %s at %s with statistics", p, name, path)
	}
}

// checkHostPools checks that GET /v1/host lists default and fast, with
// statistics.
func checkHostPools(t *testing.T, d diskDirs, body []byte) {
	var h managerapi.Host
	mustUnmarshal(t, body, &h)
	want := map[string]string{"default": d.def, "fast": filepath.Join(d.root, "fast")}
	if len(h.Pools) != len(want) {
		t.Fatalf("host pools = %+v, want default and fast", h.Pools)
	}
	for _, p := range h.Pools {
		if want[p.Name] != p.Path || p.CapacityBytes <= 0 || p.Error != "" {
			t.Errorf("host pool %+v, want path %s and statistics", p, want[p.Name])
		}
	}
}

// checkList checks a volume list: "NAME OWNER" items, with " multihost"
// for a multihost volume, joined by ",".
func checkList(want string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, _ diskDirs, body []byte) {
		var l managerapi.VolumeList
		mustUnmarshal(t, body, &l)
		var got []string
		for _, v := range l.Items {
			item := v.Name + " " + v.Owner
			if v.Multihost {
				item += " multihost"
			}
			got = append(got, item)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("volumes = %v, want %s", got, want)
		}
	}
}

func checkVolume(name, owner string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, d diskDirs, body []byte) {
		var v managerapi.Volume
		if mustUnmarshal(t, body, &v); v.Name != name || v.Owner != owner || v.Pool != "fast" || v.Path != filepath.Join(d.root, "fast", name) {
			t.Errorf("volume = %+v", v)
		}
	}
}
