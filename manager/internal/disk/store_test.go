package disk

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// testEnv is a pool "default" at base/pool with a sibling directory and
// files outside it, and the identity files under base/state.
type testEnv struct {
	base, pool string
	store      *Store
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	base := t.TempDir()
	e := &testEnv{base: base, pool: filepath.Join(base, "pool")}
	for _, d := range []string{e.pool, filepath.Join(base, "sibling", "data")} {
		mustMkdir(t, d)
	}
	mustWrite(t, filepath.Join(base, "sibling", "data", "keep.txt"), "outside")
	mustWrite(t, filepath.Join(base, "boot_id"), "boot-1\n")
	mustWrite(t, filepath.Join(base, "machine-id"), "machine-1\n")
	s, err := New(ctx, Config{
		NodeName: "node-a",
		Pools:    map[string]string{"default": e.pool},
		Identity: IdentityConfig{
			StateDir:      filepath.Join(base, "state"),
			BootIDFile:    filepath.Join(base, "boot_id"),
			MachineIDFile: filepath.Join(base, "machine-id"),
		},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.store = s
	return e
}

func mustMkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestValidateVolumeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"pvc-1234", true},
		{"ns-claim-pvc-0b7e.data_1", true},
		{"A", true},
		{"9", true},
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), false},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-flag", false},
		{"_x", false},
		{"a/b", false},
		{"../x", false},
		{"/abs", false},
		{`a\b`, false},
		{"a\x00b", false},
		{"%2e%2e", false},
		{"a b", false},
		{"é", false},
	} {
		err := ValidateVolumeName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateVolumeName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateVolumeName(%q) error %v is not ErrInvalid", tc.name, err)
		}
	}
}

func TestValidatePoolName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"default", true},
		{"fast-ssd", true},
		{"a", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"Default", false},
		{"-a", false},
		{"a-", false},
		{"a.b", false},
		{"..", false},
		{"a/b", false},
	} {
		if err := ValidatePoolName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidatePoolName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestParseFormatMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fs.FileMode
		out  string
		ok   bool
	}{
		{"", 0o777, "0777", true},
		{"0777", 0o777, "0777", true},
		{"750", 0o750, "0750", true},
		{"0", 0, "0000", true},
		{"2775", 0o775 | fs.ModeSetgid, "02775", true},
		{"01777", 0o777 | fs.ModeSticky, "01777", true},
		{"4700", 0o700 | fs.ModeSetuid, "04700", true},
		{"10000", 0, "", false},
		{"0888", 0, "", false},
		{"rwx", 0, "", false},
		{"-1", 0, "", false},
		{"000000777", 0, "", false},
	} {
		got, err := ParseMode(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseMode(%q) error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if got != tc.want {
			t.Errorf("ParseMode(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if s := FormatMode(got); s != tc.out {
			t.Errorf("FormatMode(%v) = %q, want %q", got, s, tc.out)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	state := IdentityConfig{StateDir: t.TempDir()}
	for name, pools := range map[string]map[string]string{
		"no pools":      {},
		"bad pool name": {"Bad_Name": "/var/hp"},
		"relative path": {"default": "var/hp"},
		"unclean path":  {"default": "/var/hp/../x"},
		"root path":     {"default": "/"},
		"nested pools":  {"a": "/var/hp", "b": "/var/hp/b"},
		"same path":     {"a": "/var/hp", "b": "/var/hp"},
	} {
		if _, err := New(ctx, Config{Pools: pools, Identity: state}); err == nil {
			t.Errorf("%s: New accepted %v", name, pools)
		}
	}
}

func TestCreateVolume(t *testing.T) {
	old := syscall.Umask(0o077) // the mode must not depend on the umask
	t.Cleanup(func() { syscall.Umask(old) })
	for _, tc := range []struct {
		desc        string
		setup       func(t *testing.T, e *testEnv)
		pool, name  string
		mode        fs.FileMode
		required    int64
		wantErr     error
		wantCreated bool
		wantMode    string
	}{
		{desc: "new directory gets the exact mode", name: "v1", mode: 0o777, wantCreated: true, wantMode: "0777"},
		{desc: "setgid mode", name: "v1", mode: 0o775 | fs.ModeSetgid, wantCreated: true, wantMode: "02775"},
		{desc: "existing directory gets the new mode", name: "v1", mode: 0o750, wantMode: "0750",
			setup: func(t *testing.T, e *testEnv) {
				mustMkdir(t, filepath.Join(e.pool, "v1"))
				mustWrite(t, filepath.Join(e.pool, "v1", "data"), "x")
			}},
		{desc: "file with the name", name: "v1", mode: 0o777, wantErr: ErrConflict,
			setup: func(t *testing.T, e *testEnv) { mustWrite(t, filepath.Join(e.pool, "v1"), "x") }},
		{desc: "symlink to a directory outside", name: "v1", mode: 0o777, wantErr: ErrConflict,
			setup: func(t *testing.T, e *testEnv) {
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, "v1"))
			}},
		{desc: "dangling symlink", name: "v1", mode: 0o777, wantErr: ErrConflict,
			setup: func(t *testing.T, e *testEnv) {
				mustSymlink(t, "/nonexistent-hostpath-test", filepath.Join(e.pool, "v1"))
			}},
		{desc: "traversal", name: "../sibling", mode: 0o777, wantErr: ErrInvalid},
		{desc: "unknown pool", pool: "other", name: "v1", mode: 0o777, wantErr: ErrNotFound},
		{desc: "invalid pool", pool: "..", name: "v1", mode: 0o777, wantErr: ErrInvalid},
		{desc: "bad mode bits", name: "v1", mode: fs.ModeDir | 0o777, wantErr: ErrInvalid},
		{desc: "not enough space", name: "v1", mode: 0o777, required: 1 << 62, wantErr: ErrInsufficientStorage},
		{desc: "space is not checked for an existing directory", name: "v1", mode: 0o777, required: 1 << 62, wantMode: "0777",
			setup: func(t *testing.T, e *testEnv) { mustMkdir(t, filepath.Join(e.pool, "v1")) }},
		{desc: "enough space", name: "v1", mode: 0o700, required: 1, wantCreated: true, wantMode: "0700"},
		{desc: "pool directory missing", name: "v1", mode: 0o777, wantErr: ErrNotFound,
			setup: func(t *testing.T, e *testEnv) { os.RemoveAll(e.pool) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			pool := tc.pool
			if pool == "" {
				pool = "default"
			}
			v, created, err := e.store.CreateVolume(ctx, pool, tc.name, tc.mode, tc.required)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("CreateVolume error = %v, want %v", err, tc.wantErr)
				}
				if _, err := os.Stat(filepath.Join(e.base, "sibling", "data", "keep.txt")); err != nil {
					t.Errorf("outside file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateVolume: %v", err)
			}
			if created != tc.wantCreated {
				t.Errorf("created = %v, want %v", created, tc.wantCreated)
			}
			want := filepath.Join(e.pool, tc.name)
			if v.Path != want || v.Name != tc.name || v.Pool != "default" || v.Mode != tc.wantMode {
				t.Errorf("volume = %+v, want path %s mode %s", v, want, tc.wantMode)
			}
			fi, err := os.Lstat(want)
			if err != nil || !fi.IsDir() {
				t.Fatalf("directory on disk: %v %v", fi, err)
			}
			if got := FormatMode(fi.Mode()); got != tc.wantMode {
				t.Errorf("mode on disk = %s, want %s", got, tc.wantMode)
			}
		})
	}
}

