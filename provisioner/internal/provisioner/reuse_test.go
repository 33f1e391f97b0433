package provisioner

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/app/cachetrim"
	"hostpath.dev/provisioner/internal/responsibility"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// foreignStub is what the informers keep of pv once it is another
// provisioner's, or made by hand: its provisioned-by annotation is
// removed, then pv goes through the informers' transform, which must make
// a stub of it.
func foreignStub(pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv = pv.DeepCopy()
	if testNames.Has(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]) {
		delete(pv.Annotations, storagehelpers.AnnDynamicallyProvisioned)
	}
	if !responsibility.ForeignVolume(pv, testNames) {
		panic("foreignStub: " + pv.Name + " is not foreign")
	}
	obj, _ := cachetrim.New(testNames)(pv)
	return obj.(*v1.PersistentVolume)
}

// ownerRecord is an owner record of the fake manager: the owner ("" for a
// directory without one), the claim namespace it names, and whether it is
// marked retained.
type ownerRecord struct {
	owner, namespace string
	retained         bool
}

// The claim of every case is ns/data; "ns" is its namespace.
func TestProvisionReuse(t *testing.T) {
	retain := class("retain", storagev1.VolumeBindingImmediate, nil)
	tests := []struct {
		name        string
		dir         string                 // the annotation's value
		existing    map[string]ownerRecord // directories of pool default and their owner records
		volumes     []any                  // PVs in the cache (and on the API server)
		apiOnly     []*v1.PersistentVolume
		apiErr      error // answer of the API server to PV gets
		setOwnerErr error
		wantState   controller.ProvisioningState
		wantErr     string
		// hidden must not be in the error: what a claim of another
		// namespace must not learn.
		hidden        []string
		wantSetOwners string
		wantCreate    bool
	}{
		{
			name: "retained in the claim's namespace", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			wantState: controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-old->" + testPVName, wantCreate: true,
		},
		{
			name: "retained in another namespace is refused", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "team-a", true}},
			volumes:   []any{volume("pvc-released", selfNode, "default", "keep", "old")},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a" from namespace "ns": it does not exist, or its owner record does not name this namespace`,
			hidden:    []string{"team-a", "pvc-released", "pvc-old"},
		},
		{
			name: "no namespace recorded (an older version's record) is refused", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "", true}},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a" from namespace "ns": it does not exist, or its owner record does not name this namespace`,
		},
		{
			name: "directory without owner record is refused", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"", "", false}},
			wantState: controller.ProvisioningFinished, wantErr: `cannot reuse directory "keep" in pool "default" on node "node-a" from namespace "ns": it does not exist, or its owner record does not name this namespace`,
		},
		{
			name: "handed over to the claim's namespace by an administrator", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-of-team-a", "ns", true}},
			wantState: controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-of-team-a->" + testPVName, wantCreate: true,
		},
		{
			// The manager made it for another claim of the namespace, whose
			// PV is not saved yet: its owner PV does not exist yet.
			name: "a fresh directory of another claim is refused", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-fresh", "ns", false}},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": its owner record, of PersistentVolume "pvc-fresh", is not marked retained`,
		},
		{
			name: "a live directory of the namespace names the PVs that use it", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-live", "ns", false}},
			volumes:   []any{volume("pvc-live", selfNode, "default", "keep", "live")},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": the PersistentVolumes "pvc-live" use it`,
		},
		{
			name: "a fresh directory of another namespace reads as missing", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-fresh", "team-a", false}},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a" from namespace "ns": it does not exist, or its owner record does not name this namespace`,
			hidden:    []string{"team-a", "pvc-fresh", "not marked retained"},
		},
		{
			name: "handed over by an earlier attempt", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {testPVName, "ns", false}},
			wantState: controller.ProvisioningFinished, wantCreate: true,
		},
		{
			name: "owner volume still in the cache", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			volumes:   []any{volume("pvc-old", otherNode, "default", "elsewhere", "old")},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": it belongs to PersistentVolume "pvc-old", which still exists`,
		},
		{
			name: "owner volume on the API server, not yet in the cache", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			apiOnly:   []*v1.PersistentVolume{labelled(volume("pvc-old", selfNode, "default", "keep", "old"))},
			wantState: controller.ProvisioningFinished, wantErr: `PersistentVolume "pvc-old", which still exists`,
		},
		{
			// A PV made by hand carries no watch label: no cache holds
			// it, and the API server is asked for it.
			name: "unlabelled volume naming the directory, on the API server only", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			apiOnly:   []*v1.PersistentVolume{volume("pvc-old", selfNode, "default", "keep", "old")},
			wantState: controller.ProvisioningFinished, wantErr: `the PersistentVolumes "pvc-old" use it`,
		},
		{
			name: "API server unavailable is retried", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			apiErr:    errors.New("connection refused"),
			wantState: controller.ProvisioningInBackground, wantErr: "will retry",
		},
		{
			name: "another volume names the directory", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			volumes:   []any{volume("pvc-released", selfNode, "default", "keep", "old")},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": the PersistentVolumes "pvc-released" use it`,
		},
		{
			// The informers keep a PV made by hand as a stub (package
			// cachetrim), with the annotations that name its directory.
			name: "a volume made by hand names the directory (a stub in the cache)", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			volumes:   []any{foreignStub(volume("by-hand", selfNode, "default", "keep", "old"))},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": the PersistentVolumes "by-hand" use it`,
		},
		{
			name: "the owner is another provisioner's volume that still exists (a stub in the cache)", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pv-theirs", "ns", true}},
			volumes:   []any{foreignStub(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-theirs", Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: "example.com/other"}}})},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": it belongs to PersistentVolume "pv-theirs", which still exists`,
		},
		{
			name: "same directory name on another node does not count", dir: "keep",
			existing:  map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			volumes:   []any{volume("pvc-b", otherNode, "default", "keep", "b")},
			wantState: controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-old->" + testPVName, wantCreate: true,
		},
		{
			name: "directory that does not exist", dir: "nothing",
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "nothing" in pool "default" on node "node-a" from namespace "ns": it does not exist, or its owner record does not name this namespace`,
		},
		{
			name: "name outside the pool", dir: "../etc",
			wantState: controller.ProvisioningFinished, wantErr: "claim annotation hostpath.dev/reuse-directory: volume name \"../etc\" is invalid",
		},
		{
			name: "another volume took it first", dir: "keep",
			existing:    map[string]ownerRecord{"keep": {"pvc-old", "ns", true}},
			setOwnerErr: managertest.OwnerConflict("pvc-fast"),
			wantState:   controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-old->" + testPVName,
			wantErr: `belongs to PersistentVolume "pvc-fast"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, responsibilitytest.Instances{}, append(testNodes(), tc.volumes...)...)
			for dir, r := range tc.existing {
				f.manager.AddVolume(directory("default", dir, r.owner, r.namespace))
				f.manager.UpdateVolume("default", dir, func(v *managerapi.Volume) { v.Retained = r.retained })
			}
			fail(f.managers, selfNode, tc.setOwnerErr, managertest.SetOwner)
			for _, pv := range tc.apiOnly {
				if err := f.kube.Tracker().Add(pv); err != nil {
					t.Fatal(err)
				}
			}
			if tc.apiErr != nil {
				f.kube.PrependReactor("get", "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.apiErr
				})
			}
			c := claim("retain", hostpathv1.AnnotationProvisionOnNode+"="+selfNode, hostpathv1.AnnotationReuseDirectory+"="+tc.dir)
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: retain, PVName: testPVName, PVC: c})
			if state != tc.wantState {
				t.Errorf("state = %s, want %s", state, tc.wantState)
			}
			checkErr(t, err, false, tc.wantErr)
			for _, h := range tc.hidden {
				if err != nil && strings.Contains(err.Error(), h) {
					t.Errorf("err = %v, names %q", err, h)
				}
			}
			if got := strings.Join(callsOf(f.manager, managertest.SetOwner), ", "); got != tc.wantSetOwners {
				t.Errorf("manager owner changes = %q, want %q", got, tc.wantSetOwners)
			}
			if !tc.wantCreate {
				if len(callsOf(f.manager, managertest.CreateVolume)) != 0 || pv != nil {
					t.Errorf("creates = %q, pv = %v; want none", callsOf(f.manager, managertest.CreateVolume), pv)
				}
				if r, ok := tc.existing[tc.dir]; ok && tc.wantSetOwners == "" {
					if owner, _ := ownerOf(f.manager, "default", tc.dir); owner != r.owner || namespaceOf(f.manager, "default", tc.dir) != r.namespace {
						t.Errorf("owner record = %q in %q, want it unchanged: %q in %q", owner, namespaceOf(f.manager, "default", tc.dir), r.owner, r.namespace)
					}
				}
				return
			}
			if got := namespaceOf(f.manager, "default", tc.dir); got != "ns" {
				t.Errorf("owner record names namespace %q, want the claim's %q", got, "ns")
			}
			if got, want := strings.Join(callsOf(f.manager, managertest.CreateVolume), ", "), "default/"+tc.dir+" 0777 1Gi by "+testPVName; got != want {
				t.Errorf("manager creates = %q, want %q", got, want)
			}
			if want := wantPV(retain, claim("retain"), tc.dir); !equality.Semantic.DeepEqual(pv, want) {
				t.Errorf("pv =\n%#v\nwant\n%#v", pv, want)
			}
		})
	}
}

// TestReuseRefusalsAlike checks that a claim cannot tell a directory that
// does not exist from one it may not reuse because of its namespace: the
// refusals are the same, word for word.
func TestReuseRefusalsAlike(t *testing.T) {
	retain := class("retain", storagev1.VolumeBindingImmediate, nil)
	tests := []struct {
		name     string
		existing *ownerRecord // the record of directory "keep"; nil: no directory
	}{
		{name: "no directory"},
		{name: "retained, of another namespace", existing: &ownerRecord{"pvc-old", "team-a", true}},
		{name: "in use, of another namespace", existing: &ownerRecord{"pvc-live", "team-a", false}},
		{name: "no namespace recorded", existing: &ownerRecord{"pvc-old", "", true}},
		{name: "no owner record", existing: &ownerRecord{}},
	}
	var first string
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, responsibilitytest.Instances{}, testNodes()...)
			if r := tc.existing; r != nil {
				f.manager.AddVolume(directory("default", "keep", r.owner, r.namespace))
				f.manager.UpdateVolume("default", "keep", func(v *managerapi.Volume) { v.Retained = r.retained })
			}
			c := claim("retain", hostpathv1.AnnotationProvisionOnNode+"="+selfNode, hostpathv1.AnnotationReuseDirectory+"=keep")
			_, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: retain, PVName: testPVName, PVC: c})
			if err == nil || state != controller.ProvisioningFinished {
				t.Fatalf("Provision = %s, %v; want Finished and an error", state, err)
			}
			if i == 0 {
				first = err.Error()
			} else if err.Error() != first {
				t.Errorf("err =\n%v\nwant the answer for no directory:\n%s", err, first)
			}
			if len(callsOf(f.manager, managertest.SetOwner)) != 0 || len(callsOf(f.manager, managertest.CreateVolume)) != 0 {
				t.Errorf("owner changes %q, creates %q; want none", callsOf(f.manager, managertest.SetOwner), callsOf(f.manager, managertest.CreateVolume))
			}
		})
	}
}
