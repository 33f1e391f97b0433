package disk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/filetest"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/managerapi"
)

// TestRemoteCaller: a caller bound to another node (remote "node-b"; the
// Store is node-a's) changes only multihost volumes: every write on a
// node-mode record, a node-mode create and the adoption of a directory
// without a record in node mode are Forbidden, name both nodes and change
// nothing on disk; on a multihost record each write works (the creates
// and adoptions name claim ns/claim-a, bound to pv-a; the resize's pv-a
// has capacity 1Mi; the delete's pv-a is gone). This node's callers
// (remote "") keep every write, and may mark a record multihost.
func TestRemoteCaller(t *testing.T) {
	const remote = "node-b"
	nodeMode := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeRecord(t, "v1", "pv-a", false)
	}
	multihost := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeRecordFields(t, "v1", map[string]any{"owner": "pv-a", "ownedSince": t0.Format(time.RFC3339), "multihost": true, "claimNamespace": "ns"})
	}
	unrecorded := func(t *testing.T, e *testEnv) { e.volume(t, "v1") }
	for _, tc := range []struct {
		desc   string
		setup  func(t *testing.T, e *testEnv)
		op     string // create, create-multihost, set, set-multihost, size, delete
		remote string
		// wantReason is the error's ("" for none); wantMultihost the
		// record's mode afterwards.
		wantReason    managerapi.Reason
		wantMultihost bool
	}{
		{desc: "remote create in node mode", op: "create", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote create of a multihost volume", op: "create-multihost", remote: remote, wantMultihost: true},
		{desc: "remote multihost create over a node-mode record", setup: nodeMode, op: "create-multihost", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote create over a multihost record", setup: multihost, op: "create-multihost", remote: remote, wantMultihost: true},
		{desc: "remote delete of a node-mode volume", setup: nodeMode, op: "delete", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote resize of a node-mode volume", setup: nodeMode, op: "size", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote re-own of a node-mode volume", setup: nodeMode, op: "set", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote marking of a node-mode volume", setup: nodeMode, op: "set-multihost", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote adoption in node mode", setup: unrecorded, op: "set", remote: remote, wantReason: managerapi.ReasonForbidden},
		{desc: "remote adoption of a multihost directory", setup: unrecorded, op: "set-multihost", remote: remote, wantMultihost: true},
		{desc: "remote delete of a multihost volume", setup: multihost, op: "delete", remote: remote},
		{desc: "remote resize of a multihost volume", setup: multihost, op: "size", remote: remote, wantMultihost: true},
		{desc: "remote re-own of a multihost volume keeps its mode", setup: multihost, op: "set", remote: remote, wantMultihost: true},
		{desc: "remote delete where nothing is", op: "delete", remote: remote},
		{desc: "local delete of a node-mode volume", setup: nodeMode, op: "delete"},
		{desc: "local resize of a node-mode volume", setup: nodeMode, op: "size"},
		{desc: "local create in node mode", op: "create"},
		{desc: "local marking of a node-mode volume", setup: nodeMode, op: "set-multihost", wantMultihost: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, e, before := setUp(t, tc.setup)
			var err error
			switch tc.op {
			case "create", "create-multihost":
				e.owners.addClaim(claim("ns", "claim-a", "uid-a"))
				e.owners.addClass("shared", "multihost")
				e.owners.addPV(volume("pv-a", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "v1", "ns/claim-a"))
				req := managerapi.CreateVolumeRequest{Owner: "pv-a", Multihost: tc.op == "create-multihost", ClaimNamespace: "ns", ClaimName: "claim-a"}
				_, _, err = e.store.CreateVolume(ctx, "default", "v1", req, 0o755, tc.remote)
			case "set", "set-multihost":
				e.owners.addClaim(claim("ns", "claim-a", "uid-a"))
				e.owners.addClass("shared", "multihost")
				e.owners.addPV(volume("pv-a", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "v1", "ns/claim-a"))
				previous := "pv-a"
				if e.record(t, "v1") == nil {
					previous = ""
				}
				req := managerapi.SetOwnerRequest{Owner: "pv-a", Previous: previous, Multihost: tc.op == "set-multihost", ClaimNamespace: "ns", ClaimName: "claim-a"}
				_, err = e.store.SetOwner(ctx, "default", "v1", req, tc.remote)
			case "size":
				e.owners.addPV(withCapacity(volume("pv-a", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "v1", "ns/claim-a"), "1Mi"))
				_, err = e.store.SetSize(ctx, "default", "v1", "pv-a", 1<<20, tc.remote)
			case "delete":
				_, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, tc.remote)
			}
			checkErr(t, tc.op, err, tc.wantReason, "")
			if tc.wantReason != "" {
				for _, want := range []string{`"node-a"`, `"node-b"`, `"v1"`} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("message %q does not name %s", err, want)
					}
				}
				if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
					t.Errorf("a refused call changed the disk: %v", d)
				}
				return
			}
			if rec := e.record(t, "v1"); rec != nil && rec.Multihost != tc.wantMultihost {
				t.Errorf("record says multihost %v, want %v", rec.Multihost, tc.wantMultihost)
			}
		})
	}
}

