package reclaim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/app/cachetrim"
)

// foreignStub is what the informers keep of pv, another provisioner's PV:
// a stub (package cachetrim).
func foreignStub(pv *v1.PersistentVolume) *v1.PersistentVolume {
	obj, _ := cachetrim.New(testNames)(pv.DeepCopy())
	stub := obj.(*v1.PersistentVolume)
	if stub.Spec.PersistentVolumeReclaimPolicy != "" || stub.Status.Phase != "" || stub.DeletionTimestamp != nil {
		panic("foreignStub: " + pv.Name + " was not made a stub")
	}
	return stub
}

var sweepNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// ownedVolume is a volume of testPool owned by owner since age ago.
func ownedVolume(name, owner string, age time.Duration) managerapi.Volume {
	since := sweepNow.Add(-age)
	return managerapi.Volume{Name: name, Pool: testPool, Owner: owner, OwnedSince: &since}
}

// withReclaimPolicy returns v with the reclaim policy p in its record.
func withReclaimPolicy(v managerapi.Volume, p string) managerapi.Volume {
	v.ReclaimPolicy = p
	return v
}

// sweepManagers is the manager of selfNode (managertest) holding volumes,
// by pool; deleteErrs answers the DELETE of "pool/name", listErrs the
// list of a pool.
func sweepManagers(volumes map[string][]managerapi.Volume, deleteErrs, listErrs map[string]error) *managertest.Fake {
	mgrs := managertest.New()
	m := mgrs.Node(selfNode)
	for pool, vols := range volumes {
		m.AddPool(managerapi.Pool{Name: pool})
		for _, v := range vols {
			m.AddVolume(v)
		}
	}
	for key, err := range deleteErrs {
		pool, name, _ := strings.Cut(key, "/")
		mgrs.Fail(managertest.Failure{Method: managertest.DeleteVolume, Pool: pool, Name: name, Err: err})
	}
	for pool, err := range listErrs {
		mgrs.Fail(managertest.Failure{Method: managertest.ListVolumes, Pool: pool, Err: err})
	}
	return mgrs
}

