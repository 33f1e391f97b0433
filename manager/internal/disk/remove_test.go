package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/manager/internal/identity"
)

func TestDeleteVolume(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		setup       func(t *testing.T, e *testEnv)
		mounts      []string // extra mount table lines; BASE is the test's base directory
		pool        string   // "default" when empty
		name        string
		owner       string // "pv-a" when empty, "-" for none
		ifEmpty     bool
		wantReason  managerapi.Reason
		wantOwner   string // named by an OwnerConflict
		wantMessage string
		wantErr     bool // an error that is not a *managerapi.Error
		wantDeleted bool
		// survivors must exist afterwards (relative to base).
		survivors []string
	}{
		{desc: "missing volume succeeds", name: "v1"},
		{desc: "tree is removed with its record", name: "v1", wantDeleted: true,
			setup: func(t *testing.T, e *testEnv) {
				e.writeRecord(t, "v1", "pv-a", false)
				mustMkdir(t, filepath.Join(e.pool, "v1", "a", "b", "c"))
				filetest.Write(t, filepath.Join(e.pool, "v1", "a", "b", "f"), "x")
				filetest.Write(t, filepath.Join(e.pool, "v1", "a", "b", "c", "f"), "x")
				mustMkdir(t, filepath.Join(e.pool, "v1", "locked", "inner"))
				filetest.Write(t, filepath.Join(e.pool, "v1", "locked", "inner", "f"), "x")
				for _, c := range []struct {
					p    string
					mode fs.FileMode
				}{{"a", 0o500}, {"a/b/f", 0}, {"locked/inner", 0}, {"locked", 0}} {
					if err := os.Chmod(filepath.Join(e.pool, "v1", c.p), c.mode); err != nil {
						t.Fatal(err)
					}
				}
				if err := syscall.Mkfifo(filepath.Join(e.pool, "v1", "fifo"), 0o600); err != nil {
					t.Fatal(err)
				}
				// Names a pod may pick to confuse the removal.
				mustMkdir(t, filepath.Join(e.pool, "v1", hoistPrefix+"0011223344556677", "x"))
				filetest.Write(t, filepath.Join(e.pool, "v1", hoistPrefix+"file"), "x")
			}},
		{desc: "many entries", name: "v1", wantDeleted: true,
			setup: func(t *testing.T, e *testEnv) {
				e.writeRecord(t, "v1", "pv-a", false)
				mustMkdir(t, filepath.Join(e.pool, "v1"))
				for i := range 3 * readBatch {
					filetest.Write(t, filepath.Join(e.pool, "v1", fmt.Sprintf("f%d", i)), "x")
					if i%50 == 0 {
						mustMkdir(t, filepath.Join(e.pool, "v1", "d", fmt.Sprintf("d%d", i), "e"))
					}
				}
			}},
		{desc: "symlinks inside are removed, not followed", name: "v1", wantDeleted: true,
			survivors: []string{"sibling/data/keep.txt", "sibling/data", "pool/v2/data", "pool/.hostpath/owners/v2"},
			setup: func(t *testing.T, e *testEnv) {
				e.writeRecord(t, "v1", "pv-a", false)
				e.volume(t, "v2")
				e.writeRecord(t, "v2", "pv-b", false)
				mustMkdir(t, filepath.Join(e.pool, "v1", "sub"))
				mustSymlink(t, filepath.Join(e.base, "sibling", "data"), filepath.Join(e.pool, "v1", "abs"))
				mustSymlink(t, "../../sibling/data", filepath.Join(e.pool, "v1", "rel"))
				mustSymlink(t, "/", filepath.Join(e.pool, "v1", "root"))
				mustSymlink(t, "../v2", filepath.Join(e.pool, "v1", "other-volume"))
				mustSymlink(t, "../../v2/data", filepath.Join(e.pool, "v1", "sub", "other-data"))
				mustSymlink(t, "../../.hostpath", filepath.Join(e.pool, "v1", "sub", "records"))
				mustSymlink(t, "..", filepath.Join(e.pool, "v1", "sub", "up"))
			}},
		{desc: "symlink with the name is a conflict and stays", name: "v1", wantReason: managerapi.ReasonConflict,
			survivors: []string{"pool/v1", "sibling/data/keep.txt"},
			setup: func(t *testing.T, e *testEnv) {
				e.writeRecord(t, "v1", "pv-a", false)
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, "v1"))
			}},
		{desc: "file with the name is a conflict and stays", name: "v1", wantReason: managerapi.ReasonConflict,
			survivors: []string{"pool/v1"},
			setup:     func(t *testing.T, e *testEnv) { filetest.Write(t, filepath.Join(e.pool, "v1"), "x") }},
		{desc: "traversal", name: "..", wantReason: managerapi.ReasonBadRequest, survivors: []string{"pool", "sibling/data/keep.txt"}},
		{desc: "invalid owner", name: "v1", owner: "-", wantReason: managerapi.ReasonBadRequest,
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "pool directory missing is PoolNotFound, not a removal", name: "v1",
			wantReason: managerapi.ReasonPoolNotFound, wantMessage: "prepare it with PUT /v1/pools/default",
			setup: func(t *testing.T, e *testEnv) { os.RemoveAll(e.pool) }},
		{desc: "pool not configured is PoolNotFound", pool: "other", name: "v1",
			wantReason: managerapi.ReasonPoolNotFound, wantMessage: `pool "other" is not configured on node "node-a"`,
			survivors: []string{"pool/v1/data", "pool/.hostpath/owners/v1"},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "record of the owner without a directory is removed", name: "v1", wantDeleted: true,
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-a", false) }},
		{desc: "directory of another PV stays", name: "v1",
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-b", wantMessage: `belongs to PersistentVolume "pv-b"`,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-b", true)
			}},
		{desc: "record of another PV without directory stays", name: "v1",
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-b",
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-b", false) }},
		{desc: "directory without a record stays", name: "v1",
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "", wantMessage: "adopt it first",
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "record without directory (crash before mkdir) is removed", name: "v1", wantDeleted: true,
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-a", false) }},
		{desc: "ifEmpty keeps a directory with data", name: "v1", ifEmpty: true, wantReason: managerapi.ReasonNotEmpty,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "ifEmpty keeps a directory with an empty subdirectory", name: "v1", ifEmpty: true, wantReason: managerapi.ReasonNotEmpty,
			setup: func(t *testing.T, e *testEnv) {
				mustMkdir(t, filepath.Join(e.pool, "v1", "empty"))
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "ifEmpty removes an empty directory", name: "v1", ifEmpty: true, wantDeleted: true,
			setup: func(t *testing.T, e *testEnv) {
				mustMkdir(t, filepath.Join(e.pool, "v1"))
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "filesystem mounted inside", name: "v1", wantReason: managerapi.ReasonConflict,
			mounts:      []string{`90 40 0:50 / BASE/pool/v1/a/my\040disk rw - ext4 /dev/sdb rw`},
			wantMessage: "mounted inside (BASE/pool/v1/a/my disk); unmount them first",
			setup: func(t *testing.T, e *testEnv) {
				e.writeRecord(t, "v1", "pv-a", false)
				mustMkdir(t, filepath.Join(e.pool, "v1", "a", "my disk"))
				filetest.Write(t, filepath.Join(e.pool, "v1", "a", "my disk", "precious"), "x")
			}},
		{desc: "filesystem mounted on the volume", name: "v1", wantReason: managerapi.ReasonConflict,
			mounts: []string{`90 40 0:50 / BASE/pool/v1 rw - ext4 /dev/sdb rw`, `91 90 0:51 / BASE/pool/v1/x rw - ext4 /dev/sdc rw`},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "mount table unreadable", name: "v1", wantErr: true, wantMessage: "cannot tell whether filesystems are mounted",
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
				os.Remove(e.mountInfo)
			}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t, tc.mounts...)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			owner := caseOwner(tc.owner)
			pool := tc.pool
			if pool == "" {
				pool = "default"
			}
			before := snapshot(t, e.base)
			deleted, err := e.store.DeleteVolume(ctx, pool, tc.name, owner, tc.ifEmpty, "")
			checkErrOrInternal(t, "DeleteVolume", err, tc.wantErr, tc.wantReason, tc.wantOwner)
			if err != nil {
				if msg := strings.ReplaceAll(tc.wantMessage, "BASE", e.base); !strings.Contains(err.Error(), msg) {
					t.Errorf("DeleteVolume error %q does not say %q", err, msg)
				}
				if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
					t.Errorf("failed DeleteVolume changed the filesystem: %v", d)
				}
			}
			if deleted != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v", deleted, tc.wantDeleted)
			}
			if err == nil {
				if _, err := os.Lstat(filepath.Join(e.pool, tc.name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("volume still there: %v", err)
				}
				checkRecord(t, e, tc.name, nil)
			}
			for _, s := range tc.survivors {
				if _, err := os.Lstat(filepath.Join(e.base, s)); err != nil {
					t.Errorf("%s was removed: %v", s, err)
				}
			}
		})
	}
}

