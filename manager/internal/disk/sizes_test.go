package disk

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/quota"
)

// fakeEnforcer is a quota.Enforcer of kind btrfs that keeps its limits in
// memory: Make makes a plain directory and hands out IDs from 100; fail
// makes the named operation fail.
type fakeEnforcer struct {
	kind string

	mu     sync.Mutex
	next   uint64
	limits map[uint64]int64
	names  map[string]uint64
	fail   map[string]error
}

func newFakeEnforcer(kind string) *fakeEnforcer {
	return &fakeEnforcer{kind: kind, next: 100, limits: map[uint64]int64{}, names: map[string]uint64{}, fail: map[string]error{}}
}

func (f *fakeEnforcer) Support() quota.Support {
	if f.kind == quota.KindNone {
		return quota.Support{Reason: "the fake enforces nothing"}
	}
	return quota.Support{Kind: f.kind}
}

func (f *fakeEnforcer) Make(root *os.Root, name string, limit int64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Make"]; err != nil {
		return 0, err
	}
	if err := root.Mkdir(name, 0o700); err != nil {
		return 0, err
	}
	id := f.next
	f.next++
	f.limits[id], f.names[name] = limit, id
	return id, nil
}

func (f *fakeEnforcer) SetLimit(_ *os.Root, _ string, id uint64, limit int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["SetLimit"]; err != nil {
		return err
	}
	if _, ok := f.limits[id]; !ok {
		return fs.ErrNotExist
	}
	f.limits[id] = limit
	return nil
}

func (f *fakeEnforcer) Usage(_ *os.Root, _ string, id uint64) (quota.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return quota.Usage{LimitBytes: f.limits[id], UsedBytes: 42, UsedInodes: -1}, nil
}

func (f *fakeEnforcer) Release(_ *os.Root, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Release"]; err != nil {
		return err
	}
	delete(f.limits, id)
	return nil
}

func (f *fakeEnforcer) IDs(*os.Root) ([]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []uint64
	for id := range f.limits {
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *fakeEnforcer) ID(_ *os.Root, name string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.names[name]
	if !ok {
		return 0, fs.ErrNotExist
	}
	return id, nil
}

// live returns the IDs with a limit.
func (f *fakeEnforcer) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.limits)
}

// sizesEnv is a testEnv whose Store uses enf and the overcommit ratio of
// the default pool that makes its budget half the free space of the
// filesystem holding the test's directory: budget is that many bytes.
type sizesEnv struct {
	*testEnv
	enf    *fakeEnforcer
	budget int64
}

func newSizesEnv(t *testing.T, enf *fakeEnforcer) *sizesEnv {
	t.Helper()
	e := newTestEnv(t)
	root, err := os.OpenRoot(e.pool)
	if err != nil {
		t.Fatal(err)
	}
	st, err := statRoot(root)
	root.Close()
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(st.FreeBytes/2) / float64(st.CapacityBytes)
	e.store = newSizesStore(t, e, enf, ratio)
	return &sizesEnv{testEnv: e, enf: enf, budget: int64(float64(st.CapacityBytes) * ratio)}
}

// newSizesStore returns a Store over e's pool (a manager restart when
// called again) with enf and the overcommit ratio of the default pool.
func newSizesStore(t *testing.T, e *testEnv, enf *fakeEnforcer, ratio float64) *Store {
	t.Helper()
	return e.newStore(t, func(c *Config) {
		c.Overcommit = map[string]float64{"default": ratio}
		c.Quotas = func(*os.Root) quota.Enforcer { return enf }
	})
}

func sized(owner string, n int64) managerapi.CreateVolumeRequest {
	return managerapi.CreateVolumeRequest{Owner: owner, RequiredBytes: n}
}

