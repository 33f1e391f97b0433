package usage

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

func TestRefresh(t *testing.T) {
	tests := []struct {
		name string
		// cached PVs are in the lister and the API.
		cached      []*v1.PersistentVolume
		volumes     map[string][]managerapi.Volume
		listErrs    map[string]error
		readOnly    map[string]bool
		hostErr     error
		managersErr error

		wantErr    string
		wantCalls  []string
		wantWrites []string
		// wantEvents are the events, without their messages (none when
		// nil).
		wantEvents []string
	}{
		{
			name: "written where absent, rounded up to a MiB",
			cached: []*v1.PersistentVolume{newPV("pv-a"), newPV("pv-zero"), newPV("pv-one"), newPV("pv-gi"), newPV("pv-big"),
				newPV("pv-exact")},
			volumes: map[string][]managerapi.Volume{testPool: {
				enforced("pv-a-dir", 23*mi+200*1024), enforced("pv-zero-dir", 0), enforced("pv-one-dir", 1),
				enforced("pv-gi-dir", 1024*mi), enforced("pv-big-dir", 1535*mi+1), enforced("pv-exact-dir", 24*mi),
			}},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-a=24Mi", "pv-zero=0", "pv-one=1Mi", "pv-gi=1Gi", "pv-big=1536Mi", "pv-exact=24Mi"},
		},
		{
			name: "not written again for a change under 1 MiB",
			cached: []*v1.PersistentVolume{
				newPV("pv-same", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "24Mi")),
				newPV("pv-up", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "24Mi")),
				newPV("pv-down", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "24Mi")),
				newPV("pv-zero", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "0")),
			},
			volumes: map[string][]managerapi.Volume{testPool: {
				enforced("pv-same-dir", 24*mi), enforced("pv-up-dir", 25*mi-1), enforced("pv-down-dir", 23*mi+1),
				enforced("pv-zero-dir", mi-1),
			}},
			wantCalls: []string{"node-a Host", "node-a ListVolumes default"},
		},
		{
			name: "written again for a change of 1 MiB or more",
			cached: []*v1.PersistentVolume{
				newPV("pv-up", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "24Mi")),
				newPV("pv-down", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "24Mi")),
				newPV("pv-far", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "24Mi")),
				newPV("pv-emptied", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "1Gi")),
			},
			volumes: map[string][]managerapi.Volume{testPool: {
				enforced("pv-up-dir", 25*mi), enforced("pv-down-dir", 23*mi), enforced("pv-far-dir", 26*mi+1),
				enforced("pv-emptied-dir", 0),
			}},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-up=25Mi", "pv-down=23Mi", "pv-far=27Mi", "pv-emptied=0"},
		},
		{
			name: "an unreadable or negative value is replaced",
			cached: []*v1.PersistentVolume{
				newPV("pv-junk", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "lots")),
				newPV("pv-negative", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "-1Gi")),
			},
			volumes:    map[string][]managerapi.Volume{testPool: {enforced("pv-junk-dir", 5*mi), enforced("pv-negative-dir", 0)}},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-junk=5Mi", "pv-negative=0"},
		},
		{
			name: "nothing written where the size is not enforced",
			cached: []*v1.PersistentVolume{
				newPV("pv-a", hostpathtest.Annotation(hostpathv1.AnnotationSizeEnforcement, hostpathv1.EnforcementNone)),
				newPV("pv-kept", hostpathtest.Annotation(hostpathv1.AnnotationSizeUsed, "7Mi")),
			},
			volumes:   map[string][]managerapi.Volume{testPool: {unenforced("pv-a-dir"), unenforced("pv-kept-dir")}},
			wantCalls: []string{"node-a Host", "node-a ListVolumes default"},
		},
		{
			name: "only this provisioner's PVs of this node, not under deletion",
			cached: []*v1.PersistentVolume{
				newPV("pv-other-node", hostpathtest.Annotation(hostpathv1.AnnotationNode, otherNode)),
				newPV("pv-multihost-elsewhere", hostpathtest.Multihost(otherNode)),
				newPV("pv-other-provisioner", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other")),
				newPV("pv-deleting", hostpathtest.Deleting),
				newPV("pv-no-directory", hostpathtest.WithoutAnnotation(hostpathv1.AnnotationDirectory)),
				newPV("pv-no-pool", hostpathtest.WithoutAnnotation(hostpathv1.AnnotationPool)),
				newPV("pv-unknown-mode", hostpathtest.Annotation(hostpathv1.AnnotationMode, "elsewhere")),
			},
			volumes: map[string][]managerapi.Volume{testPool: {
				enforced("pv-other-node-dir", mi), enforced("pv-multihost-elsewhere-dir", mi), enforced("pv-other-provisioner-dir", mi),
				enforced("pv-deleting-dir", mi),
			}},
		},
		{
			// Its health is looked at (the list), its usage is not written.
			name:      "a multihost PV of this node gets no size-used",
			cached:    []*v1.PersistentVolume{newPV("pv-multihost", hostpathtest.Multihost(otherNode, selfNode))},
			volumes:   map[string][]managerapi.Volume{testPool: {enforced("pv-multihost-dir", mi)}},
			wantCalls: []string{"node-a Host", "node-a ListVolumes default"},
		},
		{
			name: "usage and condition in one patch, the condition alone where the size is not enforced",
			cached: []*v1.PersistentVolume{
				newPV("pv-full"),
				newPV("pv-plain", hostpathtest.Annotation(hostpathv1.AnnotationSizeEnforcement, hostpathv1.EnforcementNone)),
			},
			volumes:    map[string][]managerapi.Volume{testPool: {sizedVolume("pv-full-dir", 32*mi, 31*mi), unenforced("pv-plain-dir")}},
			readOnly:   map[string]bool{testPool: true},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-full=31Mi health=PoolReadOnly", "pv-plain health=PoolReadOnly"},
			wantEvents: []string{
				"pv/pv-full Warning PoolReadOnly", "pvc/team-a/pv-full-claim Warning PoolReadOnly",
				"pv/pv-plain Warning PoolReadOnly", "pvc/team-a/pv-plain-claim Warning PoolReadOnly",
			},
		},
		{
			name:       "the usage is written while the host cannot be described; no condition changes",
			cached:     []*v1.PersistentVolume{newPV("pv-a"), newPV("pv-gone")},
			volumes:    map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", 3*mi)}},
			hostErr:    errors.New("manager busy"),
			wantErr:    `describe the pools of node "node-a" (no condition changes in this refresh): manager busy`,
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-a=3Mi"},
		},
		{
			name:       "a PV of the capacity-aware provisioner name is refreshed too",
			cached:     []*v1.PersistentVolume{newPV("pv-a", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, hostpathv1.CapacityProvisionerName))},
			volumes:    map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", 3*mi)}},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-a=3Mi"},
		},
		{
			name:       "a PV without a mode is in node mode",
			cached:     []*v1.PersistentVolume{newPV("pv-a", hostpathtest.WithoutAnnotation(hostpathv1.AnnotationMode))},
			volumes:    map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", 3*mi)}},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-a=3Mi"},
		},
		{
			name: "one call per pool, volumes no PV names ignored",
			cached: []*v1.PersistentVolume{
				newPV("pv-a"), newPV("pv-b"), newPV("pv-c", hostpathtest.Annotation(hostpathv1.AnnotationPool, "fast")),
			},
			volumes: map[string][]managerapi.Volume{
				testPool: {enforced("orphan-dir", 9*mi), enforced("pv-a-dir", mi), enforced("pv-b-dir", 2*mi)},
				"fast":   {enforced("pv-c-dir", 3*mi)},
			},
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default", "node-a ListVolumes fast"},
			wantWrites: []string{"pv-a=1Mi", "pv-b=2Mi", "pv-c=3Mi"},
		},
		{
			name: "a pool that fails does not stop the others",
			cached: []*v1.PersistentVolume{
				newPV("pv-a", hostpathtest.Annotation(hostpathv1.AnnotationPool, "broken")), newPV("pv-b"),
			},
			volumes:    map[string][]managerapi.Volume{"broken": {enforced("pv-a-dir", mi)}, testPool: {enforced("pv-b-dir", 2*mi)}},
			listErrs:   map[string]error{"broken": errors.New("manager says no")},
			wantErr:    `list the volumes of pool "broken": manager says no`,
			wantCalls:  []string{"node-a Host", "node-a ListVolumes broken", "node-a ListVolumes default"},
			wantWrites: []string{"pv-b=2Mi"},
		},
		{
			name:        "no manager",
			cached:      []*v1.PersistentVolume{newPV("pv-a")},
			volumes:     map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", mi)}},
			managersErr: errors.New("no Ready manager pod"),
			wantErr:     "find the manager: no Ready manager pod",
		},
		{
			name: "a failed patch does not stop the others",
			// pv-gone was deleted since the cache saw it: not an error.
			cached:     []*v1.PersistentVolume{newPV("pv-a"), newPV("pv-refused"), newPV("pv-gone")},
			volumes:    map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", mi), enforced("pv-gone-dir", mi), enforced("pv-refused-dir", mi)}},
			wantErr:    `set hostpath.dev/size-used to 1Mi of PersistentVolume "pv-refused": refused`,
			wantCalls:  []string{"node-a Host", "node-a ListVolumes default"},
			wantWrites: []string{"pv-a=1Mi", "pv-gone=1Mi", "pv-refused=1Mi"},
		},
		{
			name: "no PV, no call",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			mgr := newManager(tc.volumes, tc.listErrs, tc.readOnly, tc.hostErr)
			f := newFixture(t, mgr, tc.managersErr, nil, tc.cached)
			f.kube.PrependReactor("patch", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				switch a.(k8stesting.PatchAction).GetName() {
				case "pv-refused":
					return true, nil, errors.New("refused")
				case "pv-gone":
					return true, nil, apierrors.NewNotFound(v1.Resource("persistentvolumes"), "pv-gone")
				}
				return false, nil, nil
			})

			err := f.refresher.refresh(ctx)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refresh = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("refresh = %v, want an error with %q", err, tc.wantErr)
			}
			if got := managertest.Strings(mgr.Calls()); !slices.Equal(got, tc.wantCalls) {
				t.Errorf("manager calls = %q, want %q", got, tc.wantCalls)
			}
			got, want := writes(t, f.kube), slices.Clone(tc.wantWrites)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("writes = %q, want %q", got, want)
			}
			if got := names(f.events.take()); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events = %q, want %q", got, tc.wantEvents)
			}
		})
	}
}