// TestDeleteMountInsideSymlinkedPool: a pool configured through a symlink
// is compared with the mount table by its real path too.
func TestDeleteMountInsideSymlinkedPool(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	link := filepath.Join(e.base, "pool-link")
	mustSymlink(t, e.pool, link)
	filetest.Write(t, e.mountInfo, fmt.Sprintf("90 40 0:50 / %s/v1/m rw - ext4 /dev/sdb rw\n", e.pool))
	s, err := New(Config{
		Pools:         map[string]string{"default": link},
		Identity:      e.identity,
		MountInfoFile: e.mountInfo,
	})
	if err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(e.pool, "v1", "m"))
	e.writeRecord(t, "v1", "pv-a", false)
	_, err = s.DeleteVolume(ctx, "default", "v1", "pv-a", false, "")
	checkErr(t, "DeleteVolume", err, managerapi.ReasonConflict, "")
	if _, err := os.Stat(filepath.Join(e.pool, "v1", "m")); err != nil {
		t.Errorf("mount point removed: %v", err)
	}
}

// countdownCtx is a context whose Err reports Canceled after left calls:
// a client that gives up in the middle of a removal, without timing.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return c.Context.Err()
}

func TestDeleteVolumeCancelled(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		checks int64 // ctx.Err calls that succeed
	}{
		{desc: "cancelled before the call", checks: 0},
		{desc: "cancelled during the removal", checks: 40},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			e.writeRecord(t, "v1", "pv-a", false)
			const files = 100
			for i := range files {
				mustMkdir(t, filepath.Join(e.pool, "v1", fmt.Sprintf("d%d", i%10)))
				filetest.Write(t, filepath.Join(e.pool, "v1", fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%d", i)), "x")
			}
			before := snapshot(t, e.base)
			cctx := &countdownCtx{Context: ctx}
			cctx.left.Store(tc.checks)
			deleted, err := e.store.DeleteVolume(cctx, "default", "v1", "pv-a", false, "")
			if !errors.Is(err, context.Canceled) || deleted {
				t.Fatalf("DeleteVolume = %v, %v, want context.Canceled", deleted, err)
			}
			if managerapi.ReasonOf(err) != "" {
				t.Errorf("cancellation reported as %s", managerapi.ReasonOf(err))
			}
			removed := len(diff(before, snapshot(t, e.base)))
			if tc.checks == 0 && removed != 0 {
				t.Errorf("%d entries changed before the first check", removed)
			}
			if _, err := os.Stat(filepath.Join(e.pool, "v1")); err != nil {
				t.Errorf("volume directory gone after a cancelled removal: %v", err)
			}
			checkRecord(t, e, "v1", &record{Owner: "pv-a", OwnedSince: t0})
			// The lock was released, and a new call finishes the work.
			deleted, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, "")
			if err != nil || !deleted {
				t.Fatalf("DeleteVolume after cancellation = %v, %v", deleted, err)
			}
			checkRecord(t, e, "v1", nil)
		})
	}
}

