package disk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/manager/internal/clone"
)

// cloneReq asks for volume clone-of-src of owner pv-b as a copy of src
// (owner pv-a) in namespace ns.
func cloneReq(src string, bytes int64) managerapi.CloneVolumeRequest {
	return managerapi.CloneVolumeRequest{
		CreateVolumeRequest: managerapi.CreateVolumeRequest{Owner: "pv-b", ClaimNamespace: "ns", RequiredBytes: bytes, ReclaimPolicy: managerapi.ReclaimDelete},
		SourcePool:          "default", SourceName: src, SourceOwner: "pv-a",
	}
}

// waitClone calls CloneVolume until it answers the volume, and returns
// the last answer and whether that call said created.
func waitClone(ctx context.Context, t *testing.T, s *Store, name string, req managerapi.CloneVolumeRequest) (*managerapi.Clone, bool) {
	t.Helper()
	return waitCloneAs(ctx, t, s, name, req, "")
}

// waitCloneAs is waitClone for a caller bound to node remote ("": this
// node's).
func waitCloneAs(ctx context.Context, t *testing.T, s *Store, name string, req managerapi.CloneVolumeRequest, remote string) (*managerapi.Clone, bool) {
	t.Helper()
	var cl *managerapi.Clone
	var created bool
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		cl, created, err = s.CloneVolume(ctx, "default", name, req, 0o750, remote)
		return err == nil && cl.Volume != nil, err
	})
	if err != nil {
		t.Fatalf("clone %s: %v", name, err)
	}
	return cl, created
}

// TestCloneVolume: a clone is made in a staging directory and appears
// whole under its name, with an owner record naming its source and
// method; the first call that sees it done says created, later ones
// answer the volume.
func TestCloneVolume(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	if _, _, err := e.store.CreateVolume(ctx, "default", "src", managerapi.CreateVolumeRequest{Owner: "pv-a", ClaimNamespace: "ns", RequiredBytes: 1 << 20}, 0o700, ""); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(e.pool, "src", "sub"))
	filetest.Write(t, filepath.Join(e.pool, "src", "sub", "f"), "content")
	mustSymlink(t, "/", filepath.Join(e.pool, "src", "root"))

	cl, created := waitClone(ctx, t, e.store, "copy", cloneReq("src", 1<<20))
	if !created || cl.State != managerapi.CloneDone || cl.Source != "default/src" || cl.Volume.Owner != "pv-b" || cl.Volume.Mode != "0750" {
		t.Errorf("clone = %+v (volume %+v), created %t", cl, cl.Volume, created)
	}
	if cl.Method != managerapi.CloneMethodCopy && cl.Method != managerapi.CloneMethodReflink {
		t.Errorf("method = %q, want copy or reflink", cl.Method)
	}
	if b, err := os.ReadFile(filepath.Join(e.pool, "copy", "sub", "f")); err != nil || string(b) != "content" {
		t.Errorf("clone's file = %q, %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(e.pool, "copy", "root")); err != nil || target != "/" {
		t.Errorf("clone's link = %q, %v; want a link to /", target, err)
	}
	rec := e.record(t, "copy")
	if rec == nil || rec.Owner != "pv-b" || rec.CloneOf != "default/src" || rec.CloneMethod != cl.Method || rec.SizeBytes != 1<<20 || rec.ClaimNamespace != "ns" {
		t.Errorf("record = %+v", rec)
	}
	again, created, err := e.store.CloneVolume(ctx, "default", "copy", cloneReq("src", 1<<20), 0o750, "")
	if err != nil || created || again.Volume == nil || again.Volume.CloneMethod != cl.Method {
		t.Errorf("clone again = %+v, %t, %v; want the volume, not created", again, created, err)
	}
	checkNoStaging(t, e.pool)
}

// checkNoStaging checks that the pool holds no staging directory.
func checkNoStaging(t *testing.T, pool string) {
	t.Helper()
	entries, err := os.ReadDir(pool)
	if err != nil {
		t.Fatal(err)
	}
	var staging []string
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), stagingPrefix) {
			staging = append(staging, en.Name())
		}
	}
	if len(staging) != 0 {
		t.Errorf("staging directories left: %v", staging)
	}
}

