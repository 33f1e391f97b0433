package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review/reviewtest"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/auth/authtest"
	"hostpath.dev/manager/internal/kube"
)

// ownersOf is the kube.Owners of cs's PVs and claims, on clk (nil: the
// real clock).
func ownersOf(cs *fake.Clientset, clk *testingclock.FakeClock) *kube.Owners {
	opts := kube.OwnersOptions{}
	if clk != nil {
		opts.Clock = clk
	}
	return kube.NewOwners(cs.CoreV1().PersistentVolumes(), func(ns string) kube.ClaimGetter { return cs.CoreV1().PersistentVolumeClaims(ns) }, cs.StorageV1().StorageClasses(), opts)
}

// addObjects adds PVs, claims and classes to cs.
func addObjects(t *testing.T, cs *fake.Clientset, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cs.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

// claimOf is a claim of StorageClass class with a UID.
func claimOf(namespace, name, uid, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}
}

// classOf is a StorageClass of the provisioner of mode.
func classOf(name, mode string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "hostpath.dev/provisioner", Parameters: map[string]string{"mode": mode}}
}

// pvOf is a PV of directory dir of pool default, in phase, with reclaim
// policy Delete, bound to claim default/claim.
func pvOf(name, dir, claim string, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"hostpath.dev/pool": "default", "hostpath.dev/directory": dir}},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: claim}},
		Status: corev1.PersistentVolumeStatus{Phase: phase},
	}
}