// deepHelperEnv selects TestHelperDeepRemove in a child process and names
// the test's base directory.
const deepHelperEnv = "HOSTPATH_DISK_TEST_DEEP_REMOVE"

const deepTreeDepth = 600

// TestDeleteDeepTreeWithFewFiles removes a tree deeper than the number of
// files the process may open, in a child process whose RLIMIT_NOFILE is 256
// (the limit is per process, so the test binary is run again).
func TestDeleteDeepTreeWithFewFiles(t *testing.T) {
	e := newTestEnv(t)
	e.writeRecord(t, "v1", "pv-a", false)
	dirs := append([]string{e.pool, "v1"}, slices.Repeat([]string{"d"}, deepTreeDepth)...)
	for i := 2; i < len(dirs); i += 100 {
		mustMkdir(t, filepath.Join(dirs[:i+1]...))
		filetest.Write(t, filepath.Join(filepath.Join(dirs[:i+1]...), "f"), "x")
		mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(filepath.Join(dirs[:i+1]...), "out"))
	}
	deepest := filepath.Join(dirs...)
	mustMkdir(t, deepest)
	filetest.Write(t, filepath.Join(deepest, "f"), "x")
	if err := os.Chmod(filepath.Join(dirs[:len(dirs)/2]...), 0); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDeepRemove$", "-test.v")
	cmd.Env = append(os.Environ(), deepHelperEnv+"="+e.base)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHelperDeepRemove") {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	t.Logf("helper process:\n%s", out)
	if _, err := os.Lstat(filepath.Join(e.pool, "v1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume still there: %v", err)
	}
	checkRecord(t, e, "v1", nil)
	if _, err := os.Stat(filepath.Join(e.base, "sibling", "data", "keep.txt")); err != nil {
		t.Errorf("file outside removed: %v", err)
	}
}