// createSource creates the volume "src" of pv-a (claim namespace ns), the
// source of the clones.
func (e *testEnv) createSource(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, _, err := e.store.CreateVolume(ctx, "default", "src", managerapi.CreateVolumeRequest{Owner: "pv-a", ClaimNamespace: "ns"}, 0o700, ""); err != nil {
		t.Fatal(err)
	}
}

// TestCloneRefusals: a source that is missing, of another owner or claim
// namespace, retained or larger than the clone is refused, and so is a
// caller bound to another node for a node-mode volume; nothing is left.
func TestCloneRefusals(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(*managerapi.CloneVolumeRequest)
		remote string
		setup  func(t *testing.T, e *testEnv)
		want   managerapi.Reason
		owner  string
	}{
		{desc: "missing source", mutate: func(r *managerapi.CloneVolumeRequest) { r.SourceName = "nothing" }, want: managerapi.ReasonNotFound},
		{desc: "source of another owner", mutate: func(r *managerapi.CloneVolumeRequest) { r.SourceOwner = "pv-z" }, want: managerapi.ReasonOwnerConflict, owner: "pv-a"},
		{desc: "source of another namespace", mutate: func(r *managerapi.CloneVolumeRequest) { r.ClaimNamespace = "other" }, want: managerapi.ReasonForbidden},
		{desc: "source larger", mutate: func(r *managerapi.CloneVolumeRequest) { r.RequiredBytes = 1 }, want: managerapi.ReasonConflict},
		{desc: "remote caller, node mode", remote: "node-b", mutate: func(r *managerapi.CloneVolumeRequest) { r.Multihost, r.ClaimName = true, "claim-b" }, want: managerapi.ReasonForbidden},
		{desc: "remote caller asks for node mode", remote: "node-b", want: managerapi.ReasonForbidden},
		{desc: "retained source", setup: func(t *testing.T, e *testEnv) {
			e.writeRecordFields(t, "src", map[string]any{"owner": "pv-a", "ownedSince": t0.Format(time.RFC3339), "retained": true, "claimNamespace": "ns", "sizeBytes": 1 << 20})
		}, want: managerapi.ReasonConflict},
		{desc: "target of another owner", setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "copy", "pv-z", false) }, want: managerapi.ReasonOwnerConflict, owner: "pv-z"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			if _, _, err := e.store.CreateVolume(ctx, "default", "src", managerapi.CreateVolumeRequest{Owner: "pv-a", ClaimNamespace: "ns", RequiredBytes: 1 << 20}, 0o700, ""); err != nil {
				t.Fatal(err)
			}
			// The claim of pv-b, for remote callers.
			e.owners.addClaim(claim("ns", "claim-b", "uid-b"))
			e.owners.addClass("shared", "multihost")
			e.owners.addPV(volume("pv-b", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "copy", "ns/claim-b"))
			if tc.setup != nil {
				tc.setup(t, e)
			}
			req := cloneReq("src", 1<<20)
			if tc.mutate != nil {
				tc.mutate(&req)
			}
			_, _, err := e.store.CloneVolume(ctx, "default", "copy", req, 0o750, tc.remote)
			checkErr(t, "clone", err, tc.want, tc.owner)
			if _, err := os.Lstat(filepath.Join(e.pool, "copy")); err == nil {
				t.Error("the refused clone's directory exists")
			}
			if rec := e.record(t, "copy"); rec != nil && rec.Owner == "pv-b" {
				t.Errorf("the refused clone has a record: %+v", rec)
			}
			checkNoStaging(t, e.pool)
		})
	}
}