func TestDeleteVolume(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		setup       func(t *testing.T, e *testEnv)
		name        string
		wantErr     error
		wantDeleted bool
		// survivors must exist afterwards (relative to base).
		survivors []string
	}{
		{desc: "missing volume succeeds", name: "v1"},
		{desc: "tree is removed", name: "v1", wantDeleted: true,
			setup: func(t *testing.T, e *testEnv) {
				mustMkdir(t, filepath.Join(e.pool, "v1", "a", "b"))
				mustWrite(t, filepath.Join(e.pool, "v1", "a", "b", "f"), "x")
				if err := os.Chmod(filepath.Join(e.pool, "v1", "a"), 0o500); err != nil {
					t.Fatal(err)
				}
			}},
		{desc: "symlinks inside are removed, not followed", name: "v1", wantDeleted: true,
			survivors: []string{"sibling/data/keep.txt", "sibling/data"},
			setup: func(t *testing.T, e *testEnv) {
				mustMkdir(t, filepath.Join(e.pool, "v1"))
				mustSymlink(t, filepath.Join(e.base, "sibling", "data"), filepath.Join(e.pool, "v1", "abs"))
				mustSymlink(t, "../../sibling/data", filepath.Join(e.pool, "v1", "rel"))
				mustSymlink(t, "/", filepath.Join(e.pool, "v1", "root"))
			}},
		{desc: "symlink with the name is a conflict and stays", name: "v1", wantErr: ErrConflict,
			survivors: []string{"pool/v1", "sibling/data/keep.txt"},
			setup: func(t *testing.T, e *testEnv) {
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, "v1"))
			}},
		{desc: "file with the name is a conflict and stays", name: "v1", wantErr: ErrConflict,
			survivors: []string{"pool/v1"},
			setup:     func(t *testing.T, e *testEnv) { mustWrite(t, filepath.Join(e.pool, "v1"), "x") }},
		{desc: "traversal", name: "..", wantErr: ErrInvalid, survivors: []string{"pool", "sibling/data/keep.txt"}},
		{desc: "pool directory missing succeeds", name: "v1",
			setup: func(t *testing.T, e *testEnv) { os.RemoveAll(e.pool) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			deleted, err := e.store.DeleteVolume(ctx, "default", tc.name)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("DeleteVolume error = %v, want %v", err, tc.wantErr)
			}
			if deleted != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v", deleted, tc.wantDeleted)
			}
			if tc.wantErr == nil {
				if _, err := os.Lstat(filepath.Join(e.pool, tc.name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("volume still there: %v", err)
				}
			}
			for _, s := range tc.survivors {
				if _, err := os.Lstat(filepath.Join(e.base, s)); err != nil {
					t.Errorf("%s was removed: %v", s, err)
				}
			}
		})
	}
}