// TestSizesPromise: sizes are promised by the pool and a volume that does
// not fit is refused with the figures; a deleted volume gives its size
// back; a restarted Store sums the records again; overcommit ratios are
// checked.
func TestSizesPromise(t *testing.T) {
	e := newSizesEnv(t, newFakeEnforcer(quota.KindBtrfs))
	ctx := ctxOf(t)
	quarter := e.budget / 4
	for _, name := range []string{"v1", "v2"} {
		v, _, err := e.store.CreateVolume(ctx, "default", name, sized("pv-"+name, quarter), 0o777, "")
		checkErr(t, "create "+name, err, "", "")
		if v.SizeBytes != quarter || v.Enforcement != quota.KindBtrfs || v.UsedBytes == nil {
			t.Errorf("volume %s = %+v, want size %d, enforcement btrfs, usage", name, v, quarter)
		}
	}
	// v1 and v2 promise half the budget: three quarters more do not fit.
	_, _, err := e.store.CreateVolume(ctx, "default", "v3", sized("pv-v3", 3*quarter), 0o777, "")
	checkErr(t, "create v3", err, managerapi.ReasonInsufficientStorage, "")
	for _, want := range []string{`pool "default" on node "node-a" has`, "requested", "promised to 2 volumes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.pool, "v3")); !errors.Is(err, fs.ErrNotExist) || e.record(t, "v3") != nil {
		t.Errorf("refused v3 left a directory (%v) or a record", err)
	}
	h, err := e.store.Host(ctx)
	checkErr(t, "host", err, "", "")
	if p := h.Pools[0]; p.PromisedBytes != 2*quarter || p.Enforcement != quota.KindBtrfs || p.AvailableBytes != e.budget-2*quarter {
		t.Errorf("pool = %+v, want promised %d, enforcement btrfs, available %d", p, 2*quarter, e.budget-2*quarter)
	}

	// A restart sums the records; deleting v1 gives its quarter back.
	e.store = newSizesStore(t, e.testEnv, e.enf, float64(e.budget)/float64(h.Pools[0].CapacityBytes))
	_, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-v1", false, "")
	checkErr(t, "delete v1", err, "", "")
	_, _, err = e.store.CreateVolume(ctx, "default", "v3", sized("pv-v3", 2*quarter), 0o777, "")
	checkErr(t, "create v3 after deleting v1", err, "", "")
	_, _, err = e.store.CreateVolume(ctx, "default", "v4", sized("pv-v4", 2*quarter), 0o777, "")
	checkErr(t, "create v4 past the budget", err, managerapi.ReasonInsufficientStorage, "")
	if n := e.enf.live(); n != 2 {
		t.Errorf("%d quotas live, want 2 (v2, v3)", n)
	}
}

// TestSizesEnforcement: the quota of a new volume, enforceSize on a pool
// that enforces nothing, a Make that fails, and a crash between making the
// volume and recording its quota ID.
func TestSizesEnforcement(t *testing.T) {
	ctx := ctxOf(t)
	t.Run("quota made, recorded and released", func(t *testing.T) {
		e := newSizesEnv(t, newFakeEnforcer(quota.KindBtrfs))
		_, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", 1<<20), 0o750, "")
		checkErr(t, "create", err, "", "")
		if rec := e.record(t, "v1"); rec == nil || rec.QuotaID != 100 || rec.Enforcement != quota.KindBtrfs || rec.SizeBytes != 1<<20 {
			t.Fatalf("record = %+v, want quota 100, btrfs, 1Mi", rec)
		}
		_, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, "")
		checkErr(t, "delete", err, "", "")
		if n := e.enf.live(); n != 0 {
			t.Errorf("%d quotas left after delete, want 0", n)
		}
	})
	t.Run("enforceSize on a pool that does not enforce", func(t *testing.T) {
		e := newSizesEnv(t, newFakeEnforcer(quota.KindNone))
		req := sized("pv-a", 1<<20)
		req.EnforceSize = true
		_, _, err := e.store.CreateVolume(ctx, "default", "v1", req, 0o777, "")
		checkErr(t, "create", err, managerapi.ReasonNotEnforced, "")
		if !strings.Contains(err.Error(), "the fake enforces nothing") {
			t.Errorf("error %q does not say why", err)
		}
		if _, err := os.Lstat(filepath.Join(e.pool, "v1")); !errors.Is(err, fs.ErrNotExist) || e.record(t, "v1") != nil {
			t.Errorf("refused create left a directory (%v) or a record", err)
		}
		// Without enforceSize the size is promised, not enforced.
		v, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", 1<<20), 0o777, "")
		checkErr(t, "create without enforceSize", err, "", "")
		if v.Enforcement != "" || v.UsedBytes != nil || v.SizeBytes != 1<<20 {
			t.Errorf("volume = %+v, want size 1Mi, no enforcement, no usage", v)
		}
	})
	t.Run("a Make that fails leaves nothing", func(t *testing.T) {
		enf := newFakeEnforcer(quota.KindBtrfs)
		enf.fail["Make"] = errors.New("no qgroup for you")
		e := newSizesEnv(t, enf)
		_, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", e.budget), 0o777, "")
		if err == nil || !strings.Contains(err.Error(), "no qgroup for you") {
			t.Fatalf("create = %v, want the Make error", err)
		}
		if e.record(t, "v1") != nil {
			t.Error("failed create left a record")
		}
		// Its size was given back: the whole budget is available again.
		delete(enf.fail, "Make")
		_, _, err = e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", e.budget), 0o777, "")
		checkErr(t, "create after the failure", err, "", "")
	})
	t.Run("crash before the quota ID was recorded", func(t *testing.T) {
		e := newSizesEnv(t, newFakeEnforcer(quota.KindBtrfs))
		_, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", 1<<20), 0o777, "")
		checkErr(t, "create", err, "", "")
		rec := e.record(t, "v1")
		rec.QuotaID = 0
		if err := writeRecordFile(e.pool, "v1", *rec); err != nil {
			t.Fatal(err)
		}
		_, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, "")
		checkErr(t, "delete", err, "", "")
		if n := e.enf.live(); n != 0 {
			t.Errorf("%d quotas left, want the one found on the directory released", n)
		}
	})
	t.Run("a Release that fails keeps the record", func(t *testing.T) {
		enf := newFakeEnforcer(quota.KindBtrfs)
		e := newSizesEnv(t, enf)
		_, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", 1<<20), 0o777, "")
		checkErr(t, "create", err, "", "")
		enf.fail["Release"] = errors.New("busy")
		if _, err := e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, ""); err == nil {
			t.Fatal("delete succeeded with a failing Release")
		}
		if e.record(t, "v1") == nil {
			t.Fatal("the record went with the quota still there")
		}
		delete(enf.fail, "Release")
		_, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, "")
		checkErr(t, "delete again", err, "", "")
		if enf.live() != 0 || e.record(t, "v1") != nil {
			t.Errorf("after the retry: %d quotas, record %+v; want none", enf.live(), e.record(t, "v1"))
		}
	})
}

