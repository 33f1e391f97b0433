package disk

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/manager/internal/identity"
)

// t0 dates the records tests write by hand; the Store's clock reads t1.
var (
	t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

// testEnv is a pool "default" at base/pool with a sibling directory and
// files outside it, the identity files under base/state, a mount table at
// base/mountinfo and a clock that reads t1.
type testEnv struct {
	base, pool, mountInfo string
	identity              *identity.Identity
	store                 *Store
	// owners is what the Store learns of PVs and claims; it knows none
	// until a test adds them.
	owners *fakeOwners
}

// caseOwner is the owner a test case names: "pv-a" when it names none,
// none ("") when it says "-".
func caseOwner(owner string) string {
	switch owner {
	case "":
		return "pv-a"
	case "-":
		return ""
	}
	return owner
}

// loadIdentity loads the host identity of cfg for a test.
func loadIdentity(t testing.TB, cfg identity.Config) *identity.Identity {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	id, err := identity.Load(ctx, cfg)
	if err != nil {
		t.Fatalf("load the host identity: %v", err)
	}
	return id
}

// fakeMounts are mount table lines that exist in every testEnv: mounts at,
// above and beside the pool, none inside a volume.
const fakeMounts = `22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw
40 28 0:33 / BASE rw,relatime shared:20 - tmpfs tmpfs rw
41 40 259:2 /var/hpvolumes BASE/pool rw,relatime shared:1 - ext4 /dev/root rw
42 40 0:34 / BASE/pool/v10 rw,relatime shared:21 - tmpfs tmpfs rw
43 40 0:35 / BASE/pool/v1-other\040x rw,relatime shared:22 - tmpfs tmpfs rw
`

func newTestEnv(t testing.TB, extraMounts ...string) *testEnv {
	t.Helper()
	base := t.TempDir()
	e := &testEnv{base: base, pool: filepath.Join(base, "pool"), mountInfo: filepath.Join(base, "mountinfo")}
	for _, d := range []string{e.pool, filepath.Join(base, "sibling", "data")} {
		mustMkdir(t, d)
	}
	filetest.Write(t, filepath.Join(base, "sibling", "data", "keep.txt"), "outside")
	filetest.Write(t, filepath.Join(base, "boot_id"), "boot-1\n")
	filetest.Write(t, filepath.Join(base, "machine-id"), "machine-1\n")
	mounts := fakeMounts + strings.Join(extraMounts, "\n") + "\n"
	filetest.Write(t, e.mountInfo, strings.ReplaceAll(mounts, "BASE", base))
	e.identity = loadIdentity(t, identity.Config{
		StateDir:      filepath.Join(base, "state"),
		BootIDFile:    filepath.Join(base, "boot_id"),
		MachineIDFile: filepath.Join(base, "machine-id"),
	})
	e.owners = &fakeOwners{}
	e.store = e.newStore(t, func(c *Config) { c.Owners = e.owners })
	return e
}

// setUp is a case's start: a new testEnv that setup (if any) prepared,
// a context logging to t and the snapshot of e.base after setup.
func setUp(t *testing.T, setup func(*testing.T, *testEnv)) (context.Context, *testEnv, map[string]string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	if setup != nil {
		setup(t, e)
	}
	return ctx, e, snapshot(t, e.base)
}

// newStore returns a new Store (a manager restart when called again) of
// node-a over e's pool "default", its identity and mount table, at t1, with
// what edit sets besides.
func (e *testEnv) newStore(t testing.TB, edit func(*Config)) *Store {
	t.Helper()
	c := Config{
		NodeName:      "node-a",
		Pools:         map[string]string{"default": e.pool},
		Identity:      e.identity,
		MountInfoFile: e.mountInfo,
		Clock:         testingclock.NewFakePassiveClock(t1),
	}
	edit(&c)
	s, err := New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// writeRecord writes an owner record by hand, dated t0.
func (e *testEnv) writeRecord(t testing.TB, name, owner string, retained bool) {
	t.Helper()
	e.writeRecordPolicy(t, name, owner, retained, "")
}

// writeRecordPolicy writes an owner record dated t0 by hand, with the
// reclaim policy policy (left out when empty).
func (e *testEnv) writeRecordPolicy(t testing.TB, name, owner string, retained bool, policy string) {
	t.Helper()
	e.writeRecordNamespace(t, name, owner, retained, policy, "")
}

// writeRecordNamespace writes an owner record dated t0 by hand, with the
// reclaim policy policy and the claim namespace ns (each left out when
// empty, as in records of versions that did not know them).
func (e *testEnv) writeRecordNamespace(t testing.TB, name, owner string, retained bool, policy, ns string) {
	t.Helper()
	rec := map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "retained": retained}
	if policy != "" {
		rec["reclaimPolicy"] = policy
	}
	if ns != "" {
		rec["claimNamespace"] = ns
	}
	e.writeRecordFields(t, name, rec)
}

// writeRecordFields writes the owner record of volume name by hand, with
// fields as its JSON object.
func (e *testEnv) writeRecordFields(t testing.TB, name string, fields map[string]any) {
	t.Helper()
	mustMkdir(t, filepath.Join(e.pool, OwnersDir))
	data, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	filetest.Write(t, filepath.Join(e.pool, OwnersDir, name), string(data))
}

// record reads an owner record by hand; nil when there is none.
func (e *testEnv) record(t testing.TB, name string) *record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.pool, OwnersDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("record %s: %v", name, err)
	}
	return &r
}