// TestMultihostListed: GET of a volume and the pool's listing say which
// volumes are multihost, from their records.
func TestMultihostListed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	if _, _, err := e.store.CreateVolume(ctx, "default", "m", managerapi.CreateVolumeRequest{Owner: "pv-m", Multihost: true}, 0o755, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.CreateVolume(ctx, "default", "n", managerapi.CreateVolumeRequest{Owner: "pv-n"}, 0o755, ""); err != nil {
		t.Fatal(err)
	}
	list, err := e.store.ListVolumes(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, v := range list.Items {
		got[v.Name] = v.Multihost
	}
	if len(got) != 2 || !got["m"] || got["n"] {
		t.Errorf("listed multihost = %v, want m only", got)
	}
	if v, err := e.store.GetVolume(ctx, "default", "m"); err != nil || !v.Multihost {
		t.Errorf("GetVolume(m) = %+v, %v; want multihost", v, err)
	}
}

// writeMultihostRecord writes the owner record of a multihost volume by
// hand, dated t0.
func (e *testEnv) writeMultihostRecord(t testing.TB, name, owner string) {
	t.Helper()
	e.writeRecordFields(t, name, map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "multihost": true})
}

// fakeOwners is the API server as Owners sees it: the PVs and claims a
// test adds, and an error for every lookup when err is set. It records
// the PV lookups, with whether they asked for a fresh answer.
type fakeOwners struct {
	mu      sync.Mutex
	pvs     map[string]*corev1.PersistentVolume
	claims  map[string]*corev1.PersistentVolumeClaim
	classes map[string]*storagev1.StorageClass
	err     error
	// lookups are "pv NAME fresh|cached", "claim NS/NAME" and "class
	// NAME".
	lookups []string
}

var _ Owners = &fakeOwners{}

// addPV adds pv, replacing one of its name.
func (f *fakeOwners) addPV(pv *corev1.PersistentVolume) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pvs == nil {
		f.pvs = map[string]*corev1.PersistentVolume{}
	}
	f.pvs[pv.Name] = pv
}

// addClaim adds claim, replacing one of its name.
func (f *fakeOwners) addClaim(claim *corev1.PersistentVolumeClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims == nil {
		f.claims = map[string]*corev1.PersistentVolumeClaim{}
	}
	f.claims[claim.Namespace+"/"+claim.Name] = claim
}

// addClass adds a StorageClass of mode, replacing one of its name.
func (f *fakeOwners) addClass(name, mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.classes == nil {
		f.classes = map[string]*storagev1.StorageClass{}
	}
	f.classes[name] = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "hostpath.dev/provisioner", Parameters: map[string]string{hostpathv1.ParamMode: mode}}
}

// StorageClass implements Owners.
func (f *fakeOwners) StorageClass(_ context.Context, name string) (*storagev1.StorageClass, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, "class "+name)
	if f.err != nil {
		return nil, f.err
	}
	return f.classes[name], nil
}

// PersistentVolume implements Owners.
func (f *fakeOwners) PersistentVolume(_ context.Context, name string, fresh bool) (*corev1.PersistentVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	how := "cached"
	if fresh {
		how = "fresh"
	}
	f.lookups = append(f.lookups, "pv "+name+" "+how)
	if f.err != nil {
		return nil, f.err
	}
	return f.pvs[name], nil
}

// Claim implements Owners.
func (f *fakeOwners) Claim(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, "claim "+namespace+"/"+name)
	if f.err != nil {
		return nil, f.err
	}
	return f.claims[namespace+"/"+name], nil
}

// volume is a PV of the provisioner: phase, reclaim policy, the pool and
// directory its annotations name, and claimRef "ns/name" ("" for none).
func volume(name string, phase corev1.PersistentVolumePhase, policy corev1.PersistentVolumeReclaimPolicy, pool, dir, claimRef string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{hostpathv1.AnnotationPool: pool, hostpathv1.AnnotationDirectory: dir}},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy},
		Status:     corev1.PersistentVolumeStatus{Phase: phase},
	}
	if ns, n, ok := strings.Cut(claimRef, "/"); ok {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: n}
	}
	return pv
}