func TestSweep(t *testing.T) {
	old := DefaultSweepGrace + time.Minute
	retained := ownedVolume("kept-dir", "pv-gone", old)
	retained.Retained = true
	noSince := ownedVolume("kept-dir", "pv-gone", old)
	noSince.OwnedSince = nil

	tests := []struct {
		name string
		// cached PVs are in the lister and the API; live ones only in the API.
		cached, live []*v1.PersistentVolume
		volumes      map[string][]managerapi.Volume
		deleteErrs   map[string]error
		listErrs     map[string]error
		getErr       error
		listErr      error
		managersErr  error
		sweeps       int

		wantErr   string
		wantCalls []string
		wantGets  int
		// wantLists is how many live LISTs of PVs the sweeps made.
		wantLists  int
		wantEvents []string
	}{
		{
			name:      "owner record within the grace period is kept",
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("new-dir", "pv-gone", DefaultSweepGrace-time.Second)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "owner PV exists here is kept",
			cached:    []*v1.PersistentVolume{newPV("pv-1", notDeleting)},
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("pv-1-dir", "pv-1", old)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "owner PV under deletion is kept",
			cached:    []*v1.PersistentVolume{newPV("pv-1")},
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("pv-1-dir", "pv-1", old)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "owner PV of another provisioner is kept",
			cached:    []*v1.PersistentVolume{newPV("pv-1", hostpathtest.OnNode(otherNode), hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other"))},
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("pv-1-dir", "pv-1", old)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			// The informers keep it as a stub (package cachetrim): its
			// name is what keeps the directory.
			name: "owner PV of another provisioner, a stub in the cache, is kept even with policy Delete",
			cached: []*v1.PersistentVolume{foreignStub(newPV("pv-1", notDeleting, hostpathtest.OnNode(otherNode),
				hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other")))},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("pv-1-dir", "pv-1", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "retained directory is kept",
			volumes:   map[string][]managerapi.Volume{testPool: {retained}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "directory without owner record is left to adoption",
			volumes:   map[string][]managerapi.Volume{testPool: {{Name: "legacy-dir", Pool: testPool}}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "owner record without a time is kept",
			volumes:   map[string][]managerapi.Volume{testPool: {noSince}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "empty orphan is deleted if empty, as its owner",
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("orphan-dir", "pv-gone", old)}},
			wantCalls: []string{"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=true"},
			wantGets:  1, wantLists: 1,
		},
		{
			name:       "owner PV refers to another node: kept, never removed, a warning on the PV",
			cached:     []*v1.PersistentVolume{newPV("pv-1", notDeleting, hostpathtest.OnNode(otherNode))},
			volumes:    map[string][]managerapi.Volume{testPool: {ownedVolume("pv-1-dir", "pv-1", old)}},
			wantCalls:  []string{"host", "list default"},
			wantEvents: []string{`Warning DirectoryMisplaced The directory "pv-1-dir" in pool "default" on node "node-a" is recorded as this PersistentVolume's, but the PersistentVolume refers to directory "pv-1-dir" in pool "default" on node "node-b"`},
		},
		{
			name:   "owner PV names another pool (a pool renamed): kept with policy Delete, reported once over two sweeps",
			cached: []*v1.PersistentVolume{newPV("pv-1", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationPool, "old-name"))},
			volumes: map[string][]managerapi.Volume{testPool: {func() managerapi.Volume {
				v := ownedVolume("pv-1-dir", "pv-1", old)
				v.ReclaimPolicy = managerapi.ReclaimDelete
				return v
			}()}},
			sweeps:     2,
			wantCalls:  []string{"host", "list default", "host", "list default"},
			wantEvents: []string{`Warning DirectoryMisplaced The directory "pv-1-dir" in pool "default" on node "node-a" is recorded as this PersistentVolume's, but the PersistentVolume refers to directory "pv-1-dir" in pool "old-name" on node "node-a"`},
		},
		{
			name:      "stale cache: the live GET finds the PV, kept",
			live:      []*v1.PersistentVolume{newPV("pv-1", notDeleting)},
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("pv-1-dir", "pv-1", old)}},
			wantCalls: []string{"host", "list default"},
			wantGets:  1,
		},
		{
			name:      "live GET fails: kept, error",
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("orphan-dir", "pv-gone", old)}},
			getErr:    apierrors.NewServiceUnavailable("try later"),
			wantCalls: []string{"host", "list default"},
			wantGets:  1,
			wantErr:   `get PersistentVolume "pv-gone"`,
		},
		{
			name:       "orphan with data is reported once and not deleted",
			volumes:    map[string][]managerapi.Volume{testPool: {ownedVolume("orphan-dir", "pv-gone", old)}},
			deleteErrs: map[string]error{testPool + "/orphan-dir": managertest.Answer(managerapi.ReasonNotEmpty, "test answer")},
			sweeps:     2,
			wantCalls: []string{
				"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=true",
				"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=true",
			},
			wantGets: 2, wantLists: 2,
			wantEvents: []string{`Warning OrphanedDirectory The directory "orphan-dir" in pool "default" on node "node-a" belongs to PersistentVolume "pv-gone", which does not exist, but holds data`},
		},
		{
			name:       "orphan adopted since the list is left alone",
			volumes:    map[string][]managerapi.Volume{testPool: {ownedVolume("orphan-dir", "pv-gone", old)}},
			deleteErrs: map[string]error{testPool + "/orphan-dir": managertest.OwnerConflict("pv-new")},
			wantCalls:  []string{"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=true"},
			wantGets:   1, wantLists: 1,
		},
		{
			name: "failures are counted and the other volumes swept",
			volumes: map[string][]managerapi.Volume{
				"broken": nil,
				testPool: {
					ownedVolume("a-dir", "pv-a", old),
					ownedVolume("b-dir", "pv-b", old),
					ownedVolume("c-dir", "pv-c", old),
				},
			},
			listErrs: map[string]error{"broken": managertest.Answer(managerapi.ReasonInternal, "test answer")},
			deleteErrs: map[string]error{
				testPool + "/a-dir": managertest.Answer(managerapi.ReasonInternal, "test answer"),
				testPool + "/b-dir": managertest.Answer(managerapi.ReasonNotEmpty, "test answer"),
			},
			wantCalls: []string{"host", "list broken", "list default",
				"delete default/a-dir owner=pv-a ifEmpty=true",
				"delete default/b-dir owner=pv-b ifEmpty=true",
				"delete default/c-dir owner=pv-c ifEmpty=true"},
			// One LIST for the three removals.
			wantGets: 3, wantLists: 1,
			wantEvents: []string{"Warning OrphanedDirectory"},
			wantErr:    `(1 orphans removed, 1 kept because not empty): list volumes of pool "broken"`,
		},
		{
			name:      "orphan with policy Delete is removed even if not empty",
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=false"},
			wantGets:  1, wantLists: 1,
		},
		{
			name:      "orphan with policy Delete within the grace period is kept",
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", time.Second), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "owner with policy Delete that exists is kept",
			cached:    []*v1.PersistentVolume{newPV("pv-1", notDeleting)},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("pv-1-dir", "pv-1", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "orphan with policy Retain is never touched",
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimRetain)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name: "retained orphan with policy Delete is never touched",
			volumes: map[string][]managerapi.Volume{testPool: {func() managerapi.Volume {
				v := withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimDelete)
				v.Retained = true
				return v
			}()}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "existing multihost owner keeps its directory",
			cached:    []*v1.PersistentVolume{multihostPV("shared", "node-b", "", notDeleting)},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("shared-dir", "shared", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "a multihost directory the node lacks is not created (the host definer gives it)",
			cached:    []*v1.PersistentVolume{multihostPV("shared", "node-b", "", notDeleting)},
			volumes:   map[string][]managerapi.Volume{testPool: nil},
			wantCalls: []string{"host", "list default"},
		},
		{
			name:      "a pool that cannot be listed is reported, the others swept",
			volumes:   map[string][]managerapi.Volume{testPool: {ownedVolume("orphan-dir", "pv-gone", old)}, "broken": nil},
			listErrs:  map[string]error{"broken": managertest.Answer(managerapi.ReasonInternal, "test answer")},
			wantCalls: []string{"host", "list broken", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=true"},
			wantGets:  1, wantLists: 1,
			wantErr: `list volumes of pool "broken"`,
		},
		// Whatever the owner record says, a directory that a PV names is
		// never removed: a record rewritten to name a PV that does not
		// exist ("pv-ghost") must not cost a live volume its data.
		{
			name:       "a PV of this node names the directory (in the cache): kept, a warning on that PV",
			cached:     []*v1.PersistentVolume{newPV("pv-live", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:    map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls:  []string{"host", "list default"},
			wantGets:   1,
			wantEvents: []string{`Warning DirectoryOwnerMismatch The directory "victim-dir" in pool "default" on node "node-a", which this PersistentVolume names, is recorded as PersistentVolume "pv-ghost"'s, which does not exist: it is kept, never removed by the sweeper`},
		},
		{
			name:       "with no policy recorded too",
			cached:     []*v1.PersistentVolume{newPV("pv-live", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:    map[string][]managerapi.Volume{testPool: {ownedVolume("victim-dir", "pv-ghost", old)}},
			wantCalls:  []string{"host", "list default"},
			wantGets:   1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name:       "reported once over two sweeps",
			cached:     []*v1.PersistentVolume{newPV("pv-live", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:    map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			sweeps:     2,
			wantCalls:  []string{"host", "list default", "host", "list default"},
			wantGets:   2,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name: "a multihost PV names the directory, without this node: kept",
			cached: []*v1.PersistentVolume{multihostPV("shared", "node-b", "", notDeleting,
				hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:    map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls:  []string{"host", "list default"},
			wantGets:   1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name: "a PV made by hand names the directory (a stub in the cache): kept",
			cached: []*v1.PersistentVolume{foreignStub(newPV("by-hand", notDeleting, hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, ""),
				hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir")))},
			volumes:    map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls:  []string{"host", "list default"},
			wantGets:   1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name: "another provisioner's PV names the pool and directory but no node: kept",
			cached: []*v1.PersistentVolume{foreignStub(newPV("theirs", notDeleting, hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other"),
				hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"), func(pv *v1.PersistentVolume) { delete(pv.Annotations, hostpathv1.AnnotationNode) }))},
			volumes:    map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls:  []string{"host", "list default"},
			wantGets:   1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name:       "a PV of an unknown mode names the directory: kept",
			cached:     []*v1.PersistentVolume{newPV("odd", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationMode, "future"), hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:    map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls:  []string{"host", "list default"},
			wantGets:   1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name:      "a node-mode PV of another node with the same directory does not keep it",
			cached:    []*v1.PersistentVolume{newPV("pv-b", notDeleting, hostpathtest.OnNode(otherNode), hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "orphan-dir"))},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=false"},
			wantGets:  1, wantLists: 1,
		},
		{
			name:      "a PV of another pool with the same directory does not keep it",
			cached:    []*v1.PersistentVolume{newPV("pv-p", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationPool, "other-pool"), hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "orphan-dir"))},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=false"},
			wantGets:  1, wantLists: 1,
		},
		{
			// The cache lags behind a PV just made, or filters it out:
			// the live LIST finds it.
			name:      "a PV that names the directory only on the API server: kept",
			live:      []*v1.PersistentVolume{newPV("pv-new", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default"},
			wantGets:  1, wantLists: 1,
			wantEvents: []string{`Warning DirectoryOwnerMismatch The directory "victim-dir" in pool "default" on node "node-a", which this PersistentVolume names`},
		},
		{
			name: "a multihost PV only on the API server: kept",
			live: []*v1.PersistentVolume{multihostPV("shared", "node-b", "", notDeleting,
				hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes:   map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete)}},
			wantCalls: []string{"host", "list default"},
			wantGets:  1, wantLists: 1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name: "the live LIST fails: kept, error, once for the sweep",
			volumes: map[string][]managerapi.Volume{testPool: {
				withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimDelete),
				withReclaimPolicy(ownedVolume("second-dir", "pv-gone-too", old), managerapi.ReclaimDelete),
			}},
			listErr:   apierrors.NewServiceUnavailable("try later"),
			wantCalls: []string{"host", "list default"},
			wantGets:  2, wantLists: 1,
			wantErr: `keep directory "orphan-dir" in pool "default" on node "node-a": list the PersistentVolumes that could name it`,
		},
		{
			name: "one live LIST per sweep: the named directory kept, the orphan removed",
			live: []*v1.PersistentVolume{newPV("pv-new", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))},
			volumes: map[string][]managerapi.Volume{testPool: {
				withReclaimPolicy(ownedVolume("orphan-dir", "pv-gone", old), managerapi.ReclaimDelete),
				withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", old), managerapi.ReclaimDelete),
			}},
			wantCalls: []string{"host", "list default", "delete default/orphan-dir owner=pv-gone ifEmpty=false"},
			wantGets:  2, wantLists: 1,
			wantEvents: []string{"Warning DirectoryOwnerMismatch"},
		},
		{
			name:        "no manager",
			managersErr: errors.New("no Ready manager pod"),
			wantErr:     "find the manager: no Ready manager pod",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var objects []runtime.Object
			for _, pv := range append(slices.Clone(tt.cached), tt.live...) {
				objects = append(objects, pv)
			}
			kube := fake.NewClientset(objects...)
			if tt.getErr != nil {
				kube.PrependReactor("get", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.getErr
				})
			}
			if tt.listErr != nil {
				kube.PrependReactor("list", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.listErr
				})
			}
			factory := informers.NewSharedInformerFactory(kube, 0)
			for _, pv := range tt.cached {
				if err := factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(pv); err != nil {
					t.Fatal(err)
				}
			}
			mgrs := sweepManagers(tt.volumes, tt.deleteErrs, tt.listErrs)
			recorder := record.NewFakeRecorder(10)
			s := NewSweeper(SweeperConfig{
				ProvisionerNames: testNames,
				Node:             selfNode,
				Client:           kube,
				Volumes:          factory.Core().V1().PersistentVolumes(),
				Managers: func(node string) (Manager, error) {
					if node != selfNode {
						t.Errorf("asked for the manager of %q, want %q", node, selfNode)
					}
					if tt.managersErr != nil {
						return nil, tt.managersErr
					}
					return managertest.For[Manager](mgrs)(node)
				},
				Recorder: recorder,
				Clock:    clocktesting.NewFakePassiveClock(sweepNow),
			})

			sweeps := max(tt.sweeps, 1)
			var err error
			for range sweeps {
				err = s.Sweep(ctx)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Sweep() error = %v, want %q", err, tt.wantErr)
			}
			if got := described(mgrs.Calls()); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("manager calls = %q, want %q", got, tt.wantCalls)
			}
			if w := hostpathtest.Writes(kube.Actions()); len(w) > 0 {
				t.Errorf("API writes = %v, want none", w)
			}
			gets, lists := 0, 0
			for _, a := range kube.Actions() {
				switch a.GetVerb() {
				case "get":
					gets++
				case "list":
					lists++
				}
			}
			if gets != tt.wantGets {
				t.Errorf("live GETs = %d, want %d", gets, tt.wantGets)
			}
			if lists != tt.wantLists {
				t.Errorf("live LISTs = %d, want %d", lists, tt.wantLists)
			}
			hostpathtest.CheckEvents(t, hostpathtest.Events(recorder), tt.wantEvents)
		})
	}
}

func TestSweepReportEventOnNode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	mgrs := sweepManagers(map[string][]managerapi.Volume{testPool: {ownedVolume("orphan-dir", "pv-gone", time.Hour)}},
		map[string]error{testPool + "/orphan-dir": managertest.Answer(managerapi.ReasonNotEmpty, "test answer")}, nil)
	recorder := record.NewFakeRecorder(1)
	recorder.IncludeObject = true
	s := NewSweeper(SweeperConfig{
		ProvisionerNames: testNames, Node: selfNode, Client: kube,
		Volumes:  factory.Core().V1().PersistentVolumes(),
		Managers: managertest.For[Manager](mgrs),
		Recorder: recorder, Clock: clocktesting.NewFakePassiveClock(sweepNow),
	})
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := hostpathtest.Events(recorder)
	if len(got) != 1 || !strings.Contains(got[0], "involvedObject{kind=Node,apiVersion=v1}") || !strings.Contains(got[0], selfNode) {
		t.Errorf("events = %q, want one on Node %q", got, selfNode)
	}
}

func TestSweeperDefaultsAndRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	s := NewSweeper(SweeperConfig{Volumes: factory.Core().V1().PersistentVolumes()})
	if s.cfg.Period != DefaultSweepPeriod || s.cfg.Grace != DefaultSweepGrace || s.cfg.Clock == nil {
		t.Errorf("defaults: period %v, grace %v, clock %v", s.cfg.Period, s.cfg.Grace, s.cfg.Clock)
	}
	if err := s.Run(ctx); err == nil {
		t.Error("Run() = nil, want an error: the cache never synced")
	}
}

// TestSweeperTrigger: triggers merge while one is pending, and Run sweeps
// at once when triggered, without waiting for the period.
func TestSweeperTrigger(t *testing.T) {
	s := &Sweeper{trigger: make(chan struct{}, 1)}
	s.Trigger()
	s.Trigger() // merged, does not block
	if got := len(s.trigger); got != 1 {
		t.Fatalf("pending triggers = %d, want 1", got)
	}
	<-s.trigger
	s.Trigger()
	select {
	case <-s.trigger:
	default:
		t.Fatal("a trigger after the last one was taken is lost")
	}
}

// TestSweepDecision is the sweeper's rule: a directory goes only when its
// PV is confirmed gone, by the policy its record keeps.
func TestSweepDecision(t *testing.T) {
	tests := []struct {
		owner  ownerState
		policy string
		want   sweepAction
	}{
		{ownerUses, managerapi.ReclaimDelete, sweepLeave},
		{ownerUses, managerapi.ReclaimRetain, sweepLeave},
		{ownerUses, "", sweepLeave},
		{ownerElsewhere, managerapi.ReclaimDelete, sweepReportMisplaced},
		{ownerElsewhere, managerapi.ReclaimRetain, sweepReportMisplaced},
		{ownerElsewhere, "", sweepReportMisplaced},
		{ownerForeign, managerapi.ReclaimDelete, sweepLeave},
		{ownerForeign, "", sweepLeave},
		{ownerGone, managerapi.ReclaimDelete, sweepRemove},
		{ownerGone, managerapi.ReclaimRetain, sweepLeave},
		{ownerGone, "", sweepRemoveIfEmpty},
	}
	for _, tt := range tests {
		if got := sweepDecision(tt.owner, tt.policy); got != tt.want {
			t.Errorf("sweepDecision(%d, %q) = %d, want %d", tt.owner, tt.policy, got, tt.want)
		}
	}
}

// TestNewSweeperSharesTheIndex: a second Sweeper on the same informer (a
// restart of the sweeper in one process, a test) finds the directory
// index there and sweeps.
func TestNewSweeperSharesTheIndex(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	live := newPV("pv-live", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "victim-dir"))
	if err := factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(live); err != nil {
		t.Fatal(err)
	}
	mgrs := sweepManagers(map[string][]managerapi.Volume{testPool: {withReclaimPolicy(ownedVolume("victim-dir", "pv-ghost", DefaultSweepGrace+time.Minute), managerapi.ReclaimDelete)}}, nil, nil)
	cfg := SweeperConfig{
		ProvisionerNames: testNames, Node: selfNode, Client: kube,
		Volumes:  factory.Core().V1().PersistentVolumes(),
		Managers: managertest.For[Manager](mgrs),
		Recorder: record.NewFakeRecorder(10),
		Clock:    clocktesting.NewFakePassiveClock(sweepNow),
	}
	_ = NewSweeper(cfg)
	if err := NewSweeper(cfg).Sweep(ctx); err != nil {
		t.Fatalf("Sweep of the second sweeper: %v", err)
	}
	if got := described(mgrs.Calls()); !slices.Equal(got, []string{"host", "list default"}) {
		t.Errorf("manager calls = %q, want the named directory kept", got)
	}
}