// TestRemoteAttacks replays on node-a's manager (a real disk.Store, the
// real auth.Reviewer, kube.Owners over a fake API server) the attacks of
// issue 40, made with the tokens of pods on node-b, and shows each one
// refused with the directory untouched:
//
//	(a) node-b's provisioner creates a multihost record, claim namespace
//	    "evil" and 1 byte, for the PV a pending node-mode claim will get
//	    (pvc-a1, claim default/data of class standard): 409 (or 400
//	    without a claim name), in the claim's namespace too (its class
//	    is not multihost); a record planted so anyway is never adopted by
//	    the claim's own create (409);
//	(b) node-b's provisioner deletes node-a's copy of a Bound multihost
//	    volume: 409 naming the PV and its phase; once the PV is Released
//	    with reclaim policy Delete (read fresh: a Bound answer is
//	    remembered a few seconds only), the same delete is 204;
//	(c) node-b's host definer makes "ghost" the owner of node-a's copy of
//	    a Bound multihost volume: 403;
//	(d) node-b's host definer adopts, for the pending node-mode claim's
//	    PV, a directory without an owner record: 400 without a claim
//	    name, 409 with one (its class is not multihost), no record
//	    written;
//	(e) node-b's provisioner grows node-a's copy of the Bound multihost
//	    volume beyond what its PV and claim say: 409 naming the PV.
func TestRemoteAttacks(t *testing.T) {
	d := newDiskDirs(t)
	api := reviewtest.NewCallers()
	cs := api.Clientset()
	clk := testingclock.NewFakeClock(time.Now())
	addObjects(t, cs, classOf("standard", "node"), classOf("shared", "multihost"),
		claimOf("default", "data", "a1", "standard"), claimOf("default", "shared", "b1", "shared"), pvOf("pvc-b1", "dir-b", "shared", corev1.VolumeBound))
	e := &env{srv: d.newServerOwners(t, "", authtest.NewReviewer(cs, auth.DefaultOptions()), ownersOf(cs, clk))}
	dirA, dirB, dirD := filepath.Join(d.def, "dir-a"), filepath.Join(d.def, "dir-b"), filepath.Join(d.def, "dir-d")
	recordD := filepath.Join(d.def, ".hostpath", "owners", "dir-d")
	plant := func(t *testing.T) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(d.def, ".hostpath", "owners"), 0o700); err != nil {
			t.Fatal(err)
		}
		rec := `{"owner":"pvc-a1","ownedSince":"2025-01-02T03:04:05Z","multihost":true,"claimNamespace":"evil","sizeBytes":1}`
		if err := os.WriteFile(filepath.Join(d.def, ".hostpath", "owners", "dir-a"), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d.run(t, e, []diskStep{
		{desc: "(a) remote create for a pending claim's PV, no claim named", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/dir-a",
			body:     `{"owner":"pvc-a1","multihost":true,"claimNamespace":"evil","requiredBytes":1}`,
			wantCode: 400, wantReason: managerapi.ReasonBadRequest, wantInMsg: "claimNamespace and claimName are required", check: absent(dirA)},
		{desc: "(a) remote create for a pending claim's PV, in another namespace", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/dir-a",
			body:     `{"owner":"pvc-a1","multihost":true,"claimNamespace":"evil","claimName":"data","requiredBytes":1}`,
			wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: "claim evil/data does not exist", check: absent(dirA)},
		{desc: "(a) remote create for a pending node-mode claim's PV, in its namespace", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/dir-a",
			body:     `{"owner":"pvc-a1","multihost":true,"claimNamespace":"default","claimName":"data","requiredBytes":1}`,
			wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: `claim default/data is of StorageClass "standard", whose parameter mode is "node", not "multihost"`, check: absent(dirA)},
		{desc: "(a) a planted record is not adopted by the claim's own create", token: "prov-a", method: "PUT", path: "/v1/pools/default/volumes/dir-a",
			before:   plant,
			body:     `{"owner":"pvc-a1","claimNamespace":"default","claimName":"data","reclaimPolicy":"Delete","requiredBytes":1048576}`,
			wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: `it says multihost true, not false, claim namespace "evil", not "default", reclaim policy "", not "Delete", size 1, less than the 1Mi requested`,
			check: absent(dirA)},
		{desc: "(b) node-a's copy of a Bound multihost volume", token: "prov-a", method: "PUT", path: "/v1/pools/default/volumes/dir-b",
			body: `{"owner":"pvc-b1","multihost":true,"claimNamespace":"default","reclaimPolicy":"Delete","requiredBytes":1048576}`, wantCode: 201},
		{desc: "(b) remote delete of the Bound volume's copy", token: "prov-b", method: "DELETE", path: "/v1/pools/default/volumes/dir-b?owner=pvc-b1",
			wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: `its PersistentVolume "pvc-b1" is Bound (reclaim policy Delete)`, check: exists(dirB)},
		{desc: "(c) remote re-own of the Bound volume's copy to ghost", token: "definer-b", method: "PUT", path: "/v1/pools/default/volumes/dir-b/owner",
			body:     `{"owner":"ghost","previous":"pvc-b1","multihost":true}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: `cannot hand volume "dir-b" in pool "default" on node "node-a" over from PersistentVolume "pvc-b1" to "ghost"`,
			check: exists(dirB)},
		{desc: "(c) remote change of the claim namespace", token: "definer-b", method: "PUT", path: "/v1/pools/default/volumes/dir-b/owner",
			body:     `{"owner":"pvc-b1","previous":"pvc-b1","claimNamespace":"evil","multihost":true}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: `cannot change the claim namespace`},
		{desc: "(d) remote adoption for a pending claim's PV, no claim named", token: "definer-b", method: "PUT", path: "/v1/pools/default/volumes/dir-d/owner",
			before: func(t *testing.T) {
				if err := os.MkdirAll(dirD, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			body:     `{"owner":"pvc-a1","previous":"","claimNamespace":"default","multihost":true}`,
			wantCode: 400, wantReason: managerapi.ReasonBadRequest, wantInMsg: "only for a claim it names: claimNamespace and claimName are required", check: absent(recordD)},
		{desc: "(d) remote adoption for a pending node-mode claim's PV, naming it", token: "definer-b", method: "PUT", path: "/v1/pools/default/volumes/dir-d/owner",
			body:     `{"owner":"pvc-a1","previous":"","claimNamespace":"default","claimName":"data","multihost":true}`,
			wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: `cannot adopt volume "dir-d" in pool "default" on node "node-a" for PersistentVolume "pvc-a1": claim default/data is of StorageClass "standard"`,
			check: absent(recordD)},
		{desc: "(e) remote growth of the Bound volume's copy beyond its PV", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/dir-b/size",
			body:     `{"owner":"pvc-b1","sizeBytes":1073741824}`,
			wantCode: 409, wantReason: managerapi.ReasonConflict, wantInMsg: `cannot grow volume "dir-b" in pool "default" on node "node-a" from 1Mi to 1Gi: its PersistentVolume "pvc-b1" has no capacity`},
		{desc: "(b) the Released volume's copy, once the remembered Bound answer expired", token: "prov-b", method: "DELETE", path: "/v1/pools/default/volumes/dir-b?owner=pvc-b1",
			before: func(t *testing.T) {
				_, ctx := ktesting.NewTestContext(t)
				if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pvOf("pvc-b1", "dir-b", "shared", corev1.VolumeReleased), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				clk.Step(kube.DefaultBoundTTL + time.Second)
			},
			wantCode: 204, check: absent(dirB)},
	})
}