// volume makes the volume directory name holding a file "data".
func (e *testEnv) volume(t testing.TB, name string) {
	t.Helper()
	mustMkdir(t, filepath.Join(e.pool, name))
	filetest.Write(t, filepath.Join(e.pool, name, "data"), "data of "+name)
}

func mustMkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// checkErr fails unless err has reason want ("" for no error), and, for
// OwnerConflict, names owner.
// checkErrOrInternal is checkErr, or, when internal, checks that err is
// an error of no reason (an internal error), failing at once if not.
func checkErrOrInternal(t testing.TB, op string, err error, internal bool, want managerapi.Reason, owner string) {
	t.Helper()
	if !internal {
		checkErr(t, op, err, want, owner)
		return
	}
	if err == nil || managerapi.ReasonOf(err) != "" {
		t.Fatalf("%s error = %v, want an internal error", op, err)
	}
}

func checkErr(t testing.TB, op string, err error, want managerapi.Reason, owner string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		return
	}
	var ce *managerapi.Error
	if !errors.As(err, &ce) || ce.Reason != want {
		t.Fatalf("%s error = %v, want reason %s", op, err, want)
	}
	if ce.StatusCode != want.HTTPStatus() {
		t.Errorf("%s error status %d, want %d", op, ce.StatusCode, want.HTTPStatus())
	}
	if want == managerapi.ReasonOwnerConflict && ce.Owner != owner {
		t.Errorf("%s error names owner %q, want %q (%v)", op, ce.Owner, owner, err)
	}
}