// TestCloneBusy: while a clone copies, its source cannot be deleted and
// its target cannot be written by other calls; calls on the clone answer
// its progress, and another owner's clone into the same name is refused,
// and so is one of the same owner that asks for another record.
func TestCloneBusy(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	e.createSource(ctx, t)
	hold, started := make(chan struct{}), make(chan struct{})
	e.store.clones.beforeCopy = func() {
		close(started)
		<-hold
	}
	cl, created, err := e.store.CloneVolume(ctx, "default", "copy", cloneReq("src", 0), 0o750, "")
	if err != nil || created || cl.Volume != nil {
		t.Fatalf("start = %+v, %t, %v", cl, created, err)
	}
	<-started
	if cl, _, err := e.store.CloneVolume(ctx, "default", "copy", cloneReq("src", 0), 0o750, ""); err != nil || cl.State != managerapi.CloneCopying {
		t.Errorf("while copying = %+v, %v; want state Copying", cl, err)
	}
	_, err = e.store.DeleteVolume(ctx, "default", "src", "pv-a", false, "")
	checkErr(t, "delete the source", err, managerapi.ReasonConflict, "")
	_, err = e.store.DeleteVolume(ctx, "default", "copy", "pv-b", false, "")
	checkErr(t, "delete the target", err, managerapi.ReasonConflict, "")
	_, _, err = e.store.CreateVolume(ctx, "default", "copy", managerapi.CreateVolumeRequest{Owner: "pv-b"}, 0o700, "")
	checkErr(t, "create the target", err, managerapi.ReasonConflict, "")
	differs := cloneReq("src", 0)
	differs.ReclaimPolicy = managerapi.ReclaimRetain
	_, _, err = e.store.CloneVolume(ctx, "default", "copy", differs, 0o750, "")
	checkErr(t, "the same owner's clone that asks for something else", err, managerapi.ReasonConflict, "")
	other := cloneReq("src", 0)
	other.Owner = "pv-c"
	_, _, err = e.store.CloneVolume(ctx, "default", "copy", other, 0o750, "")
	checkErr(t, "another owner's clone", err, managerapi.ReasonOwnerConflict, "pv-b")
	if _, err := os.Lstat(filepath.Join(e.pool, "copy")); err == nil {
		t.Error("the clone's directory exists before its copy is done")
	}
	close(hold)
	waitClone(ctx, t, e.store, "copy", cloneReq("src", 0))
	if _, err := e.store.DeleteVolume(ctx, "default", "src", "pv-a", false, ""); err != nil {
		t.Errorf("delete the source after the clone: %v", err)
	}
}

// TestCloneAfterRestart: a manager that died mid-copy left a staging
// directory and the clone's owner record; a new Store removes the staging
// directory and copies again from the start.
func TestCloneAfterRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	e.createSource(ctx, t)
	filetest.Write(t, filepath.Join(e.pool, "src", "f"), "whole")
	// What a crash mid-copy leaves.
	e.writeRecordFields(t, "copy", map[string]any{"owner": "pv-b", "ownedSince": t0.Format(time.RFC3339), "claimNamespace": "ns", "reclaimPolicy": "Delete", "cloneOf": "default/src"})
	half := filepath.Join(e.pool, stagingName("copy"))
	mustMkdir(t, half)
	filetest.Write(t, filepath.Join(half, "f"), "wh")
	filetest.Write(t, filepath.Join(half, "junk"), "left")

	restarted, err := New(Config{NodeName: "node-a", Pools: map[string]string{"default": e.pool}, Identity: e.identity, MountInfoFile: e.mountInfo})
	if err != nil {
		t.Fatal(err)
	}
	cl, created := waitClone(ctx, t, restarted, "copy", cloneReq("src", 0))
	if !created || cl.Volume.Owner != "pv-b" {
		t.Errorf("clone after restart = %+v, created %t", cl, created)
	}
	if b, err := os.ReadFile(filepath.Join(e.pool, "copy", "f")); err != nil || string(b) != "whole" {
		t.Errorf("clone's f = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(e.pool, "copy", "junk")); err == nil {
		t.Error("the clone holds a file of the interrupted copy")
	}
	checkNoStaging(t, e.pool)
}

