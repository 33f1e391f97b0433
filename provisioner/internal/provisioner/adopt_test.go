package provisioner

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// TestAdopt: AdoptAll over one PV of the cache (and the others that name
// its directory) gives the directory an owner only when that is safe.
func TestAdopt(t *testing.T) {
	foreign := volume("pv", selfNode, "default", "dir", "data")
	foreign.Annotations[storagehelpers.AnnDynamicallyProvisioned] = "example.com/other"
	capacityAware := volume("pv", selfNode, "default", "dir", "data")
	capacityAware.Annotations[storagehelpers.AnnDynamicallyProvisioned] = hostpathv1.CapacityProvisionerName
	tests := []struct {
		name          string
		pv            *v1.PersistentVolume
		owner         string // owner record of default/dir; "-" for no directory
		volumes       []any  // other PVs in the cache
		setOwnerErr   error
		wantSetOwners string
		wantErr       string
		wantOwner     string
	}{
		{name: "directory without owner record", owner: "", wantSetOwners: "default/dir ->pv", wantOwner: "pv"},
		{name: "already adopted", owner: "pv", wantOwner: "pv"},
		{name: "directory gone", owner: "-", wantOwner: "-"},
		{
			name: "adopted concurrently by the same volume", owner: "", setOwnerErr: managertest.OwnerConflict("pv"),
			wantSetOwners: "default/dir ->pv", wantOwner: "",
		},
		{
			name: "two volumes share the directory", owner: "",
			volumes: []any{volume("pv-twin", selfNode, "default", "dir", "twin"), volume("pv-third", selfNode, "default", "dir", "third")},
			wantErr: `directory "dir" in pool "default" on node "node-a" has no owner record and the PersistentVolumes "pv", "pv-third", "pv-twin" all use it: deleting either would delete the other's data; resolve by hand`,
		},
		{
			name: "owned by another volume", owner: "pvc-other",
			wantErr: `belongs to PersistentVolume "pvc-other", but PersistentVolume "pv" names it`, wantOwner: "pvc-other",
		},
		{name: "volume of another node", pv: volume("pv", otherNode, "default", "dir", "data"), owner: ""},
		{name: "volume of another provisioner", pv: foreign, owner: ""},
		{name: "volume of the capacity-aware name", pv: capacityAware, owner: "", wantSetOwners: "default/dir ->pv", wantOwner: "pv"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pv := tc.pv
			if pv == nil {
				pv = volume("pv", selfNode, "default", "dir", "data")
			}
			f := newFixture(t, responsibilitytest.Instances{}, append([]any{pv}, tc.volumes...)...)
			if tc.owner != "-" {
				f.manager.AddVolume(directory("default", "dir", tc.owner, ""))
			}
			fail(f.managers, selfNode, tc.setOwnerErr, managertest.SetOwner)
			err := f.prov.AdoptAll(ctx)
			checkErr(t, err, false, tc.wantErr)
			if got := strings.Join(callsOf(f.manager, managertest.SetOwner), ", "); got != tc.wantSetOwners {
				t.Errorf("manager owner changes = %q, want %q", got, tc.wantSetOwners)
			}
			owner, ok := ownerOf(f.manager, "default", "dir")
			if !ok {
				owner = "-"
			}
			if owner != tc.wantOwner {
				t.Errorf("owner record = %q, want %q", owner, tc.wantOwner)
			}
		})
	}
}