// withCapacity gives pv the storage capacity q.
func withCapacity(pv *corev1.PersistentVolume, q string) *corev1.PersistentVolume {
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	return pv
}

// deleting marks pv as being deleted.
func deleting(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	now := metav1.NewTime(t1)
	pv.DeletionTimestamp = &now
	return pv
}

// claim is a claim of StorageClass "shared" with a UID.
func claim(namespace, name, uid string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("shared")}}
}

// withClass is claim c of StorageClass class ("" for none).
func withClass(c *corev1.PersistentVolumeClaim, class string) *corev1.PersistentVolumeClaim {
	c.Spec.StorageClassName = &class
	return c
}

// TestRemoteDelete: a caller bound to another node deletes a multihost
// copy only when its PV (owner pvc-1) lets it go: gone (unless the
// record says retained or Retain), or naming this pool and directory
// with reclaim policy Delete and being deleted, Released or Failed.
// Anything else is Conflict naming the PV and its phase, with the
// directory and its record untouched (attack (b) of issue 40: node-1's
// token deleted node-2's copy of a Bound volume). This node's callers
// are not checked, and ask nothing of the API server.
func TestRemoteDelete(t *testing.T) {
	const owner = "pvc-1"
	del, retain := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	for _, tc := range []struct {
		desc   string
		pv     *corev1.PersistentVolume // nil: gone
		record map[string]any           // extra fields of the multihost record
		remote string
		err    error
		// wantReason is the error's ("" for success); wantInMsg parts of
		// its message.
		wantReason managerapi.Reason
		wantInMsg  []string
	}{
		{desc: "Bound PV (attack b)", pv: volume(owner, corev1.VolumeBound, del, "default", "v1", "ns/c"), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{`"pvc-1" is Bound (reclaim policy Delete)`, `"node-b"`, `"node-a"`}},
		{desc: "Released PV with reclaim policy Delete", pv: volume(owner, corev1.VolumeReleased, del, "default", "v1", "ns/c"), remote: "node-b"},
		{desc: "Failed PV with reclaim policy Delete", pv: volume(owner, corev1.VolumeFailed, del, "default", "v1", "ns/c"), remote: "node-b"},
		{desc: "PV being deleted with reclaim policy Delete", pv: deleting(volume(owner, corev1.VolumeBound, del, "default", "v1", "ns/c")), remote: "node-b"},
		{desc: "PV gone", remote: "node-b"},
		{desc: "Released PV with reclaim policy Retain", pv: volume(owner, corev1.VolumeReleased, retain, "default", "v1", "ns/c"), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{"Released (reclaim policy Retain)"}},
		{desc: "PV being deleted with reclaim policy Retain", pv: deleting(volume(owner, corev1.VolumeReleased, retain, "default", "v1", "ns/c")), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{"Released and being deleted (reclaim policy Retain)"}},
		{desc: "Available PV", pv: volume(owner, corev1.VolumeAvailable, del, "default", "v1", ""), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{"is Available"}},
		{desc: "Released PV of another directory", pv: volume(owner, corev1.VolumeReleased, del, "default", "v2", "ns/c"), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{`names directory "v2" of pool "default"`}},
		{desc: "Released PV of another pool", pv: volume(owner, corev1.VolumeReleased, del, "fast", "v1", "ns/c"), remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{`of pool "fast"`}},
		{desc: "PV gone, directory retained", record: map[string]any{"retained": true, "reclaimPolicy": "Retain"}, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: []string{"no longer exists, but the directory was retained"}},
		{desc: "the API server cannot be asked", err: errors.New("connection refused"), remote: "node-b",
			wantInMsg: []string{`check PersistentVolume "pvc-1"`, "connection refused"}},
		{desc: "this node's caller deletes a Bound volume's directory", pv: volume(owner, corev1.VolumeBound, del, "default", "v1", "ns/c")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			e.volume(t, "v1")
			filetest.Write(t, filepath.Join(e.pool, "v1", "data"), "data")
			fields := map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "multihost": true}
			for k, v := range tc.record {
				fields[k] = v
			}
			e.writeRecordFields(t, "v1", fields)
			if tc.pv != nil {
				e.owners.addPV(tc.pv)
			}
			e.owners.err = tc.err
			before := snapshot(t, e.base)
			deleted, err := e.store.DeleteVolume(ctx, "default", "v1", owner, false, tc.remote)
			if tc.wantReason == "" && tc.err == nil {
				if err != nil || !deleted {
					t.Fatalf("DeleteVolume = %v, %v; want deleted", deleted, err)
				}
				if _, err := os.Lstat(filepath.Join(e.pool, "v1")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the directory is still there: %v", err)
				}
				if tc.remote == "" && len(e.owners.lookups) > 0 {
					t.Errorf("a local delete asked the API server: %v", e.owners.lookups)
				}
				return
			}
			checkErrOrInternal(t, "DeleteVolume", err, tc.err != nil, tc.wantReason, "")
			for _, want := range tc.wantInMsg {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %s", err, want)
				}
			}
			if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
				t.Errorf("a refused delete changed the disk: %v", d)
			}
		})
	}
}