// TestCloneDatedWhenPlaced: a clone's owner record is dated when the copy
// is put in place, not when it started, so that an orphan sweeper's grace
// period runs from when the directory appears, however long the copy
// took.
func TestCloneDatedWhenPlaced(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	e.createSource(ctx, t)
	clock := e.store.clock.(*testingclock.FakePassiveClock)
	placed := t1.Add(3 * time.Hour)
	e.store.clones.beforeCopy = func() {
		if rec := e.record(t, "copy"); rec == nil || !rec.OwnedSince.Equal(t1) {
			t.Errorf("record while copying = %+v, want it dated %v", rec, t1)
		}
		clock.SetTime(placed) // the copy takes three hours
	}
	cl, _ := waitClone(ctx, t, e.store, "copy", cloneReq("src", 0))
	if rec := e.record(t, "copy"); rec == nil || !rec.OwnedSince.Equal(placed) {
		t.Errorf("record = %+v, want it dated %v, when the copy was put in place", rec, placed)
	}
	if cl.Volume.OwnedSince == nil || !cl.Volume.OwnedSince.Equal(placed) {
		t.Errorf("volume's ownedSince = %v, want %v", cl.Volume.OwnedSince, placed)
	}
}

// TestCloneLimits: a source beyond the limits of a clone by copy is
// refused with a Conflict that says which limit, once the copy found out,
// leaving no record, staging directory or volume; the Store goes on, and
// clones within the limits work.
func TestCloneLimits(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		limits clone.Limits
		want   string
	}{
		{"too deep", clone.Limits{MaxDepth: 2}, `cannot be cloned by copy: directories nest too deep at "a/b/c": more than 2 levels`},
		{"too many entries", clone.Limits{MaxEntries: 2}, `cannot be cloned by copy: too many entries at "a/b/c": more than 2`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			e.createSource(ctx, t)
			mustMkdir(t, filepath.Join(e.pool, "src", "a", "b", "c"))
			e.store.clones.limits = tc.limits
			var err error
			werr := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				var cl *managerapi.Clone
				cl, _, err = e.store.CloneVolume(ctx, "default", "copy", cloneReq("src", 0), 0o750, "")
				if err == nil && cl.Volume != nil {
					t.Fatalf("the clone was made: %+v", cl)
				}
				return err != nil, nil
			})
			if werr != nil {
				t.Fatal(werr)
			}
			checkErr(t, "clone", err, managerapi.ReasonConflict, "")
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "docs/clones.md") {
				t.Errorf("error %q does not say %q and where the limits are documented", msg, tc.want)
			}
			t.Logf("clone: %v", err)
			if _, err := os.Lstat(filepath.Join(e.pool, "copy")); err == nil {
				t.Error("the refused clone's directory exists")
			}
			if rec := e.record(t, "copy"); rec != nil {
				t.Errorf("the refused clone has a record: %+v", rec)
			}
			checkNoStaging(t, e.pool)
			e.store.clones.limits = clone.Limits{}
			if cl, _ := waitClone(ctx, t, e.store, "copy", cloneReq("src", 0)); cl.Volume.Owner != "pv-b" {
				t.Errorf("clone within the limits = %+v", cl.Volume)
			}
		})
	}
}