// TestHelperDeepRemove runs only as TestDeleteDeepTreeWithFewFiles's child.
func TestHelperDeepRemove(t *testing.T) {
	base := os.Getenv(deepHelperEnv)
	if base == "" {
		t.Skip("runs only in the child process of TestDeleteDeepTreeWithFewFiles")
	}
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Show that the tree defeats a removal that keeps a file open per level.
	control := filepath.Join(append([]string{base, "control"}, slices.Repeat([]string{"d"}, deepTreeDepth)...)...)
	mustMkdir(t, control)
	if root, err := os.OpenRoot(base); err == nil {
		t.Logf("os.Root.RemoveAll of a tree as deep: %v", root.RemoveAll("control"))
		root.Close()
	}

	_, ctx := ktesting.NewTestContext(t)
	s, err := New(Config{
		Pools:         map[string]string{"default": filepath.Join(base, "pool")},
		Identity:      loadIdentity(t, identity.Config{StateDir: filepath.Join(base, "state"), BootIDFile: filepath.Join(base, "boot_id")}),
		MountInfoFile: filepath.Join(base, "mountinfo"),
	})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := s.DeleteVolume(ctx, "default", "v1", "pv-a", false, "")
	if err != nil || !deleted {
		t.Fatalf("DeleteVolume = %v, %v", deleted, err)
	}
}