func TestAdoptAll(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, responsibilitytest.Instances{},
		volume("pv-legacy", selfNode, "default", "legacy", "a"),       // no record: adopted
		volume("pv-fast", selfNode, "fast", "legacy", "b"),            // same name, other pool: adopted
		volume("pv-owned", selfNode, "default", "owned", "c"),         // has its record: left alone
		volume("pv-gone", selfNode, "default", "gone", "d"),           // no directory: left alone
		volume("pv-one", selfNode, "default", "shared", "e"),          // two volumes, one directory:
		volume("pv-two", selfNode, "default", "shared", "f"),          // neither adopted, one error
		volume("pv-remote", otherNode, "default", "remote", "g"),      // another node's
		volume("pv-remote-twin", otherNode, "default", "legacy", "h"), // same name on another node does not count
	)
	f.manager.AddVolume(directory("default", "legacy", "", ""))
	f.manager.AddVolume(directory("fast", "legacy", "", ""))
	f.manager.AddVolume(directory("default", "owned", "pv-owned", ""))
	f.manager.AddVolume(directory("default", "shared", "", ""))
	f.manager.AddVolume(directory("default", "remote", "", ""))

	err := f.prov.AdoptAll(ctx)
	const wantErr = `the PersistentVolumes "pv-one", "pv-two" all use it: deleting either would delete the other's data; resolve by hand`
	if err == nil || strings.Count(err.Error(), wantErr) != 1 {
		t.Errorf("AdoptAll = %v, want one error containing %q", err, wantErr)
	}
	if got, want := strings.Join(callsOf(f.manager, managertest.SetOwner), ", "), "default/legacy ->pv-legacy, fast/legacy ->pv-fast"; got != want {
		t.Errorf("manager owner changes = %q, want %q", got, want)
	}
	for _, pool := range []string{"default", "fast"} {
		if got := namespaceOf(f.manager, pool, "legacy"); got != "team-a" {
			t.Errorf("%s/legacy records claim namespace %q, want its volume's team-a", pool, got)
		}
	}
	if got, want := strings.Join(callsOf(f.manager, managertest.ListVolumes), ", "), "default, fast"; got != want || len(callsOf(f.manager, managertest.GetVolume)) != 0 {
		t.Errorf("manager lists = %q and gets = %q, want lists %q and no gets", got, callsOf(f.manager, managertest.GetVolume), want)
	}
	for _, dir := range []string{"shared", "remote"} {
		if owner, _ := ownerOf(f.manager, "default", dir); owner != "" {
			t.Errorf("default/%s owner = %q, want none", dir, owner)
		}
	}

	// Again: nothing left to adopt, the same error.
	f.managers.Take()
	err = f.prov.AdoptAll(ctx)
	if err == nil || !strings.Contains(err.Error(), wantErr) || len(callsOf(f.manager, managertest.SetOwner)) != 0 {
		t.Errorf("second AdoptAll = %v with owner changes %q, want the same error and none", err, callsOf(f.manager, managertest.SetOwner))
	}
}

// TestAdoptAllMarksMultihost: this node's copies of multihost PVs whose
// owner records do not say multihost (written before they kept the mode)
// are marked, keeping retained; marked ones, missing ones and those of
// another owner are left alone.
func TestAdoptAllMarksMultihost(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	multihost := func(name, dir string) *v1.PersistentVolume {
		pv := volume(name, "", "default", dir, name)
		pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
		delete(pv.Annotations, hostpathv1.AnnotationNode)
		return pv
	}
	f := newFixture(t, responsibilitytest.Instances{}, multihost("pv-old", "old"), multihost("pv-kept", "kept"), multihost("pv-marked", "marked"),
		multihost("pv-missing", "missing"), multihost("pv-taken", "taken"))
	f.manager.AddVolume(directory("default", "old", "pv-old", ""))
	f.manager.AddVolume(directory("default", "kept", "pv-kept", ""))
	f.manager.UpdateVolume("default", "kept", func(v *managerapi.Volume) { v.Retained = true })
	f.manager.AddVolume(directory("default", "marked", "pv-marked", ""))
	f.manager.UpdateVolume("default", "marked", func(v *managerapi.Volume) { v.Multihost = true })
	f.manager.AddVolume(directory("default", "taken", "pv-other", ""))

	if err := f.prov.AdoptAll(ctx); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(slices.Sorted(slices.Values(callsOf(f.manager, managertest.SetOwner))), ", ")
	if want := "default/kept pv-kept->pv-kept multihost, default/old pv-old->pv-old multihost"; got != want {
		t.Errorf("manager owner changes = %q, want %q", got, want)
	}
	if v, _ := f.manager.Volume("default", "kept"); !v.Retained || !v.Multihost {
		t.Errorf("default/kept = %+v, want retained and multihost", v)
	}
	f.managers.Take()
	if err := f.prov.AdoptAll(ctx); err != nil || len(callsOf(f.manager, managertest.SetOwner)) != 0 {
		t.Errorf("second AdoptAll = %v with owner changes %q, want none", err, callsOf(f.manager, managertest.SetOwner))
	}
}