// TestRemoteDeleteLookup: the delete's PV lookup may be
// answered from memory (only a Bound PV is remembered, and that refuses);
// it is asked for the record's owner.
func TestRemoteDeleteLookup(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	e.volume(t, "v1")
	e.writeMultihostRecord(t, "v1", "pvc-1")
	if _, err := e.store.DeleteVolume(ctx, "default", "v1", "pvc-1", false, "node-b"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.owners.lookups, ", "); got != "pv pvc-1 cached" {
		t.Errorf("lookups %q, want the owner's PV, cached answer allowed", got)
	}
}

// TestRemoteCreateClaim: a caller bound to another node creates a
// multihost copy only for a claim it names that exists, is not being
// deleted and is the owner's (owner pvc-<UID>, or a PV bound to it);
// and whose StorageClass is of mode multihost (the claims here are of
// class "shared", of mode multihost, unless said otherwise); anything else
// changes nothing on disk (attack (a) of issue 40: node-1's token created
// a record, with another claim namespace and size 1, for the PV a pending
// node-mode claim was going to get).
func TestRemoteCreateClaim(t *testing.T) {
	const uid = "0b1c"
	for _, tc := range []struct {
		desc       string
		req        managerapi.CreateVolumeRequest
		claims     []*corev1.PersistentVolumeClaim
		pvs        []*corev1.PersistentVolume
		noOwners   bool
		remote     string
		wantReason managerapi.Reason
		wantInMsg  string
	}{
		{desc: "the claim's PV", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "data"},
			claims: []*corev1.PersistentVolumeClaim{claim("default", "data", uid)}},
		{desc: "a PV bound to the claim", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pv-static", ClaimNamespace: "default", ClaimName: "data"},
			claims: []*corev1.PersistentVolumeClaim{claim("default", "data", uid)},
			pvs:    []*corev1.PersistentVolume{volume("pv-static", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "v1", "default/data")}},
		{desc: "no claim named", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default"},
			wantReason: managerapi.ReasonBadRequest, wantInMsg: "claimNamespace and claimName are required"},
		{desc: "no claim namespace", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimName: "data"},
			wantReason: managerapi.ReasonBadRequest, wantInMsg: "claimNamespace and claimName are required"},
		{desc: "invalid claim name", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "Data_1"},
			wantReason: managerapi.ReasonBadRequest, wantInMsg: "claimName"},
		{desc: "the claim in another namespace (attack a)", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "evil", ClaimName: "data", RequiredBytes: 1},
			claims: []*corev1.PersistentVolumeClaim{claim("default", "data", uid)}, wantReason: managerapi.ReasonConflict, wantInMsg: "claim evil/data does not exist"},
		{desc: "a claim being deleted", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "data"},
			claims: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := claim("default", "data", uid)
				now := metav1.NewTime(t1)
				c.DeletionTimestamp = &now
				return c
			}()},
			wantReason: managerapi.ReasonConflict, wantInMsg: "is being deleted"},
		{desc: "another claim's PV", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-other", ClaimNamespace: "default", ClaimName: "data"},
			claims: []*corev1.PersistentVolumeClaim{claim("default", "data", uid)}, wantReason: managerapi.ReasonConflict, wantInMsg: `its PersistentVolume would be "pvc-0b1c"`},
		{desc: "a PV bound to another claim", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pv-static", ClaimNamespace: "default", ClaimName: "data"},
			claims:     []*corev1.PersistentVolumeClaim{claim("default", "data", uid)},
			pvs:        []*corev1.PersistentVolume{volume("pv-static", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "v1", "default/other")},
			wantReason: managerapi.ReasonConflict, wantInMsg: "is bound to claim default/other"},
		{desc: "a node-mode claim (attack a, in the right namespace)", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "data", RequiredBytes: 1},
			claims:     []*corev1.PersistentVolumeClaim{withClass(claim("default", "data", uid), "standard")},
			wantReason: managerapi.ReasonConflict, wantInMsg: `claim default/data is of StorageClass "standard", whose parameter mode is "node", not "multihost"`},
		{desc: "a claim of a class that is gone", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "data"},
			claims:     []*corev1.PersistentVolumeClaim{withClass(claim("default", "data", uid), "gone")},
			wantReason: managerapi.ReasonConflict, wantInMsg: `StorageClass "gone" of claim default/data does not exist`},
		{desc: "a claim of no class", remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "data"},
			claims:     []*corev1.PersistentVolumeClaim{withClass(claim("default", "data", uid), "")},
			wantReason: managerapi.ReasonConflict, wantInMsg: "names no StorageClass"},
		{desc: "no API client", noOwners: true, remote: "node-b", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default", ClaimName: "data"},
			wantReason: managerapi.ReasonForbidden, wantInMsg: "no API client"},
		{desc: "this node's caller names no claim", req: managerapi.CreateVolumeRequest{Owner: "pvc-" + uid, ClaimNamespace: "default"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			e.owners.addClass("shared", "multihost")
			e.owners.addClass("standard", "node")
			for _, c := range tc.claims {
				e.owners.addClaim(c)
			}
			for _, pv := range tc.pvs {
				e.owners.addPV(pv)
			}
			if tc.noOwners {
				e.store.owners = nil
			}
			tc.req.Multihost = tc.remote != ""
			before := snapshot(t, e.base)
			_, created, err := e.store.CreateVolume(ctx, "default", "v1", tc.req, 0o755, tc.remote)
			checkErr(t, "CreateVolume", err, tc.wantReason, "")
			if tc.wantReason == "" {
				if !created {
					t.Error("created = false, want true")
				}
				return
			}
			checkRefused(t, err, tc.wantInMsg, "create", before, snapshot(t, e.base))
		})
	}
}