// TestSetSize: growing a volume raises its quota and its record, within
// the pool's budget; shrinking and other owners are refused.
func TestSetSize(t *testing.T) {
	ctx := ctxOf(t)
	e := newSizesEnv(t, newFakeEnforcer(quota.KindBtrfs))
	_, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-a", 1<<20), 0o777, "")
	checkErr(t, "create", err, "", "")
	tests := []struct {
		desc  string
		owner string
		size  int64
		want  managerapi.Reason
		// wantSize is the recorded size after the call.
		wantSize int64
	}{
		{desc: "grow", owner: "pv-a", size: 4 << 20, wantSize: 4 << 20},
		{desc: "same size", owner: "pv-a", size: 4 << 20, wantSize: 4 << 20},
		{desc: "shrink", owner: "pv-a", size: 2 << 20, want: managerapi.ReasonConflict, wantSize: 4 << 20},
		{desc: "another owner", owner: "pv-b", size: 8 << 20, want: managerapi.ReasonOwnerConflict, wantSize: 4 << 20},
		{desc: "past the budget", owner: "pv-a", size: e.budget + 1, want: managerapi.ReasonInsufficientStorage, wantSize: 4 << 20},
		{desc: "zero", owner: "pv-a", size: 0, want: managerapi.ReasonBadRequest, wantSize: 4 << 20},
		{desc: "missing volume", owner: "pv-a", size: 8 << 20, want: managerapi.ReasonNotFound, wantSize: 4 << 20},
	}
	for _, tc := range tests {
		name := "v1"
		if tc.desc == "missing volume" {
			name = "v9"
		}
		v, err := e.store.SetSize(ctx, "default", name, tc.owner, tc.size, "")
		checkErr(t, tc.desc, err, tc.want, "pv-a")
		if tc.want == "" && v.SizeBytes != tc.size {
			t.Errorf("%s: volume = %+v, want size %d", tc.desc, v, tc.size)
		}
		if rec := e.record(t, "v1"); rec.SizeBytes != tc.wantSize || e.enf.limits[rec.QuotaID] != tc.wantSize {
			t.Errorf("%s: record size %d, quota limit %d; want %d", tc.desc, rec.SizeBytes, e.enf.limits[rec.QuotaID], tc.wantSize)
		}
	}
	h, err := e.store.Host(ctx)
	checkErr(t, "host", err, "", "")
	if p := h.Pools[0]; p.PromisedBytes != 4<<20 {
		t.Errorf("promised %d after growing to 4Mi, want %d", p.PromisedBytes, 4<<20)
	}
}