// checkRecord fails unless volume name has a record naming owner (nil: no
// record) dated since, retained, with the reclaim policy and claim
// namespace as given.
func checkRecord(t testing.TB, e *testEnv, name string, want *record) {
	t.Helper()
	got := e.record(t, name)
	switch {
	case want == nil && got != nil:
		t.Errorf("record of %s = %+v, want none", name, got)
	case want != nil && got == nil:
		t.Errorf("no record of %s, want %+v", name, want)
	case want != nil && (got.Owner != want.Owner || !got.OwnedSince.Equal(want.OwnedSince) || got.Retained != want.Retained || got.ReclaimPolicy != want.ReclaimPolicy ||
		got.ClaimNamespace != want.ClaimNamespace):
		t.Errorf("record of %s = %+v, want %+v", name, got, want)
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
		{MetadataDir, false},
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
		if err != nil && managerapi.ReasonOf(err) != managerapi.ReasonBadRequest {
			t.Errorf("ValidateVolumeName(%q) error %v is not a BadRequest", tc.name, err)
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
		err := ValidatePoolName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidatePoolName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && managerapi.ReasonOf(err) != managerapi.ReasonBadRequest {
			t.Errorf("ValidatePoolName(%q) error %v is not a BadRequest", tc.name, err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	state := loadIdentity(t, identity.Config{StateDir: t.TempDir()})
	for name, pools := range map[string]map[string]string{
		"no pools":      {},
		"bad pool name": {"Bad_Name": "/var/hp"},
		"relative path": {"default": "var/hp"},
		"unclean path":  {"default": "/var/hp/../x"},
		"root path":     {"default": "/"},
		"nested pools":  {"a": "/var/hp", "b": "/var/hp/b"},
		"same path":     {"a": "/var/hp", "b": "/var/hp"},
	} {
		if _, err := New(Config{Pools: pools, Identity: state}); err == nil {
			t.Errorf("%s: New accepted %v", name, pools)
		}
	}
	if _, err := New(Config{Pools: map[string]string{"default": "/var/hp"}}); err == nil {
		t.Error("New accepted a configuration without a host identity")
	}
}

func TestCreateVolume(t *testing.T) {
	old := syscall.Umask(0o077) // the mode must not depend on the umask
	t.Cleanup(func() { syscall.Umask(old) })
	for _, tc := range []struct {
		desc        string
		setup       func(t *testing.T, e *testEnv)
		pool, name  string
		owner       string // "pv-a" when empty
		mode        fs.FileMode
		required    int64
		policy      string // the reclaim policy asked for
		namespace   string // the claim namespace asked for
		wantReason  managerapi.Reason
		wantOwner   string // named by an OwnerConflict
		wantMessage string // part of the error message
		wantErr     bool   // an error that is not a *managerapi.Error
		wantCreated bool
		wantMode    string
		wantRecord  *record // after a success
	}{
		{desc: "new directory gets the exact mode and a record", name: "v1", mode: 0o777,
			wantCreated: true, wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t1}},
		{desc: "new directory records the reclaim policy", name: "v1", mode: 0o777, policy: managerapi.ReclaimDelete,
			wantCreated: true, wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t1, ReclaimPolicy: managerapi.ReclaimDelete}},
		{desc: "new directory records policy Retain", name: "v1", mode: 0o777, policy: managerapi.ReclaimRetain,
			wantCreated: true, wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t1, ReclaimPolicy: managerapi.ReclaimRetain}},
		{desc: "existing record of the same policy is confirmed", name: "v1", mode: 0o777, policy: managerapi.ReclaimRetain,
			wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t0, ReclaimPolicy: managerapi.ReclaimRetain},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimRetain)
			}},
		{desc: "existing record of another policy is never rewritten", name: "v1", mode: 0o777, policy: managerapi.ReclaimDelete,
			wantReason: managerapi.ReasonConflict, wantMessage: `reclaim policy "Retain", not "Delete"`,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimRetain)
			}},
		{desc: "existing record without a policy does not take one", name: "v1", mode: 0o777, policy: managerapi.ReclaimDelete,
			wantReason: managerapi.ReasonConflict, wantMessage: `reclaim policy "", not "Delete"`,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "record without directory of the same policy gets its directory", name: "v1", mode: 0o777, policy: managerapi.ReclaimDelete,
			wantCreated: true, wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t0, ReclaimPolicy: managerapi.ReclaimDelete},
			setup: func(t *testing.T, e *testEnv) { e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimDelete) }},
		{desc: "record without directory of another policy is left alone", name: "v1", mode: 0o777, policy: managerapi.ReclaimRetain,
			wantReason: managerapi.ReasonConflict, wantMessage: `reclaim policy "Delete", not "Retain"`,
			setup: func(t *testing.T, e *testEnv) { e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimDelete) }},
		{desc: "invalid reclaim policy", name: "v1", mode: 0o777, policy: "Recycle", wantReason: managerapi.ReasonBadRequest,
			wantMessage: "reclaimPolicy"},
		{desc: "record with an invalid reclaim policy is corrupt", name: "v1", mode: 0o777, wantErr: true,
			setup: func(t *testing.T, e *testEnv) { e.writeRecordPolicy(t, "v1", "pv-a", false, "delete") }},
		{desc: "new directory records the claim namespace", name: "v1", mode: 0o777, policy: managerapi.ReclaimRetain, namespace: "team-a",
			wantCreated: true, wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t1, ReclaimPolicy: managerapi.ReclaimRetain, ClaimNamespace: "team-a"}},
		{desc: "existing record of the same claim namespace is confirmed", name: "v1", mode: 0o777, namespace: "team-a",
			wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t0, ClaimNamespace: "team-a"},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", false, "", "team-a")
			}},
		{desc: "existing record of another claim namespace is never rewritten", name: "v1", mode: 0o777, namespace: "team-b",
			wantReason: managerapi.ReasonConflict, wantMessage: `claim namespace "team-a", not "team-b"`,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", false, "", "team-a")
			}},
		{desc: "existing record without a claim namespace (older version) does not take one", name: "v1", mode: 0o777, namespace: "team-a",
			wantReason: managerapi.ReasonConflict, wantMessage: `claim namespace "", not "team-a"`,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "invalid claim namespace", name: "v1", mode: 0o777, namespace: "Team_A", wantReason: managerapi.ReasonBadRequest,
			wantMessage: "claimNamespace"},
		{desc: "claim namespace longer than a DNS label", name: "v1", mode: 0o777, namespace: strings.Repeat("n", 64), wantReason: managerapi.ReasonBadRequest,
			wantMessage: "claimNamespace"},
		{desc: "record with an invalid claim namespace is corrupt", name: "v1", mode: 0o777, wantErr: true,
			setup: func(t *testing.T, e *testEnv) { e.writeRecordNamespace(t, "v1", "pv-a", false, "", "../team-a") }},
		{desc: "setgid mode", name: "v1", mode: 0o775 | fs.ModeSetgid,
			wantCreated: true, wantMode: "02775", wantRecord: &record{Owner: "pv-a", OwnedSince: t1}},
		{desc: "own existing directory gets the new mode", name: "v1", mode: 0o750, wantMode: "0750",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", true)
			}},
		{desc: "record without directory (crash before mkdir) makes the directory", name: "v1", mode: 0o700,
			wantCreated: true, wantMode: "0700", wantRecord: &record{Owner: "pv-a", OwnedSince: t0},
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-a", false) }},
		{desc: "directory of another PV", name: "v1", mode: 0o777,
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-b", wantMessage: `belongs to PersistentVolume "pv-b"`,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-b", false)
			}},
		{desc: "record of another PV without directory", name: "v1", mode: 0o777,
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-b",
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-b", false) }},
		{desc: "directory without a record must be adopted", name: "v1", mode: 0o777,
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "", wantMessage: "/v1/pools/default/volumes/v1/owner",
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "file with the name", name: "v1", mode: 0o777, wantReason: managerapi.ReasonConflict,
			setup: func(t *testing.T, e *testEnv) { filetest.Write(t, filepath.Join(e.pool, "v1"), "x") }},
		{desc: "file with the name and an own record", name: "v1", mode: 0o777, wantReason: managerapi.ReasonConflict,
			setup: func(t *testing.T, e *testEnv) {
				filetest.Write(t, filepath.Join(e.pool, "v1"), "x")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "symlink to a directory outside", name: "v1", mode: 0o777, wantReason: managerapi.ReasonConflict,
			setup: func(t *testing.T, e *testEnv) {
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, "v1"))
			}},
		{desc: "dangling symlink", name: "v1", mode: 0o777, wantReason: managerapi.ReasonConflict,
			setup: func(t *testing.T, e *testEnv) {
				mustSymlink(t, "/nonexistent-hostpath-test", filepath.Join(e.pool, "v1"))
			}},
		{desc: "metadata directory is a symlink", name: "v1", mode: 0o777, wantErr: true,
			setup: func(t *testing.T, e *testEnv) {
				mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, MetadataDir))
			}},
		{desc: "corrupt record", name: "v1", mode: 0o777, wantErr: true,
			setup: func(t *testing.T, e *testEnv) {
				mustMkdir(t, filepath.Join(e.pool, OwnersDir))
				filetest.Write(t, filepath.Join(e.pool, OwnersDir, "v1"), `{"owner": "Not A PV"}`)
			}},
		{desc: "traversal", name: "../sibling", mode: 0o777, wantReason: managerapi.ReasonBadRequest},
		{desc: "metadata directory name", name: MetadataDir, mode: 0o777, wantReason: managerapi.ReasonBadRequest},
		{desc: "empty owner", name: "v1", owner: "-", mode: 0o777, wantReason: managerapi.ReasonBadRequest},
		{desc: "owner not a PV name", name: "v1", owner: "PV_A", mode: 0o777, wantReason: managerapi.ReasonBadRequest},
		{desc: "unknown pool", pool: "other", name: "v1", mode: 0o777, wantReason: managerapi.ReasonPoolNotFound},
		{desc: "invalid pool", pool: "..", name: "v1", mode: 0o777, wantReason: managerapi.ReasonBadRequest},
		{desc: "bad mode bits", name: "v1", mode: fs.ModeDir | 0o777, wantReason: managerapi.ReasonBadRequest},
		{desc: "not enough space writes nothing", name: "v1", mode: 0o777, required: 1 << 62,
			wantReason: managerapi.ReasonInsufficientStorage},
		{desc: "an own record is finished without a new space check (promised when it was written)", name: "v1", mode: 0o777, required: 1 << 62,
			wantCreated: true, wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t0, SizeBytes: 1 << 62},
			setup: func(t *testing.T, e *testEnv) { e.writeSizedRecord(t, "v1", "pv-a", 1<<62) }},
		{desc: "space is not checked for an existing directory", name: "v1", mode: 0o777, required: 1 << 62,
			wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t0, SizeBytes: 1 << 62},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeSizedRecord(t, "v1", "pv-a", 1<<62)
			}},
		{desc: "a record grown by an expansion confirms the size it was made with", name: "v1", mode: 0o777, required: 1 << 20,
			wantMode: "0777", wantRecord: &record{Owner: "pv-a", OwnedSince: t0, SizeBytes: 2 << 20},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeSizedRecord(t, "v1", "pv-a", 2<<20)
			}},
		{desc: "a record smaller than the request is never grown by a create", name: "v1", mode: 0o777, required: 2 << 20,
			wantReason: managerapi.ReasonConflict, wantMessage: "less than the 2Mi requested",
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeSizedRecord(t, "v1", "pv-a", 1)
			}},
		{desc: "a multihost record is no node-mode volume's", name: "v1", mode: 0o777,
			wantReason: managerapi.ReasonConflict, wantMessage: "multihost true, not false",
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeMultihostRecord(t, "v1", "pv-a")
			}},
		{desc: "enough space", name: "v1", mode: 0o700, required: 1,
			wantCreated: true, wantMode: "0700", wantRecord: &record{Owner: "pv-a", OwnedSince: t1}},
		{desc: "pool directory missing", name: "v1", mode: 0o777, wantReason: managerapi.ReasonPoolNotFound,
			setup: func(t *testing.T, e *testEnv) { os.RemoveAll(e.pool) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			pool, owner := tc.pool, caseOwner(tc.owner)
			if pool == "" {
				pool = "default"
			}
			before := snapshot(t, e.base)
			req := managerapi.CreateVolumeRequest{Owner: owner, RequiredBytes: tc.required, ReclaimPolicy: tc.policy, ClaimNamespace: tc.namespace}
			v, created, err := e.store.CreateVolume(ctx, pool, tc.name, req, tc.mode, "")
			if tc.wantErr || tc.wantReason != "" {
				checkErrOrInternal(t, "CreateVolume", err, tc.wantErr, tc.wantReason, tc.wantOwner)
				if !strings.Contains(err.Error(), tc.wantMessage) {
					t.Errorf("CreateVolume error %q does not say %q", err, tc.wantMessage)
				}
				if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
					t.Errorf("failed CreateVolume changed the filesystem: %v", d)
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
			if v.Owner != owner || v.OwnedSince == nil || !v.OwnedSince.Equal(tc.wantRecord.OwnedSince) || v.Retained != tc.wantRecord.Retained ||
				v.ReclaimPolicy != tc.wantRecord.ReclaimPolicy || v.ClaimNamespace != tc.wantRecord.ClaimNamespace {
				t.Errorf("volume = %+v, want owner record %+v", v, tc.wantRecord)
			}
			fi, err := os.Lstat(want)
			if err != nil || !fi.IsDir() {
				t.Fatalf("directory on disk: %v %v", fi, err)
			}
			if got := managerapi.FormatMode(fi.Mode()); got != tc.wantMode {
				t.Errorf("mode on disk = %s, want %s", got, tc.wantMode)
			}
			checkRecord(t, e, tc.name, tc.wantRecord)
		})
	}
}

