package disk

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/selinux"
)

// fakeLabeler records the directories it is asked to label (by what the
// descriptor's Stat says, so the test sees which directory it really was)
// and fails with err when set.
type fakeLabeler struct {
	mu    sync.Mutex
	err   error
	got   []fs.FileInfo
	names []string
}

func (l *fakeLabeler) Label(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got, l.names = append(l.got, fi), append(l.names, f.Name())
	return l.err
}

// check fails unless the labeler got exactly the directories paths, in
// order, since the last check.
func (l *fakeLabeler) check(t *testing.T, op string, paths ...string) {
	t.Helper()
	l.mu.Lock()
	got, names := l.got, l.names
	l.got, l.names = nil, nil
	l.mu.Unlock()
	if len(got) != len(paths) {
		t.Errorf("%s labelled %d directories %v, want %d %v", op, len(got), names, len(paths), paths)
		return
	}
	for i, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", op, err)
			continue
		}
		if !got[i].IsDir() || !os.SameFile(got[i], fi) {
			t.Errorf("%s labelled %s, want %s", op, names[i], p)
		}
	}
}

// checkNames is check by the descriptors' names, for directories that are
// gone.
func (l *fakeLabeler) checkNames(t *testing.T, op string, paths ...string) {
	t.Helper()
	l.mu.Lock()
	names := l.names
	l.got, l.names = nil, nil
	l.mu.Unlock()
	for i := range names {
		names[i] = filepath.Clean(names[i])
	}
	if strings.Join(names, " ") != strings.Join(paths, " ") {
		t.Errorf("%s labelled %v, want %v", op, names, paths)
	}
}

// labelStore is a Store of e's pool "default" and the pool root base/pools
// that labels with l.
func (e *testEnv) labelStore(t *testing.T, l selinux.Labeler) (*Store, string) {
	t.Helper()
	root := filepath.Join(e.base, "pools")
	return e.newStore(t, func(c *Config) { c.PoolRoot, c.Labeler = root, l }), root
}

// TestCreateVolumeLabels: exactly the directory a create makes is
// labelled; nothing else the Store does labels anything.
func TestCreateVolumeLabels(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	l := &fakeLabeler{}
	s, root := e.labelStore(t, l)

	if _, created, err := s.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: managerapi.ReclaimDelete}, 0o777, ""); err != nil || !created {
		t.Fatalf("CreateVolume = %t, %v", created, err)
	}
	l.check(t, "CreateVolume", filepath.Join(e.pool, "v1"))
	if _, created, err := s.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: managerapi.ReclaimDelete}, 0o755, ""); err != nil || created {
		t.Fatalf("second CreateVolume = %t, %v", created, err)
	}
	l.check(t, "CreateVolume of an existing volume")

	// A record without its directory (a crash between the two): the
	// directory made now is labelled.
	e.writeRecord(t, "v2", "pv-b", false)
	if _, created, err := s.CreateVolume(ctx, "default", "v2", managerapi.CreateVolumeRequest{Owner: "pv-b"}, 0o777, ""); err != nil || !created {
		t.Fatalf("CreateVolume after a crash = %t, %v", created, err)
	}
	l.check(t, "CreateVolume after a crash", filepath.Join(e.pool, "v2"))

	if _, err := s.SetOwner(ctx, "default", "v1", managerapi.SetOwnerRequest{Owner: "pv-a", Previous: "pv-a", Retained: true}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListVolumes(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteVolume(ctx, "default", "v2", "pv-b", false, ""); err != nil {
		t.Fatal(err)
	}
	l.check(t, "SetOwner, ListVolumes and DeleteVolume")

	if _, err := s.PreparePool(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	l.check(t, "PreparePool(fast)", filepath.Join(root, "fast"))
	if _, _, err := s.CreateVolume(ctx, "fast", "v3", managerapi.CreateVolumeRequest{Owner: "pv-c"}, 0o777, ""); err != nil {
		t.Fatal(err)
	}
	l.check(t, "CreateVolume in a pool named on the fly", filepath.Join(root, "fast", "v3"))
}

// TestCreateVolumeLabelFailure: a create whose directory cannot be
// labelled fails and leaves neither the directory nor the record it wrote;
// a record that was there before stays.
func TestCreateVolumeLabelFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	l := &fakeLabeler{err: errors.New("permission denied")}
	s, _ := e.labelStore(t, l)

	_, created, err := s.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: managerapi.ReclaimDelete}, 0o777, "")
	if err == nil || created || !strings.Contains(err.Error(), `label new volume "v1" in pool "default" for SELinux: permission denied`) {
		t.Fatalf("CreateVolume = %t, %v; want a labelling error", created, err)
	}
	if managerapi.ReasonOf(err) != "" {
		t.Errorf("labelling error has reason %s, want an internal error", managerapi.ReasonOf(err))
	}
	l.checkNames(t, "CreateVolume", filepath.Join(e.pool, "v1"))
	if _, err := os.Lstat(filepath.Join(e.pool, "v1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory left after a labelling failure: %v", err)
	}
	checkRecord(t, e, "v1", nil)

	e.writeRecord(t, "v2", "pv-b", false)
	if _, _, err := s.CreateVolume(ctx, "default", "v2", managerapi.CreateVolumeRequest{Owner: "pv-b"}, 0o777, ""); err == nil {
		t.Fatal("CreateVolume after a crash succeeded without a label")
	}
	if _, err := os.Lstat(filepath.Join(e.pool, "v2")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory left after a labelling failure: %v", err)
	}
	l.checkNames(t, "CreateVolume after a crash", filepath.Join(e.pool, "v2"))
	checkRecord(t, e, "v2", &record{Owner: "pv-b", OwnedSince: t0})

	l.err = nil
	if _, created, err := s.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a"}, 0o777, ""); err != nil || !created {
		t.Errorf("CreateVolume once labelling works = %t, %v", created, err)
	}
}