// TestRemoteClone: a caller bound to another node clones a multihost
// source into a multihost volume only as it creates one: for a claim it
// names (else BadRequest, before anything is read), that exists, is of a
// multihost class and is the owner's (else Conflict), checked once, when
// the copy starts (the calls that follow it ask the API server nothing);
// and, as for anyone, a clone that meets an owner record of the same
// owner that says something else is Conflict, the record untouched (a
// record planted for the clone's PV is never adopted).
func TestRemoteClone(t *testing.T) {
	const owner = "pvc-b1"
	planted := func(t *testing.T, e *testEnv) {
		e.writeRecordFields(t, "copy", map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "multihost": true, "claimNamespace": "ns", "reclaimPolicy": "Retain", "sizeBytes": 1})
	}
	for _, tc := range []struct {
		desc   string
		mutate func(*managerapi.CloneVolumeRequest)
		claim  *corev1.PersistentVolumeClaim
		setup  func(t *testing.T, e *testEnv)
		remote string
		// wantReason is the error's ("" for a clone made); wantInMsg a
		// part of its message; wantLookup the lookups made.
		wantReason managerapi.Reason
		wantInMsg  string
		wantLookup string
	}{
		{desc: "for the claim's PV", claim: claim("ns", "claim-b", "b1"), remote: "node-b", wantLookup: "claim ns/claim-b, class shared"},
		{desc: "naming no claim", mutate: func(r *managerapi.CloneVolumeRequest) { r.ClaimName = "" }, remote: "node-b",
			wantReason: managerapi.ReasonBadRequest, wantInMsg: `may clone into volume "copy" in pool "default" on node "node-a" only for a claim it names: claimNamespace and claimName are required`},
		{desc: "for a claim that does not exist", remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `cannot clone into volume "copy" in pool "default" on node "node-a" for PersistentVolume "pvc-b1": claim ns/claim-b does not exist`,
			wantLookup: "claim ns/claim-b"},
		{desc: "for a node-mode claim", claim: withClass(claim("ns", "claim-b", "b1"), "standard"), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `claim ns/claim-b is of StorageClass "standard", whose parameter mode is "node", not "multihost"`,
			wantLookup: "claim ns/claim-b, class standard"},
		{desc: "for another claim's PV", claim: claim("ns", "claim-b", "other"), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `its PersistentVolume would be "pvc-other"`, wantLookup: "claim ns/claim-b, pv pvc-b1 cached"},
		{desc: "over a different record of the same owner", claim: claim("ns", "claim-b", "b1"), setup: planted, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `it says reclaim policy "Retain", not "Delete", size 1, less than the 1Mi requested`},
		{desc: "this node's caller over a different record of the same owner", setup: planted,
			wantReason: managerapi.ReasonConflict, wantInMsg: "a create never rewrites an owner record"},
		{desc: "this node's caller names no claim", mutate: func(r *managerapi.CloneVolumeRequest) { r.ClaimName = "" }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			src := managerapi.CreateVolumeRequest{Owner: "pv-a", ClaimNamespace: "ns", RequiredBytes: 1 << 20, Multihost: true}
			if _, _, err := e.store.CreateVolume(ctx, "default", "src", src, 0o700, ""); err != nil {
				t.Fatal(err)
			}
			filetest.Write(t, filepath.Join(e.pool, "src", "f"), "content")
			e.owners.addClass("shared", "multihost")
			e.owners.addClass("standard", "node")
			if tc.claim != nil {
				e.owners.addClaim(tc.claim)
			}
			if tc.setup != nil {
				tc.setup(t, e)
			}
			req := cloneReq("src", 1<<20)
			req.Owner, req.Multihost, req.ClaimName = owner, true, "claim-b"
			if tc.mutate != nil {
				tc.mutate(&req)
			}
			if tc.wantReason == "" {
				cl, _ := waitCloneAs(ctx, t, e.store, "copy", req, tc.remote)
				if cl.Volume.Owner != owner || !cl.Volume.Multihost {
					t.Errorf("clone = %+v, want a multihost volume of %s", cl.Volume, owner)
				}
				if b, err := os.ReadFile(filepath.Join(e.pool, "copy", "f")); err != nil || string(b) != "content" {
					t.Errorf("clone's f = %q, %v", b, err)
				}
				if got := strings.Join(e.owners.lookups, ", "); got != tc.wantLookup {
					t.Errorf("lookups %q, want %q (once, when the copy started)", got, tc.wantLookup)
				}
				return
			}
			before := snapshot(t, e.base)
			_, _, err := e.store.CloneVolume(ctx, "default", "copy", req, 0o750, tc.remote)
			checkErr(t, "clone", err, tc.wantReason, "")
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("message %q does not say %q", err, tc.wantInMsg)
			}
			if got := strings.Join(e.owners.lookups, ", "); got != tc.wantLookup {
				t.Errorf("lookups %q, want %q", got, tc.wantLookup)
			}
			if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
				t.Errorf("a refused clone changed the disk: %v", d)
			}
			checkNoStaging(t, e.pool)
		})
	}
}