// writeRecordFile writes the owner record of volume name in pool by hand.
func writeRecordFile(pool, name string, rec record) error {
	root, err := os.OpenRoot(pool)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeRecord(root, name, rec)
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1023: "1023", 1024: "1Ki", 1536: "1.5Ki", 2080374784: "1.94Gi", 1<<30 + 1: "1Gi", 16 << 20: "16Mi", 10 << 30: "10Gi", 1<<62 + 1<<61: "6Ei"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestAvailableBytes(t *testing.T) {
	tests := []struct {
		st       fsStats
		ratio    float64
		promised int64
		want     int64
	}{
		{fsStats{CapacityBytes: 100, FreeBytes: 80}, 1, 0, 80},
		{fsStats{CapacityBytes: 100, FreeBytes: 80}, 1, 30, 70},
		{fsStats{CapacityBytes: 100, FreeBytes: 80}, 1, 120, 0},
		{fsStats{CapacityBytes: 100, FreeBytes: 80}, 2, 120, 80},
		{fsStats{CapacityBytes: 100, FreeBytes: 80}, 0.5, 10, 40},
	}
	for _, tc := range tests {
		if got := availableBytes(tc.st, tc.ratio, tc.promised); got != tc.want {
			t.Errorf("availableBytes(%+v, %v, %d) = %d, want %d", tc.st, tc.ratio, tc.promised, got, tc.want)
		}
	}
}

// TestSizesPromiseFollowsThePoolsDirectory: a pool whose path holds
// another directory since its promise was summed (a filesystem mounted
// there, or replaced) is summed again from that directory's records: the
// first directory's promises do not follow to the second, nor back.
func TestSizesPromiseFollowsThePoolsDirectory(t *testing.T) {
	e := newSizesEnv(t, newFakeEnforcer(quota.KindBtrfs))
	ctx := ctxOf(t)
	quarter := e.budget / 4
	_, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-v1", quarter), 0o777, "")
	checkErr(t, "create v1", err, "", "")
	promised := func(what string, want int64) {
		t.Helper()
		h, err := e.store.Host(ctx)
		checkErr(t, what, err, "", "")
		if got := h.Pools[0].PromisedBytes; got != want {
			t.Errorf("%s: promised %d, want %d", what, got, want)
		}
	}
	promised("before", quarter)

	// Another directory at the pool's path, as a new filesystem mounted
	// there would be: nothing promised.
	moved := e.pool + ".first"
	if err := os.Rename(e.pool, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.pool, 0o755); err != nil {
		t.Fatal(err)
	}
	promised("another directory", 0)
	_, _, err = e.store.CreateVolume(ctx, "default", "v2", sized("pv-v2", 3*quarter), 0o777, "")
	checkErr(t, "create v2 in the whole budget of the new directory", err, "", "")
	promised("after v2", 3*quarter)

	// The first directory back: its own records again.
	if err := os.Rename(e.pool, e.pool+".second"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, e.pool); err != nil {
		t.Fatal(err)
	}
	promised("the first directory back", quarter)
}

// TestDetectOncePerCall: a call probes the pool's filesystem for its size
// enforcement once (quota.Detect makes system calls), whatever it does
// with the answer: a create with an enforced size, which makes a quota and
// describes its usage, and the deletion, which releases it.
func TestDetectOncePerCall(t *testing.T) {
	e := newTestEnv(t)
	enf := newFakeEnforcer(quota.KindBtrfs)
	var detects atomic.Int32
	e.store = e.newStore(t, func(c *Config) {
		c.Quotas = func(*os.Root) quota.Enforcer { detects.Add(1); return enf }
	})
	ctx := ctxOf(t)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"create", func() error {
			v, _, err := e.store.CreateVolume(ctx, "default", "v1", sized("pv-v1", 1<<20), 0o777, "")
			if err == nil && (v.Enforcement != quota.KindBtrfs || v.UsedBytes == nil) {
				t.Errorf("volume = %+v, want enforcement btrfs and its usage", v)
			}
			return err
		}},
		{"get", func() error { _, err := e.store.GetVolume(ctx, "default", "v1"); return err }},
		{"delete", func() error { _, err := e.store.DeleteVolume(ctx, "default", "v1", "pv-v1", false, ""); return err }},
	} {
		detects.Store(0)
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := detects.Load(); n != 1 {
			t.Errorf("%s probed the size enforcement %d times, want once", tc.name, n)
		}
	}
}