// TestPlantedRecord: a record planted for a node-mode claim's PV (by
// hand here: multihost, claim namespace evil, size 1, as attack (a) of
// issue 40 left it) is never adopted by the claim's own create: Conflict
// saying what differs, the record untouched; a create that matches it
// (the retry of the create that made it) confirms it.
func TestPlantedRecord(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	e.volume(t, "v1")
	e.writeRecordFields(t, "v1", map[string]any{"owner": "pvc-1", "ownedSince": t0.Format(time.RFC3339), "multihost": true, "claimNamespace": "evil", "sizeBytes": 1})
	before := snapshot(t, e.base)
	req := managerapi.CreateVolumeRequest{Owner: "pvc-1", ClaimNamespace: "default", ReclaimPolicy: managerapi.ReclaimDelete, RequiredBytes: 1 << 30}
	_, _, err := e.store.CreateVolume(ctx, "default", "v1", req, 0o777, "")
	checkErr(t, "CreateVolume", err, managerapi.ReasonConflict, "")
	for _, want := range []string{"multihost true, not false", `claim namespace "evil", not "default"`, `reclaim policy "", not "Delete"`, "size 1, less than the 1Gi requested"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %s", err, want)
		}
	}
	if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
		t.Errorf("a refused create changed the disk: %v", d)
	}
	same := managerapi.CreateVolumeRequest{Owner: "pvc-1", ClaimNamespace: "evil", RequiredBytes: 1, Multihost: true}
	if _, created, err := e.store.CreateVolume(ctx, "default", "v1", same, 0o777, ""); err != nil || created {
		t.Errorf("CreateVolume of the same request = %v, %v; want the record confirmed", created, err)
	}
}