func TestParseMountInfo(t *testing.T) {
	for _, tc := range []struct {
		desc, in string
		want     []string
		wantErr  bool
	}{
		{desc: "empty", in: "", want: nil},
		{desc: "plain", in: "28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw\n36 28 0:30 / /var/lib rw - tmpfs tmpfs rw\n",
			want: []string{"/", "/var/lib"}},
		{desc: "no optional fields and blank lines", in: "\n36 28 0:30 /x /mnt/a rw - tmpfs tmpfs rw\n\n",
			want: []string{"/mnt/a"}},
		{desc: "escapes", in: `36 28 0:30 / /mnt/my\040disk\011tab\012nl\134bs rw - tmpfs tmpfs rw`,
			want: []string{"/mnt/my disk\ttab\nnl\\bs"}},
		{desc: "deleted bind mount", in: `36 28 0:30 / /mnt/gone\040(deleted) rw - tmpfs tmpfs rw`,
			want: []string{"/mnt/gone (deleted)"}},
		{desc: "not escapes", in: `36 28 0:30 / /mnt/a\9b\04\ rw - tmpfs tmpfs rw`,
			want: []string{`/mnt/a\9b\04\`}},
		{desc: "too few fields", in: "36 28 0:30 /\n", wantErr: true},
		{desc: "relative mount point", in: "36 28 0:30 / mnt rw - tmpfs tmpfs rw\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseMountInfo(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseMountInfo error = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("parseMountInfo = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMountsInside(t *testing.T) {
	points := []string{"/", "/p", "/p/v1", "/p/v10", "/p/v1/x", "/p/v1/x", "/q/p/v1", "/p/v1-a", "/r/v1/y"}
	got := mountsInside(points, "/p/v1", "/r/v1")
	if want := []string{"/p/v1", "/p/v1/x", "/r/v1/y"}; !slices.Equal(got, want) {
		t.Errorf("mountsInside = %q, want %q", got, want)
	}
	if got := mountsInside(points, "/p/v2"); len(got) != 0 {
		t.Errorf("mountsInside(/p/v2) = %q", got)
	}
}

func TestReadOwnMountTable(t *testing.T) {
	if _, err := os.Stat(DefaultMountInfoFile); err != nil {
		t.Skipf("no %s: %v", DefaultMountInfoFile, err)
	}
	points, err := readMountPoints(DefaultMountInfoFile)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(points, "/") {
		t.Errorf("mount table of this process lists no /: %q", points)
	}
}

// unprivilegedHelperEnv selects TestHelperUnprivilegedRemove in a child
// process and names the pool it removes a volume from.
const unprivilegedHelperEnv = "HOSTPATH_DISK_TEST_UNPRIVILEGED_REMOVE"

// nobody is the user and group the unprivileged removal runs as.
const nobody = 65534

// TestRemoveTreeWithoutPrivileges removes a tree of unreadable and
// unwritable directories as a user without CAP_DAC_OVERRIDE (in a child
// process that gives up root, when the test runs as root).
func TestRemoveTreeWithoutPrivileges(t *testing.T) {
	pool := filepath.Join(t.TempDir(), "pool")
	vol := filepath.Join(pool, "v1")
	for _, d := range []string{"r/x", "none/inner/deeper", "wx/y"} {
		mustMkdir(t, filepath.Join(vol, d))
		filetest.Write(t, filepath.Join(vol, d, "f"), "x")
	}
	if os.Geteuid() == 0 {
		err := filepath.WalkDir(pool, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		p    string
		mode fs.FileMode
	}{{"r/x", 0o500}, {"r", 0o500}, {"none/inner/deeper", 0}, {"none/inner", 0}, {"none", 0}, {"wx", 0o300}, {".", 0}} {
		if err := os.Chmod(filepath.Join(vol, c.p), c.mode); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		removeVolumeTree(t, pool)
	} else {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperUnprivilegedRemove$", "-test.v")
		cmd.Env = append(os.Environ(), unprivilegedHelperEnv+"="+pool)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestHelperUnprivilegedRemove") {
			t.Fatalf("helper process: %v\n%s", err, out)
		}
	}
	if _, err := os.Lstat(vol); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume still there: %v", err)
	}
}

// TestHelperUnprivilegedRemove runs only as TestRemoveTreeWithoutPrivileges's
// child.
func TestHelperUnprivilegedRemove(t *testing.T) {
	pool := os.Getenv(unprivilegedHelperEnv)
	if pool == "" {
		t.Skip("runs only in the child process of TestRemoveTreeWithoutPrivileges")
	}
	// The test's directories above the pool are root's, mode 0700: open
	// the pool before giving up root.
	root, err := os.OpenRoot(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := syscall.Setgroups(nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgid(nobody); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setuid(nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := root.OpenRoot("v1"); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("the volume is readable without privileges (%v): the test proves nothing", err)
	}
	_, ctx := ktesting.NewTestContext(t)
	if err := removeTree(ctx, root, "v1"); err != nil {
		t.Fatal(err)
	}
}

// removeVolumeTree removes pool/v1 with removeTree, in this process.
func removeVolumeTree(t *testing.T, pool string) {
	root, err := os.OpenRoot(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, ctx := ktesting.NewTestContext(t)
	if err := removeTree(ctx, root, "v1"); err != nil {
		t.Fatal(err)
	}
}