func TestSetOwner(t *testing.T) {
	for _, tc := range []struct {
		desc            string
		setup           func(t *testing.T, e *testEnv)
		name            string
		owner, previous string
		retained        bool
		policy          string
		namespace       string // the claim namespace asked for
		wantReason      managerapi.Reason
		wantOwner       string
		wantRecord      *record
		// wantSameFile says that the record, written by hand, is left
		// as it was: nothing in it changes.
		wantSameFile bool
	}{
		{desc: "adopt a directory without a record", name: "v1", owner: "pv-a", previous: "",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t1},
			setup:      func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "adopt as retained", name: "v1", owner: "pv-a", previous: "", retained: true,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t1, Retained: true},
			setup:      func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "wrong previous for a directory without a record", name: "v1", owner: "pv-a", previous: "pv-x",
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "",
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "mark retained keeps the date", name: "v1", owner: "pv-a", previous: "pv-a", retained: true,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "mark retained keeps the reclaim policy", name: "v1", owner: "pv-a", previous: "pv-a", retained: true,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ReclaimPolicy: managerapi.ReclaimDelete},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimDelete)
			}},
		{desc: "take over clears the previous owner's reclaim policy", name: "v1", owner: "pv-b", previous: "pv-a",
			wantRecord: &record{Owner: "pv-b", OwnedSince: t1},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", true, managerapi.ReclaimRetain)
			}},
		{desc: "same record again", name: "v1", owner: "pv-a", previous: "pv-a",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0}, wantSameFile: true,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "same record and reclaim policy again", name: "v1", owner: "pv-a", previous: "pv-a", retained: true, policy: managerapi.ReclaimRetain,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain}, wantSameFile: true,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", true, managerapi.ReclaimRetain)
			}},
		{desc: "same owner records a reclaim policy, keeps the date", name: "v1", owner: "pv-a", previous: "pv-a", policy: managerapi.ReclaimDelete,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, ReclaimPolicy: managerapi.ReclaimDelete},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "same owner changes the reclaim policy", name: "v1", owner: "pv-a", previous: "pv-a", retained: true, policy: managerapi.ReclaimRetain,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimDelete)
			}},
		{desc: "adopt with a reclaim policy", name: "v1", owner: "pv-a", previous: "", policy: managerapi.ReclaimDelete,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t1, ReclaimPolicy: managerapi.ReclaimDelete},
			setup:      func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "take over with the new owner's reclaim policy", name: "v1", owner: "pv-b", previous: "pv-a", policy: managerapi.ReclaimDelete,
			wantRecord: &record{Owner: "pv-b", OwnedSince: t1, ReclaimPolicy: managerapi.ReclaimDelete},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", true, managerapi.ReclaimRetain)
			}},
		{desc: "invalid reclaim policy", name: "v1", owner: "pv-a", previous: "pv-a", policy: "Recycle", wantReason: managerapi.ReasonBadRequest,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordPolicy(t, "v1", "pv-a", false, managerapi.ReclaimDelete)
			}},
		{desc: "reclaim policy in lower case", name: "v1", owner: "pv-a", previous: "", policy: "delete", wantReason: managerapi.ReasonBadRequest,
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "mark retained keeps the claim namespace", name: "v1", owner: "pv-a", previous: "pv-a", retained: true, policy: managerapi.ReclaimRetain,
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain, ClaimNamespace: "team-a"},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", false, managerapi.ReclaimRetain, "team-a")
			}},
		{desc: "same record and claim namespace again", name: "v1", owner: "pv-a", previous: "pv-a", retained: true, namespace: "team-a",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ClaimNamespace: "team-a"}, wantSameFile: true,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", true, "", "team-a")
			}},
		{desc: "hand over to another namespace keeps owner, date and policy", name: "v1", owner: "pv-a", previous: "pv-a", retained: true, namespace: "team-b",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain, ClaimNamespace: "team-b"},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", true, managerapi.ReclaimRetain, "team-a")
			}},
		{desc: "record of an older version gets a claim namespace", name: "v1", owner: "pv-a", previous: "pv-a", retained: true, namespace: "team-a",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t0, Retained: true, ClaimNamespace: "team-a"},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", true)
			}},
		{desc: "take over clears the previous owner's claim namespace", name: "v1", owner: "pv-b", previous: "pv-a",
			wantRecord: &record{Owner: "pv-b", OwnedSince: t1},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", true, managerapi.ReclaimRetain, "team-a")
			}},
		{desc: "take over with the new owner's claim namespace", name: "v1", owner: "pv-b", previous: "pv-a", policy: managerapi.ReclaimDelete, namespace: "team-a",
			wantRecord: &record{Owner: "pv-b", OwnedSince: t1, ReclaimPolicy: managerapi.ReclaimDelete, ClaimNamespace: "team-a"},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", true, managerapi.ReclaimRetain, "team-a")
			}},
		{desc: "adopt with a claim namespace", name: "v1", owner: "pv-a", previous: "", namespace: "team-a",
			wantRecord: &record{Owner: "pv-a", OwnedSince: t1, ClaimNamespace: "team-a"},
			setup:      func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "invalid claim namespace", name: "v1", owner: "pv-a", previous: "pv-a", namespace: "team a", wantReason: managerapi.ReasonBadRequest,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecordNamespace(t, "v1", "pv-a", true, "", "team-a")
			}},
		{desc: "take over a retained directory", name: "v1", owner: "pv-b", previous: "pv-a",
			wantRecord: &record{Owner: "pv-b", OwnedSince: t1},
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", true)
			}},
		{desc: "adopting an owned directory", name: "v1", owner: "pv-b", previous: "",
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a",
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", true)
			}},
		{desc: "wrong previous owner", name: "v1", owner: "pv-b", previous: "pv-c",
			wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a",
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			}},
		{desc: "missing directory", name: "v1", owner: "pv-a", previous: "", wantReason: managerapi.ReasonNotFound},
		{desc: "missing pool directory", name: "v1", owner: "pv-a", previous: "", wantReason: managerapi.ReasonPoolNotFound,
			setup: func(t *testing.T, e *testEnv) {
				if err := os.Remove(e.pool); err != nil {
					t.Fatal(err)
				}
			}},
		{desc: "record without directory", name: "v1", owner: "pv-a", previous: "pv-a", wantReason: managerapi.ReasonNotFound,
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-a", false) }},
		{desc: "file with the name", name: "v1", owner: "pv-a", previous: "", wantReason: managerapi.ReasonConflict,
			setup: func(t *testing.T, e *testEnv) { filetest.Write(t, filepath.Join(e.pool, "v1"), "x") }},
		{desc: "invalid owner", name: "v1", owner: "", previous: "", wantReason: managerapi.ReasonBadRequest,
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "invalid previous owner", name: "v1", owner: "pv-a", previous: "../x", wantReason: managerapi.ReasonBadRequest,
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "invalid name", name: "..", owner: "pv-a", previous: "", wantReason: managerapi.ReasonBadRequest},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, e, before := setUp(t, tc.setup)
			recordFile := filepath.Join(e.pool, OwnersDir, tc.name)
			recordBefore, _ := os.ReadFile(recordFile)
			req := managerapi.SetOwnerRequest{Owner: tc.owner, Previous: tc.previous, Retained: tc.retained, ReclaimPolicy: tc.policy, ClaimNamespace: tc.namespace}
			v, err := e.store.SetOwner(ctx, "default", tc.name, req, "")
			checkErr(t, "SetOwner", err, tc.wantReason, tc.wantOwner)
			if err != nil {
				if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
					t.Errorf("failed SetOwner changed the filesystem: %v", d)
				}
				return
			}
			if v.Owner != tc.wantRecord.Owner || v.OwnedSince == nil || !v.OwnedSince.Equal(tc.wantRecord.OwnedSince) || v.Retained != tc.wantRecord.Retained ||
				v.ReclaimPolicy != tc.wantRecord.ReclaimPolicy || v.ClaimNamespace != tc.wantRecord.ClaimNamespace {
				t.Errorf("volume = %+v, want owner record %+v", v, tc.wantRecord)
			}
			checkRecord(t, e, tc.name, tc.wantRecord)
			if recordAfter, err := os.ReadFile(recordFile); tc.wantSameFile && (err != nil || string(recordAfter) != string(recordBefore)) {
				t.Errorf("record rewritten: %q (%v), was %q", recordAfter, err, recordBefore)
			}
			if data, err := os.ReadFile(filepath.Join(e.pool, tc.name, "data")); err != nil || string(data) != "data of "+tc.name {
				t.Errorf("volume data changed: %q %v", data, err)
			}
		})
	}
}

