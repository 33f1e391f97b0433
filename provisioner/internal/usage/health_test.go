package usage

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
)

// pvResource is the resource of PersistentVolumes, for the tracker.
var pvResource = v1.SchemeGroupVersion.WithResource("persistentvolumes")

// poolGone is the manager's answer for a pool whose directory is gone.
var poolGone = managerapi.Errorf(managerapi.ReasonPoolNotFound, `pool "default" directory /var/hp/default does not exist; prepare it with PUT /v1/pools/default`)

// state is what the fake manager answers in one refresh round.
type state struct {
	volumes  []managerapi.Volume // of testPool
	listErr  error               // of testPool
	readOnly bool                // testPool
	hostErr  error
}

// rounds repeats s n times.
func rounds(n int, s state) []state {
	out := make([]state, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// steps is a sequence of states, each with the events it must raise.
type step struct {
	states []state
	// wantEvents are the events of all of states, without messages.
	wantEvents []string
	// wantHealth is the PV's hostpathv1.AnnotationHealth after them ("" absent).
	wantHealth string
}

func TestHealthEvents(t *testing.T) {
	const pvName = "pv-a"
	dir := pvName + "-dir"
	var (
		quiet     = state{volumes: []managerapi.Volume{sizedVolume(dir, 32*mi, 10*mi)}}
		high      = state{volumes: []managerapi.Volume{sizedVolume(dir, 32*mi, 29*mi+mi/10)}} // 90.9%
		justBelow = state{volumes: []managerapi.Volume{sizedVolume(dir, 32*mi, 28*mi)}}       // 87%: within the hysteresis
		readOnly  = state{volumes: quiet.volumes, readOnly: true}
		noDir     = state{volumes: []managerapi.Volume{sizedVolume("other-dir", 32*mi, 0)}}
		noPool    = state{listErr: poolGone}
		noHost    = state{volumes: noDir.volumes, hostErr: errors.New("manager busy")}
		listFails = state{listErr: errors.New("connection refused")}
	)
	warn := func(reason string) []string {
		return []string{"pv/pv-a Warning " + reason, "pvc/team-a/pv-a-claim Warning " + reason}
	}
	healthy := []string{"pv/pv-a Normal VolumeHealthy", "pvc/team-a/pv-a-claim Normal VolumeHealthy"}

	tests := []struct {
		name string
		pv   *v1.PersistentVolume
		// threshold is Config.WarningThreshold (DefaultWarningThreshold
		// when 0; -1 for 0).
		threshold int
		steps     []step
	}{
		{
			name: "usage high: one event over several rounds, healthy once after the hysteresis",
			pv:   newPV(pvName),
			steps: []step{
				{states: rounds(2, quiet)},
				{states: rounds(3, high), wantEvents: warn(ReasonUsageHigh), wantHealth: hostpathv1.HealthUsageHigh},
				{states: rounds(2, justBelow), wantHealth: hostpathv1.HealthUsageHigh},
				{states: rounds(3, quiet), wantEvents: healthy},
			},
		},
		{
			name: "directory missing, then back",
			pv:   newPV(pvName),
			steps: []step{
				{states: rounds(3, noDir), wantEvents: warn(ReasonDirectoryMissing), wantHealth: hostpathv1.HealthDirectoryMissing},
				{states: rounds(3, quiet), wantEvents: healthy},
			},
		},
		{
			name: "pool read-only, then writable",
			pv:   newPV(pvName),
			steps: []step{
				{states: rounds(3, readOnly), wantEvents: warn(ReasonPoolReadOnly), wantHealth: hostpathv1.HealthPoolReadOnly},
				{states: rounds(3, quiet), wantEvents: healthy},
			},
		},
		{
			name: "pool missing, then back",
			pv:   newPV(pvName),
			steps: []step{
				{states: rounds(3, noPool), wantEvents: warn(ReasonPoolMissing), wantHealth: hostpathv1.HealthPoolMissing},
				{states: rounds(2, quiet), wantEvents: healthy},
			},
		},
		{
			name: "one condition to another: one event each, no healthy in between",
			pv:   newPV(pvName),
			steps: []step{
				{states: rounds(2, high), wantEvents: warn(ReasonUsageHigh), wantHealth: hostpathv1.HealthUsageHigh},
				{states: rounds(2, noDir), wantEvents: warn(ReasonDirectoryMissing), wantHealth: hostpathv1.HealthDirectoryMissing},
				{states: rounds(2, noPool), wantEvents: warn(ReasonPoolMissing), wantHealth: hostpathv1.HealthPoolMissing},
			},
		},
		{
			name: "the most severe condition wins",
			pv:   newPV(pvName),
			steps: []step{
				{states: []state{{volumes: high.volumes, readOnly: true}}, wantEvents: warn(ReasonPoolReadOnly), wantHealth: hostpathv1.HealthPoolReadOnly},
				{states: []state{{volumes: noDir.volumes, readOnly: true}}, wantEvents: warn(ReasonDirectoryMissing), wantHealth: hostpathv1.HealthDirectoryMissing},
			},
		},
		{
			name: "no condition changes without the host's answer, nor when the pool cannot be listed",
			pv:   newPV(pvName),
			steps: []step{
				{states: rounds(2, noHost)},
				{states: rounds(2, listFails)},
				{states: []state{noDir}, wantEvents: warn(ReasonDirectoryMissing), wantHealth: hostpathv1.HealthDirectoryMissing},
				{states: []state{noHost, listFails}, wantHealth: hostpathv1.HealthDirectoryMissing},
			},
		},
		{
			name: "restart: a recorded condition that still holds says nothing",
			pv:   newPV(pvName, hostpathtest.Annotation(hostpathv1.AnnotationHealth, hostpathv1.HealthDirectoryMissing)),
			steps: []step{
				{states: rounds(3, noDir), wantHealth: hostpathv1.HealthDirectoryMissing},
				{states: []state{quiet}, wantEvents: healthy},
			},
		},
		{
			name: "restart: recorded usage high within the hysteresis says nothing",
			pv:   newPV(pvName, hostpathtest.Annotation(hostpathv1.AnnotationHealth, hostpathv1.HealthUsageHigh)),
			steps: []step{
				{states: []state{high, justBelow}, wantHealth: hostpathv1.HealthUsageHigh},
			},
		},
		{
			name: "restart: a recorded condition that no longer holds is healthy once",
			pv:   newPV(pvName, hostpathtest.Annotation(hostpathv1.AnnotationHealth, hostpathv1.HealthPoolReadOnly)),
			steps: []step{
				{states: rounds(3, quiet), wantEvents: healthy},
			},
		},
		{
			name:      "threshold 0: no usage warning, even at 100%",
			pv:        newPV(pvName),
			threshold: -1,
			steps: []step{
				{states: rounds(3, state{volumes: []managerapi.Volume{sizedVolume(dir, 32*mi, 32*mi)}})},
				{states: []state{noDir}, wantEvents: warn(ReasonDirectoryMissing), wantHealth: hostpathv1.HealthDirectoryMissing},
			},
		},
		{
			name:      "threshold 0 clears a recorded usage warning",
			pv:        newPV(pvName, hostpathtest.Annotation(hostpathv1.AnnotationHealth, hostpathv1.HealthUsageHigh)),
			threshold: -1,
			steps:     []step{{states: rounds(2, high), wantEvents: healthy}},
		},
		{
			name:      "threshold 100: full only",
			pv:        newPV(pvName),
			threshold: 100,
			steps: []step{
				{states: []state{high}},
				{states: rounds(2, state{volumes: []managerapi.Volume{sizedVolume(dir, 32*mi, 32*mi)}}), wantEvents: warn(ReasonUsageHigh), wantHealth: hostpathv1.HealthUsageHigh},
			},
		},
		{
			name: "a volume whose size is not enforced is never high",
			pv:   newPV(pvName, hostpathtest.Annotation(hostpathv1.AnnotationSizeEnforcement, hostpathv1.EnforcementNone)),
			steps: []step{
				{states: rounds(2, state{volumes: []managerapi.Volume{{Name: dir, SizeBytes: 32 * mi}}})},
				{states: []state{noDir}, wantEvents: warn(ReasonDirectoryMissing), wantHealth: hostpathv1.HealthDirectoryMissing},
			},
		},
		{
			name: "a PV this instance's cache does not see Bound yet: the claim hears too",
			pv:   newPV(pvName, hostpathtest.Phase(v1.VolumePending), hostpathtest.ReclaimPolicy(v1.PersistentVolumeReclaimDelete)),
			steps: []step{
				{states: []state{readOnly}, wantEvents: warn(ReasonPoolReadOnly), wantHealth: hostpathv1.HealthPoolReadOnly},
			},
		},
		{
			name: "a Released Retain PV: events on the PV only",
			pv:   newPV(pvName, hostpathtest.Phase(v1.VolumeReleased), hostpathtest.ReclaimPolicy(v1.PersistentVolumeReclaimRetain)),
			steps: []step{
				{states: rounds(2, noDir), wantEvents: []string{"pv/pv-a Warning VolumeDirectoryMissing"}, wantHealth: hostpathv1.HealthDirectoryMissing},
			},
		},
		{
			name: "a Released Delete PV, whose directory is being removed, is not looked at",
			pv:   newPV(pvName, hostpathtest.Phase(v1.VolumeReleased), hostpathtest.ReclaimPolicy(v1.PersistentVolumeReclaimDelete)),
			steps: []step{
				{states: rounds(2, noDir)},
			},
		},
		{
			name: "multihost: this node's entry, next to another node's",
			pv: newPV(pvName, hostpathtest.Multihost(otherNode, selfNode),
				hostpathtest.Annotation(hostpathv1.AnnotationHealth, otherNode+"="+hostpathv1.HealthPoolReadOnly)),
			steps: []step{
				{states: rounds(2, quiet), wantHealth: otherNode + "=" + hostpathv1.HealthPoolReadOnly},
				{states: rounds(2, noDir), wantEvents: warn(ReasonDirectoryMissing),
					wantHealth: selfNode + "=" + hostpathv1.HealthDirectoryMissing + "," + otherNode + "=" + hostpathv1.HealthPoolReadOnly},
				{states: rounds(2, quiet), wantEvents: healthy, wantHealth: otherNode + "=" + hostpathv1.HealthPoolReadOnly},
			},
		},
		{
			name: "multihost: restart with this node's entry recorded",
			pv: newPV(pvName, hostpathtest.Multihost(selfNode, otherNode),
				hostpathtest.Annotation(hostpathv1.AnnotationHealth, selfNode+"="+hostpathv1.HealthPoolMissing)),
			steps: []step{
				{states: rounds(2, noPool), wantHealth: selfNode + "=" + hostpathv1.HealthPoolMissing},
				{states: []state{quiet}, wantEvents: healthy},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			threshold := DefaultWarningThreshold
			switch {
			case tc.threshold < 0:
				threshold = 0
			case tc.threshold > 0:
				threshold = tc.threshold
			}
			mgr := newManager(nil, nil, nil, nil)
			f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{tc.pv}, func(c *Config) { c.WarningThreshold = threshold })
			for i, st := range tc.steps {
				for _, s := range st.states {
					vols := map[string][]managerapi.Volume{testPool: s.volumes}
					set(mgr, vols, map[string]error{testPool: s.listErr}, map[string]bool{testPool: s.readOnly}, s.hostErr)
					_ = f.refresher.refresh(ctx) // failures are the states'
					f.syncCache(t)
				}
				if got := names(f.events.take()); !slices.Equal(got, st.wantEvents) {
					t.Errorf("step %d: events = %q, want %q", i, got, st.wantEvents)
				}
				if got := f.pv(t, pvName).Annotations[hostpathv1.AnnotationHealth]; got != st.wantHealth {
					t.Errorf("step %d: %s = %q, want %q", i, hostpathv1.AnnotationHealth, got, st.wantHealth)
				}
			}
		})
	}
}

// TestHealthRestart checks that a new Refresher over PVs that carry the
// conditions the first one recorded emits nothing and writes nothing.
func TestHealthRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pvs := []*v1.PersistentVolume{newPV("pv-high"), newPV("pv-gone"), newPV("pv-quiet"), newPV("pv-shared", hostpathtest.Multihost(selfNode, otherNode))}
	mgr := newManager(map[string][]managerapi.Volume{testPool: {
		sizedVolume("pv-high-dir", 10*mi, 10*mi), enforced("pv-quiet-dir", mi),
	}}, nil, nil, nil)
	first := newFixture(t, mgr, nil, nil, pvs)
	if err := first.refresher.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(first.events.take()); got != 6 {
		t.Errorf("first refresher: %d events, want 6 (3 PVs and their claims)", got)
	}
	first.syncCache(t)
	var recorded []*v1.PersistentVolume
	for _, pv := range pvs {
		recorded = append(recorded, first.pv(t, pv.Name))
	}

	second := newFixture(t, mgr, nil, nil, recorded)
	for range 3 {
		if err := second.refresher.refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(second.events.take()); len(got) != 0 {
		t.Errorf("restarted refresher: events %q, want none", got)
	}
	if got := writes(t, second.kube); len(got) != 0 {
		t.Errorf("restarted refresher: writes %q, want none", got)
	}
}

// TestHealthMessages checks what the events say: the node, the pool, the
// directory and its path, and the figures.
func TestHealthMessages(t *testing.T) {
	tests := []struct {
		name      string
		pv        *v1.PersistentVolume
		state     state
		wantParts []string
	}{
		{
			name: "usage high",
			pv:   newPV("pv-a"),
			// 29.5/32 is 92.2%: shown rounded down.
			state: state{volumes: []managerapi.Volume{sizedVolume("pv-a-dir", 32*mi, 29*mi+mi/2)}},
			wantParts: []string{`Volume pv-a uses 29.5Mi of its 32Mi limit (92%, warning threshold 90%)`,
				`on node "node-a", pool "default", directory "pv-a-dir" (/var/hp/default/pv-a-dir)`, "EDQUOT"},
		},
		{
			name:      "directory missing",
			pv:        newPV("pv-a"),
			state:     state{volumes: []managerapi.Volume{}},
			wantParts: []string{`Volume pv-a has no directory on node "node-a", pool "default", directory "pv-a-dir" (/var/hp/default/pv-a-dir)`, "cannot start"},
		},
		{
			name:      "pool read-only",
			pv:        newPV("pv-a"),
			state:     state{volumes: []managerapi.Volume{enforced("pv-a-dir", 0)}, readOnly: true},
			wantParts: []string{`Volume pv-a cannot be written on node "node-a", pool "default", directory "pv-a-dir" (/var/hp/default/pv-a-dir)`, "read-only"},
		},
		{
			name:      "pool missing",
			pv:        newPV("pv-a"),
			state:     state{listErr: poolGone},
			wantParts: []string{`Volume pv-a cannot be reached on node "node-a", pool "default", directory "pv-a-dir"`, "PoolNotFound", "/var/hp/default does not exist"},
		},
		{
			name:      "healthy again",
			pv:        newPV("pv-a", hostpathtest.Annotation(hostpathv1.AnnotationHealth, hostpathv1.HealthDirectoryMissing)),
			state:     state{volumes: []managerapi.Volume{enforced("pv-a-dir", 0)}},
			wantParts: []string{`Volume pv-a is healthy again on node "node-a", pool "default", directory "pv-a-dir" (/var/hp/default/pv-a-dir) (was DirectoryMissing)`},
		},
		{
			name:      "multihost: the node is named",
			pv:        newPV("pv-a", hostpathtest.Multihost(otherNode, selfNode)),
			state:     state{volumes: []managerapi.Volume{}},
			wantParts: []string{`on node "node-a", pool "default", directory "pv-a-dir"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			mgr := newManager(nil, nil, nil, nil)
			set(mgr, map[string][]managerapi.Volume{testPool: tc.state.volumes}, map[string]error{testPool: tc.state.listErr},
				map[string]bool{testPool: tc.state.readOnly}, nil)
			f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{tc.pv})
			if err := f.refresher.refresh(ctx); err != nil {
				t.Fatal(err)
			}
			events := f.events.take()
			if len(events) != 2 || events[0].message != events[1].message {
				t.Fatalf("events = %+v, want one on the PV and one on the claim, with one message", events)
			}
			for _, part := range tc.wantParts {
				if !strings.Contains(events[0].message, part) {
					t.Errorf("message %q, want %q in it", events[0].message, part)
				}
			}
		})
	}
}

// TestHealthMultihostConflict checks that the patch of a multihost PV
// carries the cache's resourceVersion, and that a conflict (another node's
// instance wrote first) raises no event and is tried again at the next
// refresh, with the other node's entry kept.
func TestHealthMultihostConflict(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(map[string][]managerapi.Volume{testPool: {}}, nil, nil, nil)
	f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{newPV("pv-a", hostpathtest.Multihost(selfNode, otherNode))})
	var versions []string
	conflicts := 1
	f.kube.PrependReactor("patch", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		versions = append(versions, readPatch(t, a.(k8stesting.PatchAction).GetPatch()).Metadata.ResourceVersion)
		if conflicts > 0 {
			conflicts--
			// Another node's instance recorded its own condition.
			// The reactor runs under the clientset's lock: the tracker
			// is called directly.
			obj, err := f.kube.Tracker().Get(pvResource, "", "pv-a")
			if err != nil {
				t.Fatal(err)
			}
			pv := obj.(*v1.PersistentVolume).DeepCopy()
			pv.Annotations[hostpathv1.AnnotationHealth] = otherNode + "=" + hostpathv1.HealthPoolReadOnly
			pv.ResourceVersion = "8"
			if err := f.kube.Tracker().Update(pvResource, pv, ""); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewConflict(v1.Resource("persistentvolumes"), "pv-a", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})

	if err := f.refresher.refresh(ctx); err != nil {
		t.Errorf("refresh with a conflict = %v, want nil", err)
	}
	if got := f.events.take(); len(got) != 0 {
		t.Errorf("events after a conflict = %q, want none", names(got))
	}
	f.syncCache(t)
	if err := f.refresher.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"pv/pv-a Warning VolumeDirectoryMissing", "pvc/team-a/pv-a-claim Warning VolumeDirectoryMissing"}
	if got := names(f.events.take()); !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if got, want := versions, []string{"7", "8"}; !slices.Equal(got, want) {
		t.Errorf("patches' resourceVersions = %q, want %q", got, want)
	}
	wantHealth := selfNode + "=" + hostpathv1.HealthDirectoryMissing + "," + otherNode + "=" + hostpathv1.HealthPoolReadOnly
	if got := f.pv(t, "pv-a").Annotations[hostpathv1.AnnotationHealth]; got != wantHealth {
		t.Errorf("%s = %q, want %q", hostpathv1.AnnotationHealth, got, wantHealth)
	}
}

func TestUsageHigh(t *testing.T) {
	tests := []struct {
		used, size int64
		threshold  int
		was        bool
		want       bool
	}{
		{used: 89, size: 100, threshold: 90},
		{used: 90, size: 100, threshold: 90, want: true},
		{used: 100, size: 100, threshold: 100, want: true},
		{used: 99, size: 100, threshold: 100},
		{used: 100, size: 100, threshold: 0},
		{used: 100, size: 0, threshold: 90},
		{used: -1, size: 100, threshold: 1},
		{used: 85, size: 100, threshold: 90, was: true, want: true},
		{used: 84, size: 100, threshold: 90, was: true},
		{used: 3, size: 100, threshold: 6, was: true, want: true},
		{used: 2, size: 100, threshold: 6, was: true},
		{used: 1 << 62, size: 1 << 62, threshold: 90, want: true},
	}
	for _, tc := range tests {
		if got := usageHigh(tc.used, tc.size, tc.threshold, tc.was); got != tc.want {
			t.Errorf("usageHigh(%d, %d, %d, %v) = %v, want %v", tc.used, tc.size, tc.threshold, tc.was, got, tc.want)
		}
	}
}

func TestHealthValue(t *testing.T) {
	node := newPV("pv-a")
	shared := newPV("pv-b", hostpathtest.Multihost(selfNode, otherNode))
	tests := []struct {
		pv    *v1.PersistentVolume
		value string
		conds map[string]string
		// again is what healthValue writes back.
		again string
	}{
		{pv: node, value: "", conds: map[string]string{}, again: ""},
		{pv: node, value: "DirectoryMissing", conds: map[string]string{selfNode: "DirectoryMissing"}, again: "DirectoryMissing"},
		{pv: shared, value: "node-b=PoolReadOnly, node-a=UsageHigh,", conds: map[string]string{selfNode: "UsageHigh", otherNode: "PoolReadOnly"},
			again: "node-a=UsageHigh,node-b=PoolReadOnly"},
		{pv: shared, value: "node-a=", conds: map[string]string{}, again: ""},
	}
	for _, tc := range tests {
		pv := tc.pv.DeepCopy()
		pv.Annotations[hostpathv1.AnnotationHealth] = tc.value
		conds := readHealth(pv)
		if !maps.Equal(conds, tc.conds) {
			t.Errorf("readHealth(%q) = %v, want %v", tc.value, conds, tc.conds)
		}
		if got := healthValue(pv, conds); got != tc.again {
			t.Errorf("healthValue(readHealth(%q)) = %q, want %q", tc.value, got, tc.again)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{1023, "1023"},
		{1024, "1Ki"},
		{32 * mi, "32Mi"},
		{29*mi + mi/10, "29.1Mi"},
		{1536 * mi, "1.5Gi"},
	}
	for _, tc := range tests {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