// TestRemoteSetOwner: a caller bound to another node adopts a directory
// without a record only for a claim it names (claimNamespace and
// claimName, else BadRequest) that exists, is of a multihost class and
// is the owner's (else Conflict, as for a create: the claims here are of
// class "shared", of mode multihost, unless said otherwise), or updates
// the record of the same owner; it never hands a record to another owner
// (attack (c) of issue 40: the host definer's token made "ghost" the
// owner of a Bound volume's copy) nor changes its claim namespace
// (Forbidden), and it records reclaim policy Delete only as the PV has
// it, and clears the retained mark only of a Bound PV's record, both read
// fresh (else Conflict).
func TestRemoteSetOwner(t *testing.T) {
	const owner = "pvc-1"
	bound := volume(owner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", "v1", "ns/c")
	boundRetain := volume(owner, corev1.VolumeBound, corev1.PersistentVolumeReclaimRetain, "default", "v1", "ns/c")
	released := volume(owner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete, "default", "v1", "ns/c")
	for _, tc := range []struct {
		desc       string
		record     map[string]any // nil: a directory without a record
		req        managerapi.SetOwnerRequest
		pv         *corev1.PersistentVolume
		claim      *corev1.PersistentVolumeClaim
		remote     string
		wantReason managerapi.Reason
		wantInMsg  string
		// wantLookup is the PV lookup made ("" for none).
		wantLookup string
	}{
		{desc: "re-own to ghost (attack c)", record: map[string]any{"claimNamespace": "ns"}, pv: bound, remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: "ghost", Previous: owner, Multihost: true},
			wantReason: managerapi.ReasonForbidden, wantInMsg: `from PersistentVolume "pvc-1" to "ghost"`},
		{desc: "re-own to ghost when the PV is gone", record: map[string]any{"claimNamespace": "ns"}, remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: "ghost", Previous: owner},
			wantReason: managerapi.ReasonForbidden, wantInMsg: "may only adopt a directory without an owner record"},
		{desc: "change of claim namespace", record: map[string]any{"claimNamespace": "ns"}, pv: bound, remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, Previous: owner, ClaimNamespace: "evil"},
			wantReason: managerapi.ReasonForbidden, wantInMsg: `from "ns" to "evil"`},
		{desc: "adoption", remote: "node-b", claim: claim("ns", "c", "1"),
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", ClaimName: "c", ReclaimPolicy: managerapi.ReclaimDelete, Multihost: true},
			wantLookup: "claim ns/c, class shared"},
		{desc: "adoption for a PV bound to the claim", remote: "node-b", claim: claim("ns", "c", "other-uid"), pv: bound,
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", ClaimName: "c", Multihost: true},
			wantLookup: "claim ns/c, pv pvc-1 cached, class shared"},
		{desc: "adoption naming no claim", remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", Multihost: true},
			wantReason: managerapi.ReasonBadRequest, wantInMsg: `may adopt volume "v1" in pool "default" on node "node-a" only for a claim it names: claimNamespace and claimName are required`},
		{desc: "adoption naming no claim namespace", remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimName: "c", Multihost: true},
			wantReason: managerapi.ReasonBadRequest, wantInMsg: "claimNamespace and claimName are required"},
		{desc: "adoption naming an invalid claim", remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", ClaimName: "C_1", Multihost: true},
			wantReason: managerapi.ReasonBadRequest, wantInMsg: `claimName "C_1" is not a PersistentVolumeClaim name`},
		{desc: "adoption for a claim that does not exist", remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "evil", ClaimName: "c", Multihost: true},
			wantReason: managerapi.ReasonConflict, wantInMsg: `cannot adopt volume "v1" in pool "default" on node "node-a" for PersistentVolume "pvc-1": claim evil/c does not exist`,
			wantLookup: "claim evil/c"},
		{desc: "adoption for a claim being deleted", remote: "node-b", claim: func() *corev1.PersistentVolumeClaim {
			c := claim("ns", "c", "1")
			now := metav1.NewTime(t1)
			c.DeletionTimestamp = &now
			return c
		}(),
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", ClaimName: "c", Multihost: true},
			wantReason: managerapi.ReasonConflict, wantInMsg: "claim ns/c is being deleted", wantLookup: "claim ns/c"},
		{desc: "adoption for a node-mode claim", remote: "node-b", claim: withClass(claim("ns", "c", "1"), "standard"),
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", ClaimName: "c", Multihost: true},
			wantReason: managerapi.ReasonConflict, wantInMsg: `claim ns/c is of StorageClass "standard", whose parameter mode is "node", not "multihost"`,
			wantLookup: "claim ns/c, class standard"},
		{desc: "adoption for another claim's PV", remote: "node-b", claim: claim("ns", "other", "2"), pv: bound,
			req:        managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns", ClaimName: "other", Multihost: true},
			wantReason: managerapi.ReasonConflict, wantInMsg: `PersistentVolume "pvc-1" is bound to claim ns/c`,
			wantLookup: "claim ns/other, pv pvc-1 cached"},
		{desc: "an update names no claim", record: map[string]any{"claimNamespace": "ns"}, remote: "node-b",
			req: managerapi.SetOwnerRequest{Owner: owner, Previous: owner, Multihost: true}},
		{desc: "this node's caller adopts naming no claim", req: managerapi.SetOwnerRequest{Owner: owner, ClaimNamespace: "ns"}},
		{desc: "retained as the PV is Released (reclaim fan-out)", record: map[string]any{"claimNamespace": "ns", "reclaimPolicy": "Retain"}, remote: "node-b",
			req: managerapi.SetOwnerRequest{Owner: owner, Previous: owner, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain}},
		{desc: "policy Delete recorded as the PV has it", record: map[string]any{"claimNamespace": "ns", "reclaimPolicy": "Retain"}, pv: bound, remote: "node-b",
			req: managerapi.SetOwnerRequest{Owner: owner, Previous: owner, ReclaimPolicy: managerapi.ReclaimDelete}, wantLookup: "pv pvc-1 fresh"},
		{desc: "policy Delete the PV does not have", record: map[string]any{"claimNamespace": "ns", "reclaimPolicy": "Retain"}, pv: boundRetain, remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, Previous: owner, ReclaimPolicy: managerapi.ReclaimDelete},
			wantReason: managerapi.ReasonConflict, wantInMsg: `"pvc-1" is Bound (reclaim policy Retain)`, wantLookup: "pv pvc-1 fresh"},
		{desc: "policy Delete when the PV is gone", record: map[string]any{"claimNamespace": "ns", "reclaimPolicy": "Retain", "retained": true}, remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, Previous: owner, ReclaimPolicy: managerapi.ReclaimDelete},
			wantReason: managerapi.ReasonConflict, wantInMsg: "no longer exists", wantLookup: "pv pvc-1 fresh"},
		{desc: "retained mark cleared for a Released PV", record: map[string]any{"claimNamespace": "ns", "reclaimPolicy": "Delete", "retained": true}, pv: released, remote: "node-b",
			req:        managerapi.SetOwnerRequest{Owner: owner, Previous: owner},
			wantReason: managerapi.ReasonConflict, wantInMsg: "only the record of a Bound PersistentVolume loses its retained mark", wantLookup: "pv pvc-1 fresh"},
		{desc: "retained mark cleared for a Bound PV", record: map[string]any{"claimNamespace": "ns", "reclaimPolicy": "Delete", "retained": true}, pv: bound, remote: "node-b",
			req: managerapi.SetOwnerRequest{Owner: owner, Previous: owner}, wantLookup: "pv pvc-1 fresh"},
		{desc: "this node's caller re-owns", record: map[string]any{"claimNamespace": "ns"}, pv: bound,
			req: managerapi.SetOwnerRequest{Owner: "pvc-2", Previous: owner, ClaimNamespace: "other"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			e.volume(t, "v1")
			if tc.record != nil {
				fields := map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "multihost": true}
				for k, v := range tc.record {
					fields[k] = v
				}
				e.writeRecordFields(t, "v1", fields)
			}
			if tc.pv != nil {
				e.owners.addPV(tc.pv)
			}
			if tc.claim != nil {
				e.owners.addClaim(tc.claim)
			}
			e.owners.addClass("shared", "multihost")
			e.owners.addClass("standard", "node")
			before := snapshot(t, e.base)
			_, err := e.store.SetOwner(ctx, "default", "v1", tc.req, tc.remote)
			checkErr(t, "SetOwner", err, tc.wantReason, "")
			if got := strings.Join(e.owners.lookups, ", "); got != tc.wantLookup {
				t.Errorf("lookups %q, want %q", got, tc.wantLookup)
			}
			if tc.wantReason == "" {
				return
			}
			checkRefused(t, err, tc.wantInMsg, "owner change", before, snapshot(t, e.base))
		})
	}
}