// TestPreparePoolLabels: PreparePool labels the pool directory, new or
// not, configured or named on the fly, and not its parents; a labelling
// failure fails it and leaves the directory.
func TestPreparePoolLabels(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	os.RemoveAll(e.pool)
	l := &fakeLabeler{}
	s, root := e.labelStore(t, l)

	if _, err := s.PreparePool(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	l.check(t, "PreparePool(default)", e.pool)
	if _, err := s.PreparePool(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	l.check(t, "PreparePool(default) again", e.pool)
	if _, err := s.PreparePool(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	l.check(t, "PreparePool(fast)", filepath.Join(root, "fast"))

	l.err = errors.New("permission denied")
	_, err := s.PreparePool(ctx, "slow")
	if err == nil || !strings.Contains(err.Error(), `label pool "slow" directory `+filepath.Join(root, "slow")+" for SELinux: permission denied") {
		t.Fatalf("PreparePool = %v, want a labelling error", err)
	}
	l.check(t, "failed PreparePool(slow)", filepath.Join(root, "slow"))

	// Refused names are never labelled: nothing is opened.
	mustSymlink(t, e.pool, filepath.Join(root, "link"))
	_, err = s.PreparePool(ctx, "link")
	checkErr(t, "PreparePool over a symlink", err, managerapi.ReasonConflict, "")
	l.check(t, "PreparePool over a symlink")
}

// TestNoLabeler: without a Labeler, or with a disabled one, the Store
// labels nothing and works as before.
func TestNoLabeler(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	if _, ok := e.store.labeler.(selinux.Nop); !ok {
		t.Errorf("labeler of a Store without one = %T, want selinux.Nop", e.store.labeler)
	}
	s, _ := e.labelStore(t, selinux.New(selinux.DefaultContext, false))
	if _, ok := s.labeler.(selinux.Nop); !ok {
		t.Errorf("labeler with SELinux disabled = %T, want selinux.Nop", s.labeler)
	}
	if _, err := s.PreparePool(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a"}, 0o777, ""); err != nil || !created {
		t.Errorf("CreateVolume = %t, %v", created, err)
	}
}