func TestListAndGetVolumes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	mustMkdir(t, filepath.Join(e.pool, "b"))
	mustMkdir(t, filepath.Join(e.pool, "a"))
	mustMkdir(t, filepath.Join(e.pool, ".hidden"))
	mustWrite(t, filepath.Join(e.pool, "file"), "x")
	mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, "link"))

	l, err := e.store.ListVolumes(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range l.Items {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, ","); got != "a,b" {
		t.Errorf("ListVolumes = %s, want a,b", got)
	}
	if _, err := e.store.ListVolumes(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListVolumes(unknown pool) error = %v", err)
	}

	for _, tc := range []struct {
		name    string
		wantErr error
	}{
		{"a", nil},
		{"missing", ErrNotFound},
		{"file", ErrConflict},
		{"link", ErrConflict},
		{"../pool", ErrInvalid},
	} {
		v, err := e.store.GetVolume(ctx, "default", tc.name)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("GetVolume(%q) error = %v, want %v", tc.name, err, tc.wantErr)
			continue
		}
		if err == nil && v.Path != filepath.Join(e.pool, tc.name) {
			t.Errorf("GetVolume(%q) = %+v", tc.name, v)
		}
	}

	os.RemoveAll(e.pool)
	if _, err := e.store.ListVolumes(ctx, "default"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListVolumes(missing pool directory) error = %v, want ErrNotFound", err)
	}
}

func TestPreparePoolAndHost(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	os.RemoveAll(e.pool)

	h, err := e.store.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.NodeName != "node-a" || h.BootID != "boot-1" || h.MachineID != "machine-1" || !hostIDRE.MatchString(h.HostID) {
		t.Errorf("Host = %+v", h)
	}
	if len(h.Pools) != 1 || h.Pools[0].Error == "" {
		t.Errorf("missing pool directory not reported: %+v", h.Pools)
	}

	p, err := e.store.PreparePool(ctx, "default")
	if err != nil {
		t.Fatalf("PreparePool: %v", err)
	}
	if fi, err := os.Stat(e.pool); err != nil || !fi.IsDir() {
		t.Fatalf("pool directory not created: %v", err)
	}
	if p.Path != e.pool || p.CapacityBytes <= 0 || p.FreeBytes <= 0 || p.Error != "" {
		t.Errorf("PreparePool = %+v", p)
	}
	if _, err := e.store.PreparePool(ctx, "default"); err != nil {
		t.Errorf("second PreparePool: %v", err)
	}
	if _, err := e.store.PreparePool(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("PreparePool(unknown) error = %v", err)
	}

	os.RemoveAll(e.pool)
	mustWrite(t, e.pool, "not a directory")
	if _, err := e.store.PreparePool(ctx, "default"); !errors.Is(err, ErrConflict) {
		t.Errorf("PreparePool over a file: error = %v, want ErrConflict", err)
	}

	os.Remove(filepath.Join(e.base, "boot_id"))
	if _, err := e.store.Host(ctx); err == nil {
		t.Error("Host without a boot ID succeeded")
	}
}

func TestLoadIdentity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := filepath.Join(t.TempDir(), "state", "nested")
	cfg := IdentityConfig{StateDir: dir, MachineIDFile: filepath.Join(dir, "absent")}
	a, err := LoadIdentity(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !hostIDRE.MatchString(a.HostID()) {
		t.Errorf("host ID %q is not a UUID", a.HostID())
	}
	b, err := LoadIdentity(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.HostID() != b.HostID() {
		t.Errorf("host ID changed across loads: %s then %s", a.HostID(), b.HostID())
	}
	if m := a.MachineID(ctx); m != "" {
		t.Errorf("MachineID of a missing file = %q", m)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != HostIDFile {
		t.Errorf("state directory holds %v, want only %s", entries, HostIDFile)
	}
	other := IdentityConfig{StateDir: t.TempDir()}
	c, err := LoadIdentity(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostID() == a.HostID() {
		t.Error("two state directories got the same host ID")
	}

	mustWrite(t, filepath.Join(dir, HostIDFile), "garbage\n")
	if _, err := LoadIdentity(ctx, cfg); err == nil {
		t.Error("LoadIdentity accepted a corrupt host ID file")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, HostIDFile)); string(got) != "garbage\n" {
		t.Error("corrupt host ID file was replaced")
	}
	if _, err := LoadIdentity(ctx, IdentityConfig{}); err == nil {
		t.Error("LoadIdentity without a state directory succeeded")
	}
}

func TestConcurrentCreateDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 100; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, _, err := e.store.CreateVolume(ctx, "default", "v", 0o755, 0); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := e.store.DeleteVolume(ctx, "default", "v"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call failed: %v", err)
	}
	if n := len(e.store.locks.locks); n != 0 {
		t.Errorf("%d per-volume locks left after all calls returned", n)
	}
}
