package provisioner

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"hostpath.dev/provisioner/internal/annotations"
)

func TestProvisionReuse(t *testing.T) {
	retain := class("retain", storagev1.VolumeBindingImmediate, nil)
	tests := []struct {
		name          string
		dir           string            // the annotation's value
		existing      map[string]string // directories of pool default and their owners
		volumes       []any             // PVs in the cache (and on the API server)
		apiOnly       []*v1.PersistentVolume
		apiErr        error // answer of the API server to PV gets
		setOwnerErr   error
		wantState     controller.ProvisioningState
		wantErr       string
		wantSetOwners string
		wantCreate    bool
	}{
		{
			name: "retained directory of a deleted volume", dir: "keep",
			existing:  map[string]string{"keep": "pvc-old"},
			wantState: controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-old->" + testPVName, wantCreate: true,
		},
		{
			name: "directory without owner record that no volume names", dir: "keep",
			existing:  map[string]string{"keep": ""},
			wantState: controller.ProvisioningFinished, wantSetOwners: "default/keep ->" + testPVName, wantCreate: true,
		},
		{
			name: "handed over by an earlier attempt", dir: "keep",
			existing:  map[string]string{"keep": testPVName},
			wantState: controller.ProvisioningFinished, wantCreate: true,
		},
		{
			name: "owner volume still in the cache", dir: "keep",
			existing:  map[string]string{"keep": "pvc-old"},
			volumes:   []any{volume("pvc-old", otherNode, "default", "elsewhere", "old")},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": it belongs to PersistentVolume "pvc-old", which still exists`,
		},
		{
			name: "owner volume on the API server, not yet in the cache", dir: "keep",
			existing:  map[string]string{"keep": "pvc-old"},
			apiOnly:   []*v1.PersistentVolume{volume("pvc-old", selfNode, "default", "keep", "old")},
			wantState: controller.ProvisioningFinished, wantErr: `PersistentVolume "pvc-old", which still exists`,
		},
		{
			name: "API server unavailable is retried", dir: "keep",
			existing:  map[string]string{"keep": "pvc-old"},
			apiErr:    errors.New("connection refused"),
			wantState: controller.ProvisioningInBackground, wantErr: "will retry",
		},
		{
			name: "another volume names the directory", dir: "keep",
			existing:  map[string]string{"keep": "pvc-old"},
			volumes:   []any{volume("pvc-released", selfNode, "default", "keep", "old")},
			wantState: controller.ProvisioningFinished,
			wantErr:   `cannot reuse directory "keep" in pool "default" on node "node-a": the PersistentVolumes "pvc-released" use it`,
		},
		{
			name: "directory without owner record that a volume names", dir: "keep",
			existing:  map[string]string{"keep": ""},
			volumes:   []any{volume("pvc-legacy", selfNode, "default", "keep", "old")},
			wantState: controller.ProvisioningFinished, wantErr: `the PersistentVolumes "pvc-legacy" use it`,
		},
		{
			name: "same directory name on another node does not count", dir: "keep",
			existing:  map[string]string{"keep": "pvc-old"},
			volumes:   []any{volume("pvc-b", otherNode, "default", "keep", "b")},
			wantState: controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-old->" + testPVName, wantCreate: true,
		},
		{
			name: "directory that does not exist", dir: "nothing",
			wantState: controller.ProvisioningFinished,
			wantErr:   `the claim annotation hostpath.dev/reuse-directory names directory "nothing" in pool "default" on node "node-a", which does not exist`,
		},
		{
			name: "name outside the pool", dir: "../etc",
			wantState: controller.ProvisioningFinished, wantErr: "claim annotation hostpath.dev/reuse-directory: volume name \"../etc\" is invalid",
		},
		{
			name: "another volume took it first", dir: "keep",
			existing:    map[string]string{"keep": "pvc-old"},
			setOwnerErr: ownerConflict("pvc-fast"),
			wantState:   controller.ProvisioningFinished, wantSetOwners: "default/keep pvc-old->" + testPVName,
			wantErr: `belongs to PersistentVolume "pvc-fast"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, fakeInstances{}, append(testNodes(), tc.volumes...)...)
			for dir, owner := range tc.existing {
				f.manager.have("default", dir, owner)
			}
			f.manager.setOwnerErr = tc.setOwnerErr
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
			c := claim("retain", annotations.ProvisionOnNode+"="+selfNode, annotations.ReuseDirectory+"="+tc.dir)
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: retain, PVName: testPVName, PVC: c})
			if state != tc.wantState {
				t.Errorf("state = %s, want %s", state, tc.wantState)
			}
			checkErr(t, err, false, tc.wantErr)
			if got := strings.Join(f.manager.setOwners, ", "); got != tc.wantSetOwners {
				t.Errorf("manager owner changes = %q, want %q", got, tc.wantSetOwners)
			}
			if !tc.wantCreate {
				if len(f.manager.creates) != 0 || pv != nil {
					t.Errorf("creates = %q, pv = %v; want none", f.manager.creates, pv)
				}
				return
			}
			if got, want := strings.Join(f.manager.creates, ", "), "default/"+tc.dir+" 0777 1Gi by "+testPVName; got != want {
				t.Errorf("manager creates = %q, want %q", got, want)
			}
			if want := wantPV(retain, claim("retain"), tc.dir); !equality.Semantic.DeepEqual(pv, want) {
				t.Errorf("pv =\n%#v\nwant\n%#v", pv, want)
			}
		})
	}
}