// TestRefreshWritesThePV checks, against the fake API server, that the
// annotation lands on the PV and that its other annotations stay.
func TestRefreshWritesThePV(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", 1536*mi)}}, nil, nil, nil)
	f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{newPV("pv-a")})
	if err := f.refresher.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	pv, err := f.kube.CoreV1().PersistentVolumes().Get(ctx, "pv-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pv.Annotations[hostpathv1.AnnotationSizeUsed]; got != "1536Mi" {
		t.Errorf("%s = %q, want 1536Mi", hostpathv1.AnnotationSizeUsed, got)
	}
	if got := pv.Annotations[hostpathv1.AnnotationSizeEnforcement]; got != managerapi.EnforcementXFS {
		t.Errorf("%s = %q, want it kept as %q", hostpathv1.AnnotationSizeEnforcement, got, managerapi.EnforcementXFS)
	}
}

func TestSizeUsed(t *testing.T) {
	tests := []struct {
		used int64
		want string
	}{
		{0, "0"},
		{-5, "0"},
		{1, "1Mi"},
		{mi, "1Mi"},
		{mi + 1, "2Mi"},
		{24*mi - 1, "24Mi"},
		{1024 * mi, "1Gi"},
		{1024*mi + 1, "1025Mi"},
		{math.MaxInt64, "8796093022207Mi"},
	}
	for _, tc := range tests {
		if got := sizeUsed(tc.used); got != tc.want {
			t.Errorf("sizeUsed(%d) = %q, want %q", tc.used, got, tc.want)
		}
	}
}