// TestOwnerScenarios plays sequences of calls from different
// PersistentVolumes on one directory name.
func TestOwnerScenarios(t *testing.T) {
	type step struct {
		op              string // create, set or delete
		owner, previous string
		retained        bool
		ifEmpty         bool
		wantReason      managerapi.Reason
		wantOwner       string
	}
	for _, tc := range []struct {
		desc  string
		setup func(t *testing.T, e *testEnv)
		steps []step
		// wantData says whether v1/data survives; wantRecord is the final
		// record.
		wantData   bool
		wantRecord *record
	}{
		{desc: "two PVs ask for the same directory",
			steps: []step{
				{op: "create", owner: "pv-a"},
				{op: "create", owner: "pv-b", wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a"},
				{op: "delete", owner: "pv-b", wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a"},
				{op: "set", owner: "pv-b", previous: "", wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a"},
			},
			wantData: true, wantRecord: &record{Owner: "pv-a", OwnedSince: t1}},
		{desc: "adoption of a directory made before owner records",
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") },
			steps: []step{
				{op: "create", owner: "pv-a", wantReason: managerapi.ReasonOwnerConflict, wantOwner: ""},
				{op: "delete", owner: "pv-a", wantReason: managerapi.ReasonOwnerConflict, wantOwner: ""},
				{op: "set", owner: "pv-a", previous: ""},
				{op: "create", owner: "pv-a"},
				{op: "delete", owner: "pv-a", ifEmpty: true, wantReason: managerapi.ReasonNotEmpty},
				{op: "delete", owner: "pv-a"},
				{op: "delete", owner: "pv-a"},
			}},
		{desc: "takeover of a retained directory",
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				e.writeRecord(t, "v1", "pv-a", false)
			},
			steps: []step{
				{op: "set", owner: "pv-a", previous: "pv-a", retained: true},
				{op: "create", owner: "pv-b", wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a"},
				{op: "set", owner: "pv-b", previous: "pv-x", wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-a"},
				{op: "set", owner: "pv-b", previous: "pv-a"},
				{op: "create", owner: "pv-b"},
				{op: "delete", owner: "pv-a", wantReason: managerapi.ReasonOwnerConflict, wantOwner: "pv-b"},
			},
			wantData: true, wantRecord: &record{Owner: "pv-b", OwnedSince: t1}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			for i, s := range tc.steps {
				var err error
				switch s.op {
				case "create":
					_, _, err = e.store.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: s.owner}, 0o755, "")
					if err == nil {
						filetest.Write(t, filepath.Join(e.pool, "v1", "data"), "data of v1")
					}
				case "set":
					_, err = e.store.SetOwner(ctx, "default", "v1", managerapi.SetOwnerRequest{Owner: s.owner, Previous: s.previous, Retained: s.retained}, "")
				case "delete":
					_, err = e.store.DeleteVolume(ctx, "default", "v1", s.owner, s.ifEmpty, "")
				}
				checkErr(t, s.op, err, s.wantReason, s.wantOwner)
				if t.Failed() {
					t.Fatalf("step %d (%+v) failed", i, s)
				}
			}
			_, err := os.Stat(filepath.Join(e.pool, "v1", "data"))
			if (err == nil) != tc.wantData {
				t.Errorf("data survives: %v, want %v", err == nil, tc.wantData)
			}
			checkRecord(t, e, "v1", tc.wantRecord)
		})
	}
}

func TestRecordFormat(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	name := strings.Repeat("a", managerapi.MaxVolumeNameLength)
	if _, _, err := e.store.CreateVolume(ctx, "default", name, managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: managerapi.ReclaimDelete, ClaimNamespace: "team-a"}, 0o755, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetOwner(ctx, "default", name, managerapi.SetOwnerRequest{Owner: "pv-a", Previous: "pv-a", Retained: true}, ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(e.pool, ".hostpath", "owners", name))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"owner": "pv-a", "ownedSince": "2025-01-02T04:04:05Z", "retained": true, "reclaimPolicy": "Delete", "claimNamespace": "team-a"}
	if !maps.Equal(got, want) {
		t.Errorf("record = %s, want %v", data, want)
	}
	for _, d := range []string{MetadataDir, OwnersDir} {
		if fi, err := os.Lstat(filepath.Join(e.pool, d)); err != nil || fi.Mode() != fs.ModeDir|0o700 {
			t.Errorf("%s: %v %v, want a directory with mode 0700", d, fi.Mode(), err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(e.pool, OwnersDir))
	if err != nil || len(entries) != 1 || entries[0].Name() != name {
		t.Errorf("owners directory holds %v (%v), want only the record", entries, err)
	}
}

func TestListAndGetVolumes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	mustMkdir(t, filepath.Join(e.pool, "b"))
	mustMkdir(t, filepath.Join(e.pool, "a"))
	mustMkdir(t, filepath.Join(e.pool, ".hidden"))
	filetest.Write(t, filepath.Join(e.pool, "file"), "x")
	mustSymlink(t, filepath.Join(e.base, "sibling"), filepath.Join(e.pool, "link"))
	e.writeRecordNamespace(t, "a", "pv-a", true, managerapi.ReclaimRetain, "team-a")
	mustMkdir(t, filepath.Join(e.pool, "c"))
	e.writeRecord(t, "c", "pv-c", true)       // a record of an older version: no policy, no namespace
	e.writeRecord(t, "orphan", "pv-o", false) // a record without directory

	l, err := e.store.ListVolumes(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range l.Items {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, ","); got != "a,b,c" {
		t.Fatalf("ListVolumes = %s, want a,b,c", got)
	}
	if a := l.Items[0]; a.Owner != "pv-a" || !a.Retained || a.OwnedSince == nil || !a.OwnedSince.Equal(t0) || a.ReclaimPolicy != managerapi.ReclaimRetain ||
		a.ClaimNamespace != "team-a" {
		t.Errorf("ListVolumes item a = %+v, want owner pv-a, retained, policy Retain, namespace team-a, since %v", a, t0)
	}
	if b := l.Items[1]; b.Owner != "" || b.OwnedSince != nil || b.Retained || b.ReclaimPolicy != "" || b.ClaimNamespace != "" {
		t.Errorf("ListVolumes item b = %+v, want no owner", b)
	}
	if c := l.Items[2]; c.Owner != "pv-c" || !c.Retained || c.ReclaimPolicy != "" || c.ClaimNamespace != "" {
		t.Errorf("ListVolumes item c = %+v, want owner pv-c, retained, no policy, no namespace", c)
	}
	_, err = e.store.ListVolumes(ctx, "nope")
	checkErr(t, "ListVolumes(unknown pool)", err, managerapi.ReasonPoolNotFound, "")

	for _, tc := range []struct {
		name       string
		wantReason managerapi.Reason
		wantOwner  string
	}{
		{"a", "", "pv-a"},
		{"b", "", ""},
		{"c", "", "pv-c"},
		{"missing", managerapi.ReasonNotFound, ""},
		{"orphan", managerapi.ReasonNotFound, ""},
		{"file", managerapi.ReasonConflict, ""},
		{"link", managerapi.ReasonConflict, ""},
		{"../pool", managerapi.ReasonBadRequest, ""},
		{MetadataDir, managerapi.ReasonBadRequest, ""},
	} {
		v, err := e.store.GetVolume(ctx, "default", tc.name)
		checkErr(t, "GetVolume("+tc.name+")", err, tc.wantReason, "")
		if err == nil && (v.Path != filepath.Join(e.pool, tc.name) || v.Owner != tc.wantOwner) {
			t.Errorf("GetVolume(%q) = %+v, want owner %q", tc.name, v, tc.wantOwner)
		}
		if err == nil && tc.name == "a" && (v.ReclaimPolicy != managerapi.ReclaimRetain || v.ClaimNamespace != "team-a") {
			t.Errorf("GetVolume(a) = %+v, want reclaim policy Retain and claim namespace team-a", v)
		}
	}

	filetest.Write(t, filepath.Join(e.pool, OwnersDir, "b"), "{not json")
	if _, err := e.store.ListVolumes(ctx, "default"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("ListVolumes with a corrupt record: error = %v", err)
	}

	os.RemoveAll(e.pool)
	_, err = e.store.ListVolumes(ctx, "default")
	checkErr(t, "ListVolumes(missing pool directory)", err, managerapi.ReasonPoolNotFound, "")
}

func TestPreparePoolAndHost(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	os.RemoveAll(e.pool)

	h, err := e.store.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.NodeName != "node-a" || h.BootID != "boot-1" || h.MachineID != "machine-1" || h.HostID == "" || h.HostID != e.identity.HostID() {
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
	_, err = e.store.PreparePool(ctx, "other")
	checkErr(t, "PreparePool(unknown)", err, managerapi.ReasonPoolNotFound, "")

	os.RemoveAll(e.pool)
	filetest.Write(t, e.pool, "not a directory")
	_, err = e.store.PreparePool(ctx, "default")
	checkErr(t, "PreparePool over a file", err, managerapi.ReasonConflict, "")

	os.Remove(filepath.Join(e.base, "boot_id"))
	if _, err := e.store.Host(ctx); err == nil {
		t.Error("Host without a boot ID succeeded")
	}
}

// TestHostReadOnlyPool checks that GET /v1/host says readOnly for a pool
// whose filesystem statfs reports read-only, and only then: statfsOf is
// replaced, as a read-only mount needs privileges a unit test lacks.
func TestHostReadOnlyPool(t *testing.T) {
	tests := []struct {
		name     string
		readOnly bool
	}{
		{name: "read-write"},
		{name: "read-only", readOnly: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			saved := statfsOf
			t.Cleanup(func() { statfsOf = saved })
			statfsOf = func(*os.File) (fsStats, error) {
				return fsStats{CapacityBytes: 1 << 30, FreeBytes: 1 << 29, ReadOnly: tc.readOnly}, nil
			}
			h, err := e.store.Host(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Pools) != 1 || h.Pools[0].ReadOnly != tc.readOnly || h.Pools[0].Error != "" {
				t.Errorf("Host pools = %+v, want one without an error, readOnly %v", h.Pools, tc.readOnly)
			}
			body, err := json.Marshal(h.Pools[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(body), `"readOnly":true`); got != tc.readOnly {
				t.Errorf("pool JSON %s: readOnly present %v, want %v", body, got, tc.readOnly)
			}
		})
	}
}

func TestConcurrentCreateDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 100 {
		wg.Go(func() {
			if _, _, err := e.store.CreateVolume(ctx, "default", "v", managerapi.CreateVolumeRequest{Owner: "pv-a"}, 0o755, ""); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			if _, err := e.store.DeleteVolume(ctx, "default", "v", "pv-a", false, ""); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call failed: %v", err)
	}
	// Whatever the order, the directory and its record come and go together.
	_, err := os.Stat(filepath.Join(e.pool, "v"))
	if rec := e.record(t, "v"); (err == nil) != (rec != nil) {
		t.Errorf("directory exists: %v, record: %+v", err == nil, rec)
	}
}

func TestConcurrentOwners(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	owners := []string{"pv-a", "pv-b", "pv-c", "pv-d", "pv-e", "pv-f", "pv-g", "pv-h"}
	results := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Go(func() {
			_, _, results[i] = e.store.CreateVolume(ctx, "default", "v", managerapi.CreateVolumeRequest{Owner: o}, 0o755, "")
		})
	}
	wg.Wait()
	rec := e.record(t, "v")
	if rec == nil {
		t.Fatal("no record")
	}
	winners := 0
	for i, err := range results {
		if err == nil {
			winners++
			if owners[i] != rec.Owner {
				t.Errorf("%s succeeded but the record names %s", owners[i], rec.Owner)
			}
			continue
		}
		checkErr(t, "CreateVolume as "+owners[i], err, managerapi.ReasonOwnerConflict, rec.Owner)
	}
	if winners != 1 {
		t.Errorf("%d owners got the directory, want 1", winners)
	}
}

// writeSizedRecord writes the owner record of a volume of size bytes by
// hand, dated t0.
func (e *testEnv) writeSizedRecord(t testing.TB, name, owner string, size int64) {
	t.Helper()
	e.writeRecordFields(t, name, map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "sizeBytes": size})
}