// TestRemoteGrow: a caller bound to another node grows a multihost copy
// (owner pvc-1, 1Mi, to 2Mi here) only as far as the owner PV, read fresh,
// says: it must exist and name this pool and directory, and its capacity
// must be at least the size; or, while it is expanded (the resizer grows
// every copy before the PV), the claim its claimRef names must be bound
// to it and request at least the size. Anything else is Conflict naming
// the PV, with the record untouched. A call that does not grow, and this
// node's callers, ask the API server nothing.
func TestRemoteGrow(t *testing.T) {
	const owner = "pvc-1"
	pv := func(capacity, dir, claimRef string) *corev1.PersistentVolume {
		p := volume(owner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete, "default", dir, claimRef)
		if capacity != "" {
			withCapacity(p, capacity)
		}
		return p
	}
	requesting := func(size, volumeName string) *corev1.PersistentVolumeClaim {
		c := claim("ns", "c", "uid-c")
		c.Spec.VolumeName = volumeName
		if size != "" {
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		}
		return c
	}
	for _, tc := range []struct {
		desc     string
		pv       *corev1.PersistentVolume
		claim    *corev1.PersistentVolumeClaim
		size     int64
		remote   string
		err      error
		noOwners bool
		// wantReason is the error's ("" for success); wantInMsg a part
		// of its message; wantLookup the lookups made.
		wantReason managerapi.Reason
		wantInMsg  string
		wantLookup string
	}{
		{desc: "the PV's capacity", pv: pv("2Mi", "v1", "ns/c"), size: 2 << 20, remote: "node-b", wantLookup: "pv pvc-1 fresh"},
		{desc: "less than the PV's capacity", pv: pv("4Mi", "v1", "ns/c"), size: 2 << 20, remote: "node-b", wantLookup: "pv pvc-1 fresh"},
		{desc: "the request of the PV's claim, while it is expanded", pv: pv("1Mi", "v1", "ns/c"), claim: requesting("2Mi", owner), size: 2 << 20, remote: "node-b",
			wantLookup: "pv pvc-1 fresh, claim ns/c"},
		{desc: "beyond the PV's capacity and its claim's request", pv: pv("1Mi", "v1", "ns/c"), claim: requesting("1Mi", owner), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantLookup: "pv pvc-1 fresh, claim ns/c",
			wantInMsg: `a caller bound to node "node-b" cannot grow volume "v1" in pool "default" on node "node-a" from 1Mi to 2Mi: its PersistentVolume "pvc-1" has capacity 1Mi, and its claim ns/c requests 1Mi`},
		{desc: "a claim that requests nothing", pv: pv("1Mi", "v1", "ns/c"), claim: requesting("", owner), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: "its claim ns/c requests no storage", wantLookup: "pv pvc-1 fresh, claim ns/c"},
		{desc: "a claim bound to another PV", pv: pv("1Mi", "v1", "ns/c"), claim: requesting("2Mi", "pvc-2"), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `claim ns/c (UID uid-c, volume "pvc-2") is not bound to it`, wantLookup: "pv pvc-1 fresh, claim ns/c"},
		{desc: "a claim that is gone", pv: pv("1Mi", "v1", "ns/c"), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: "its claim ns/c does not exist", wantLookup: "pv pvc-1 fresh, claim ns/c"},
		{desc: "a PV bound to no claim", pv: pv("1Mi", "v1", ""), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `its PersistentVolume "pvc-1" has capacity 1Mi and is bound to no claim`, wantLookup: "pv pvc-1 fresh"},
		{desc: "a PV without a capacity", pv: pv("", "v1", ""), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `its PersistentVolume "pvc-1" has no capacity`, wantLookup: "pv pvc-1 fresh"},
		{desc: "a PV that is gone", size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `its PersistentVolume "pvc-1" does not exist`, wantLookup: "pv pvc-1 fresh"},
		{desc: "a PV of another directory", pv: pv("4Mi", "v2", "ns/c"), size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonConflict, wantInMsg: `names directory "v2" of pool "default"`, wantLookup: "pv pvc-1 fresh"},
		{desc: "the API server cannot be asked", err: errors.New("connection refused"), size: 2 << 20, remote: "node-b",
			wantInMsg: "connection refused", wantLookup: "pv pvc-1 fresh"},
		{desc: "no API client", noOwners: true, size: 2 << 20, remote: "node-b",
			wantReason: managerapi.ReasonForbidden, wantInMsg: "no API client"},
		{desc: "the same size", size: 1 << 20, remote: "node-b"},
		{desc: "this node's caller grows beyond the PV", pv: pv("1Mi", "v1", "ns/c"), size: 2 << 20},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			e.volume(t, "v1")
			e.writeRecordFields(t, "v1", map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "multihost": true, "claimNamespace": "ns", "sizeBytes": 1 << 20})
			if tc.pv != nil {
				e.owners.addPV(tc.pv)
			}
			if tc.claim != nil {
				e.owners.addClaim(tc.claim)
			}
			e.owners.err = tc.err
			if tc.noOwners {
				e.store.owners = nil
			}
			before := snapshot(t, e.base)
			v, err := e.store.SetSize(ctx, "default", "v1", owner, tc.size, tc.remote)
			if got := strings.Join(e.owners.lookups, ", "); got != tc.wantLookup {
				t.Errorf("lookups %q, want %q", got, tc.wantLookup)
			}
			if tc.wantReason == "" && tc.err == nil {
				if err != nil {
					t.Fatalf("SetSize: %v", err)
				}
				if rec := e.record(t, "v1"); v.SizeBytes != tc.size || rec.SizeBytes != tc.size {
					t.Errorf("size %d, recorded %d; want %d", v.SizeBytes, rec.SizeBytes, tc.size)
				}
				return
			}
			checkErrOrInternal(t, "SetSize", err, tc.err != nil, tc.wantReason, "")
			checkRefused(t, err, tc.wantInMsg, "resize", before, snapshot(t, e.base))
		})
	}
}

// checkRefused fails the test unless err, the refusal of a call what
// ("delete", "create"…), says wantInMsg and the disk (after) is as it was
// (before).
func checkRefused(t *testing.T, err error, wantInMsg, what string, before, after map[string]string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), wantInMsg) {
		t.Errorf("message %q does not say %q", err, wantInMsg)
	}
	if d := diff(before, after); len(d) > 0 {
		t.Errorf("a refused %s changed the disk: %v", what, d)
	}
}