// TestRunIntervalZero checks that a Refresher with no interval returns at
// once, without waiting for caches or asking for a manager.
func TestRunIntervalZero(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := New(Config{
		Node:     selfNode,
		Synced:   []cache.InformerSynced{func() bool { return false }},
		Managers: func(string) (Manager, error) { t.Error("Managers called"); return nil, errors.New("off") },
	})
	if err := r.Run(ctx); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestRunEveryInterval drives Run with a fake clock: one refresh once the
// caches synced, the next when the clock has moved by the interval, and
// none after ctx is done.
func TestRunEveryInterval(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	mgr := newManager(nil, nil, nil, nil)
	set(mgr, map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", 10*mi)}}, nil, nil, nil)
	f := newFixture(t, mgr, nil, clk, []*v1.PersistentVolume{newPV("pv-a")})
	patched := make(chan string, 10)
	f.kube.PrependReactor("patch", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patched <- patchedValue(t, a.(k8stesting.PatchAction).GetPatch())
		return false, nil, nil
	})
	done := make(chan error)
	go func() { done <- f.refresher.Run(ctx) }()

	if got := <-patched; got != "10Mi" {
		t.Errorf("first refresh wrote %q, want 10Mi", got)
	}
	// The next refresh's timer was set before this one began.
	if !clk.HasWaiters() {
		t.Fatal("no timer set for the next refresh")
	}
	// The cache sees the patch, as the informer would; the volume grows.
	pv, err := f.kube.CoreV1().PersistentVolumes().Get(ctx, "pv-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.indexer.Update(pv); err != nil {
		t.Fatal(err)
	}
	set(mgr, map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", 30*mi)}}, nil, nil, nil)

	clk.Step(testInterval)
	if got := <-patched; got != "30Mi" {
		t.Errorf("second refresh wrote %q, want 30Mi", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if got, want := managertest.Strings(mgr.Calls()), []string{"node-a Host", "node-a ListVolumes default", "node-a Host", "node-a ListVolumes default"}; !slices.Equal(got, want) {
		t.Errorf("manager calls = %q, want %q", got, want)
	}
	if len(patched) != 0 {
		t.Errorf("%d more patches, want none", len(patched))
	}
}
