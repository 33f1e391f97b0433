package controller

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/api/runtime/worker/workertest"
)

var (
	key1    = Key{Node: "node-1", Pool: hostpathv1.DefaultPool}
	def1    = hostpathv1.Name("node-1", hostpathv1.DefaultPool)
	errBoom = errors.New("connection refused")
)

// A new node where the DaemonSet runs gets a definition that one try makes
// Ready, with what the manager reported.
func TestDefineNewNode(t *testing.T) {
	f := newStandardFixture(t)

	r := f.run(key1)

	expectActions(t, r, "create hostdefinitions "+def1, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Normal Defined")
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
	def := f.mustDefinition(def1)
	if def.Spec.NodeName != "node-1" || def.Spec.Pool != "default" || def.Name != "default.node-1" {
		t.Errorf("definition %s is for %+v", def.Name, def.Spec)
	}
	expectPhase(t, def, hostpathv1.PhaseReady, 0)
	st := def.Status
	want := hostpathv1.HostDefinitionStatus{
		HostID: "host-node-1", MachineID: "machine-node-1", BootID: "boot-1",
		PoolPath: "/var/hostpath/default", CapacityBytes: 100 * gib, FreeBytes: 50 * gib, MinFreeBytes: gib,
		ManagerPod: managerPodName("node-1"), ManagerPodUID: managerPodUID("node-1"),
	}
	got := hostpathv1.HostDefinitionStatus{
		HostID: st.HostID, MachineID: st.MachineID, BootID: st.BootID,
		PoolPath: st.PoolPath, CapacityBytes: st.CapacityBytes, FreeBytes: st.FreeBytes, MinFreeBytes: st.MinFreeBytes,
		ManagerPod: st.ManagerPod, ManagerPodUID: st.ManagerPodUID,
	}
	if !equalStatus(got, want) {
		t.Errorf("status:\n  got  %+v\n  want %+v", got, want)
	}
	expectTime(t, "lastTryTime", st.LastTryTime, t0)
	expectTime(t, "definedTime", st.DefinedTime, t0)
	expectTime(t, "nextTryTime", st.NextTryTime, time.Time{})
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined, "host ID host-node-1")
	if msg := event(t, r, EventDefined); !strings.Contains(msg, "Node node-1 is defined on pool default") {
		t.Errorf("Defined event %q does not say what was defined", msg)
	}
	if len(def.Labels) != 0 {
		t.Errorf("labels = %v, want none", def.Labels)
	}
}

func equalStatus(a, b hostpathv1.HostDefinitionStatus) bool {
	return a.HostID == b.HostID && a.MachineID == b.MachineID && a.BootID == b.BootID && a.PoolPath == b.PoolPath &&
		a.CapacityBytes == b.CapacityBytes && a.FreeBytes == b.FreeBytes && a.MinFreeBytes == b.MinFreeBytes &&
		a.ManagerPod == b.ManagerPod && a.ManagerPodUID == b.ManagerPodUID
}

// Each pool named by a class of the provisioner (either of its names) gets
// a definition; classes of other provisioners and invalid pool names get
// none.
func TestDefinitionPerPool(t *testing.T) {
	f := newStandardFixture(t) // "standard": no pool parameter, the default pool
	f.classes = append(f.classes,
		newClass("fast", hostpathv1.DefaultProvisionerName, map[string]string{"pool": "fast", "dirMode": "0770"}),
		newClass("capacity", hostpathv1.CapacityProvisionerName, map[string]string{"pool": "capacity"}),
		newClass("other", otherProvider, map[string]string{"pool": "other"}),
		newClass("bad", hostpathv1.DefaultProvisionerName, map[string]string{"pool": "Bad_Pool"}),
		newClass("empty", hostpathv1.DefaultProvisionerName, map[string]string{"pool": ""}),
	)
	f.newController()

	pools, err := f.c.pools()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for p := range pools {
			if !yield(p) {
				return
			}
		}
	}); !slices.Equal(got, []string{"capacity", "default", "fast"}) {
		t.Errorf("pools = %q, want [capacity default fast]", got)
	}

	for _, tc := range []struct {
		pool    string
		defined bool
	}{
		{pool: "default", defined: true},
		{pool: "fast", defined: true},
		{pool: "capacity", defined: true},
		{pool: "other"},
		{pool: "Bad_Pool"},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			key := Key{Node: "node-1", Pool: tc.pool}
			name := hostpathv1.Name(key.Node, key.Pool)
			r := f.run(key)
			if !tc.defined {
				expectActions(t, r)
				expectEvents(t, r)
				expectNoCalls(t, r)
				if f.definition(name) != nil {
					t.Errorf("HostDefinition %s exists, want none", name)
				}
				return
			}
			expectActions(t, r, "create hostdefinitions "+name, "update hostdefinitions/status "+name)
			expectCalls(t, r, "node-1", "Host", "PreparePool "+tc.pool, "ListVolumes "+tc.pool)
			def := f.mustDefinition(name)
			expectPhase(t, def, hostpathv1.PhaseReady, 0)
			if def.Spec.Pool != tc.pool || def.Status.PoolPath != "/var/hostpath/"+tc.pool {
				t.Errorf("definition of pool %q at %q, want %q", def.Spec.Pool, def.Status.PoolPath, tc.pool)
			}
		})
	}
}

// A failed try leaves the definition PendingForCreation, with the reason
// in the Defined condition, an event and a next try after the backoff.
func TestDefineFailure(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(f *fixture)
		wantReason  string
		wantMessage []string
		wantCalls   []string
		check       func(t *testing.T, def *hostpathv1.HostDefinition)
	}{
		{
			name: "manager pod not Ready",
			setup: func(f *fixture) {
				f.pods[0].Status.Conditions[0].Status = v1.ConditionFalse
			},
			wantReason:  ReasonManagerNotReady,
			wantMessage: []string{`no Ready manager pod`, `on node "node-1"`},
		},
		{
			name: "manager pod without an IP yet",
			setup: func(f *fixture) {
				f.pods[0].Status.PodIP = ""
			},
			wantReason: ReasonManagerNotReady,
		},
		{
			name: "no client for the manager pod",
			setup: func(f *fixture) {
				f.managers.FailForNode("node-1", errors.New(`no fake manager for node "node-1"`))
			},
			wantReason:  ReasonManagerFailed,
			wantMessage: []string{"manager pod hostpath-manager-node-1", "no fake manager"},
		},
		{
			name: "GET /v1/host fails",
			setup: func(f *fixture) {
				f.managers.Fail(managertest.Failure{Node: "node-1", Method: managertest.Host, Err: errBoom})
			},
			wantReason:  ReasonManagerFailed,
			wantMessage: []string{"GET /v1/host", "connection refused"},
			wantCalls:   []string{"Host"},
		},
		{
			name: "PUT /v1/pools fails",
			setup: func(f *fixture) {
				f.managers.Fail(managertest.Failure{Node: "node-1", Method: managertest.PreparePool, Err: managerapi.Errorf("PoolNotFound", "pool default is not configured")})
			},
			wantReason:  ReasonPoolNotPrepared,
			wantMessage: []string{"PUT /v1/pools/default", "pool default is not configured"},
			wantCalls:   []string{"Host", "PreparePool default"},
			check: func(t *testing.T, def *hostpathv1.HostDefinition) {
				if def.Status.HostID != "host-node-1" || def.Status.BootID != "boot-1" {
					t.Errorf("host ID %q, boot ID %q: want what the host reported", def.Status.HostID, def.Status.BootID)
				}
			},
		},
		{
			name: "too little free space",
			setup: func(f *fixture) {
				setPool(f.managers.Node("node-1"), func(p *managerapi.Pool) { p.FreeBytes = gib / 2 })
			},
			wantReason:  ReasonInsufficientSpace,
			wantMessage: []string{"536870912 bytes free, less than the 1073741824", "--min-free-bytes"},
			wantCalls:   []string{"Host", "PreparePool default"},
			check: func(t *testing.T, def *hostpathv1.HostDefinition) {
				if def.Status.FreeBytes != gib/2 || def.Status.MinFreeBytes != gib || def.Status.CapacityBytes != 100*gib {
					t.Errorf("free %d, min %d, capacity %d", def.Status.FreeBytes, def.Status.MinFreeBytes, def.Status.CapacityBytes)
				}
			},
		},
		{
			name: "listing the volumes fails",
			setup: func(f *fixture) {
				f.managers.Fail(managertest.Failure{Node: "node-1", Method: managertest.ListVolumes, Err: errBoom})
			},
			wantReason:  ReasonBackfillFailed,
			wantMessage: []string{`list the volumes of pool "default" on node "node-1"`},
			wantCalls:   []string{"Host", "PreparePool default", "ListVolumes default"},
		},
		{
			name: "creating a multihost directory fails",
			setup: func(f *fixture) {
				f.volumes = append(f.volumes,
					multihostPV("pv-a", "standard", "default", []string{"node-0"}, nil, v1.PersistentVolumeReclaimDelete),
					multihostPV("pv-b", "standard", "default", []string{"node-0"}, nil, v1.PersistentVolumeReclaimDelete))
				f.managers.Fail(managertest.Failure{Node: "node-1", Method: managertest.CreateVolume, Name: "dir-pv-b", Err: managerapi.Errorf("InsufficientStorage", "disk full")})
			},
			wantReason:  ReasonBackfillFailed,
			wantMessage: []string{`1 of the 2 multihost volumes of pool "default" have no directory on node "node-1"`, "dir-pv-b", "disk full"},
			wantCalls:   []string{"Host", "PreparePool default", "ListVolumes default", "CreateVolume default/dir-pv-a", "CreateVolume default/dir-pv-b"},
			check: func(t *testing.T, def *hostpathv1.HostDefinition) {
				if def.Status.MultihostVolumes != 1 || def.Status.BackfilledVolumes != 1 {
					t.Errorf("multihost %d, backfilled %d; want 1, 1", def.Status.MultihostVolumes, def.Status.BackfilledVolumes)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandardFixture(t)
			tc.setup(f)

			r := f.run(key1)

			expectActions(t, r, "create hostdefinitions "+def1, "update hostdefinitions/status "+def1)
			expectEvents(t, r, "Warning DefinePending")
			expectCalls(t, r, "node-1", tc.wantCalls...)
			def := f.mustDefinition(def1)
			expectPhase(t, def, hostpathv1.PhasePendingForCreation, 1)
			expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, tc.wantReason, tc.wantMessage...)
			expectTime(t, "lastTryTime", def.Status.LastTryTime, t0)
			expectTime(t, "nextTryTime", def.Status.NextTryTime, t0.Add(10*time.Second))
			expectTime(t, "definedTime", def.Status.DefinedTime, time.Time{})
			msg := event(t, r, EventDefinePending)
			for _, want := range append([]string{"Try 1 of 5", tc.wantReason, "next try in 10s"}, tc.wantMessage...) {
				if !strings.Contains(msg, want) {
					t.Errorf("DefinePending event %q does not contain %q", msg, want)
				}
			}
			if tc.check != nil {
				tc.check(t, def)
			}
			// No PV is recorded as holding the node after a failed try.
			for _, pv := range f.volumes {
				if got := f.volume(pv.Name).Annotations[hostpathv1.AnnotationNodes]; got != "node-0" {
					t.Errorf("PV %s nodes = %q, want node-0", pv.Name, got)
				}
			}
		})
	}
}

// Tries back off exponentially up to MaxBackoff; after MaxTries the phase
// is Error with no further try, until the RetryAnnotation starts a new
// round.
func TestDefineRetries(t *testing.T) {
	f := newStandardFixture(t)
	f.managers.Fail(managertest.Failure{Node: "node-1", Method: managertest.Host, Err: errBoom})

	r := f.run(key1)
	expectCalls(t, r, "node-1", "Host")
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhasePendingForCreation, 1)
	expectTime(t, "nextTryTime", def.Status.NextTryTime, t0.Add(10*time.Second))

	// Before the next try time: no try, nothing written.
	f.clock.Step(9 * time.Second)
	r = f.run(key1)
	expectNoCalls(t, r)
	expectActions(t, r)
	expectEvents(t, r)
	expectPhase(t, f.mustDefinition(def1), hostpathv1.PhasePendingForCreation, 1)

	// Tries 2 to 4: the backoff doubles, 20s, 40s, then stays at 40s.
	f.clock.Step(time.Second)
	for i, wait := range []time.Duration{20 * time.Second, 40 * time.Second, 40 * time.Second} {
		tries := int32(i + 2)
		now := f.clock.Now()
		r = f.run(key1)
		expectCalls(t, r, "node-1", "Host")
		expectActions(t, r, "update hostdefinitions/status "+def1)
		expectEvents(t, r, "Warning DefinePending")
		def = f.mustDefinition(def1)
		expectPhase(t, def, hostpathv1.PhasePendingForCreation, tries)
		expectTime(t, "lastTryTime", def.Status.LastTryTime, now)
		expectTime(t, "nextTryTime", def.Status.NextTryTime, now.Add(wait))
		if msg := event(t, r, EventDefinePending); !strings.Contains(msg, "next try in "+wait.String()) {
			t.Errorf("try %d: event %q does not say the next try is in %s", tries, msg, wait)
		}
		f.clock.Step(wait)
	}

	// The fifth try is the last one: Error, with the retry hint.
	r = f.run(key1)
	expectCalls(t, r, "node-1", "Host")
	expectEvents(t, r, "Warning DefineError")
	def = f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseError, 5)
	expectTime(t, "nextTryTime", def.Status.NextTryTime, time.Time{})
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonManagerFailed, "connection refused")
	msg := event(t, r, EventDefineError)
	for _, want := range []string{
		"Gave up defining node node-1 on pool default after 5 tries", "ManagerFailed",
		`kubectl annotate hostdefinition default.node-1 hostdefiner.hostpath.dev/retry="$(date +%s)" --overwrite`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("DefineError event %q does not contain %q", msg, want)
		}
	}

	// In Error no try follows, however long it waits, even when the
	// manager has recovered.
	f.managers.ClearFailures()
	f.clock.Step(time.Hour)
	r = f.run(key1)
	expectNoCalls(t, r)
	expectActions(t, r)
	expectEvents(t, r)

	// A new value of the RetryAnnotation starts a new round.
	f.updateDefinition(def1, func(d *hostpathv1.HostDefinition) {
		d.Annotations = map[string]string{hostpathv1.RetryAnnotation: "1717243200"}
	})
	r = f.run(key1)
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
	expectEvents(t, r, "Normal Defined")
	def = f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseReady, 0)
	if def.Status.Retry != "1717243200" {
		t.Errorf("status.retry = %q, want the annotation's value", def.Status.Retry)
	}
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined)

	// The same value again starts nothing.
	r = f.run(key1)
	expectNoCalls(t, r)
	expectActions(t, r)
}

// A new round after Error starts again from the first try: a failure is
// try 1 of a new round, PendingForCreation.
func TestRetryAnnotationResetsTries(t *testing.T) {
	f := newStandardFixture(t)
	def := readyDefinition("node-1", "default", t0.Add(-time.Hour))
	def.Status.Phase, def.Status.Tries = hostpathv1.PhaseError, 5
	def.Annotations = map[string]string{hostpathv1.RetryAnnotation: "again"}
	f.definitions = append(f.definitions, def)
	f.managers.Fail(managertest.Failure{Node: "node-1", Method: managertest.Host, Err: errBoom})

	r := f.run(key1)
	expectCalls(t, r, "node-1", "Host")
	expectEvents(t, r, "Warning DefinePending")
	got := f.mustDefinition(def1)
	expectPhase(t, got, hostpathv1.PhasePendingForCreation, 1)
	expectTime(t, "nextTryTime", got.Status.NextTryTime, t0.Add(10*time.Second))
}

// A node that reports a host ID or machine ID another node's definition
// recorded is a clone: Error at once, naming both nodes.
func TestClonedHost(t *testing.T) {
	tests := []struct {
		name  string
		clone func(h *managerapi.Host)
		what  string
	}{
		{name: "host ID", clone: func(h *managerapi.Host) { h.HostID = "host-node-a" }, what: "host ID host-node-a"},
		{name: "machine ID", clone: func(h *managerapi.Host) { h.MachineID = "machine-node-a" }, what: "machine ID machine-node-a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.daemonSets = append(f.daemonSets, hostpathtest.ManagerDaemonSet(testNamespace, testDaemonSet))
			f.classes = append(f.classes, newClass("standard", hostpathv1.DefaultProvisionerName, nil))
			f.addNode(newNode("node-a"))
			mb := f.addNode(newNode("node-b"))
			mb.UpdateHost(tc.clone)
			f.definitions = append(f.definitions, readyDefinition("node-a", "default", t0.Add(-time.Hour)))

			keyB := Key{Node: "node-b", Pool: "default"}
			r := f.run(keyB)

			name := hostpathv1.Name("node-b", "default")
			expectActions(t, r, "create hostdefinitions "+name, "update hostdefinitions/status "+name)
			expectCalls(t, r, "node-b", "Host")
			expectEvents(t, r, "Warning DefineError")
			def := f.mustDefinition(name)
			expectPhase(t, def, hostpathv1.PhaseError, 1)
			expectTime(t, "nextTryTime", def.Status.NextTryTime, time.Time{})
			expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonClonedHost,
				`node "node-b" reports `+tc.what, `node "node-b" is a clone of node "node-a"`, hostpathv1.RetryAnnotation)
			if def.Status.HostID != "" || def.Status.MachineID != "" {
				t.Errorf("the clone recorded host ID %q, machine ID %q; want none", def.Status.HostID, def.Status.MachineID)
			}
			if msg := event(t, r, EventDefineError); !strings.Contains(msg, "after 1 tries") || !strings.Contains(msg, "clone") {
				t.Errorf("DefineError event %q", msg)
			}

			// The original stays Ready when it is verified again.
			f.clock.Step(time.Hour)
			r = f.run(Key{Node: "node-a", Pool: "default"})
			expectCalls(t, r, "node-a", "Host", "PreparePool default", "ListVolumes default")
			expectEvents(t, r)
			expectPhase(t, f.mustDefinition(hostpathv1.Name("node-a", "default")), hostpathv1.PhaseReady, 0)
		})
	}
}

// When both definitions recorded the same host ID, the younger one is the
// clone, whichever is verified first.
func TestClonedHostBothRecorded(t *testing.T) {
	for _, order := range [][]string{{"node-a", "node-b"}, {"node-b", "node-a"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			f := newFixture(t)
			f.daemonSets = append(f.daemonSets, hostpathtest.ManagerDaemonSet(testNamespace, testDaemonSet))
			f.classes = append(f.classes, newClass("standard", hostpathv1.DefaultProvisionerName, nil))
			for _, n := range []string{"node-a", "node-b"} {
				m := f.addNode(newNode(n))
				m.UpdateHost(func(h *managerapi.Host) { h.HostID = "host-shared" })
			}
			older := readyDefinition("node-a", "default", t0.Add(-2*time.Hour))
			younger := readyDefinition("node-b", "default", t0.Add(-time.Hour))
			older.Status.HostID, younger.Status.HostID = "host-shared", "host-shared"
			f.definitions = append(f.definitions, older, younger)
			f.clock.Step(time.Hour) // both are due to be verified again

			for _, n := range order {
				f.run(Key{Node: n, Pool: "default"})
			}
			expectPhase(t, f.mustDefinition(older.Name), hostpathv1.PhaseReady, 0)
			def := f.mustDefinition(younger.Name)
			expectPhase(t, def, hostpathv1.PhaseError, 1)
			expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonClonedHost,
				`node "node-b" is a clone of node "node-a"`)
		})
	}
}

// A reboot (new manager pod, new boot ID) is reported and the host
// verified again; it stays Ready.
func TestReboot(t *testing.T) {
	f := newStandardFixture(t)
	def := readyDefinition("node-1", "default", t0.Add(-time.Hour))
	def.Status.ManagerPodUID = "uid-of-the-pod-before-the-reboot"
	f.definitions = append(f.definitions, def)
	f.managers.Node("node-1").UpdateHost(func(h *managerapi.Host) { h.BootID = "boot-2" })
	f.clock.Step(time.Minute)

	r := f.run(key1)

	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
	expectActions(t, r, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Normal Rebooted")
	if msg := event(t, r, EventRebooted); !strings.Contains(msg, "boot ID boot-2, was boot-1") {
		t.Errorf("Rebooted event %q does not name the boot IDs", msg)
	}
	got := f.mustDefinition(def1)
	expectPhase(t, got, hostpathv1.PhaseReady, 0)
	if got.Status.BootID != "boot-2" || got.Status.ManagerPodUID != managerPodUID("node-1") {
		t.Errorf("boot ID %q, manager pod UID %q; want boot-2, %s", got.Status.BootID, got.Status.ManagerPodUID, managerPodUID("node-1"))
	}
	expectTime(t, "lastTryTime", got.Status.LastTryTime, t0.Add(time.Minute))
	expectTime(t, "definedTime", got.Status.DefinedTime, t0) // still Ready since then
}

// A new manager pod without a reboot (a restart, a rolling update) is
// verified again silently.
func TestNewManagerPodWithoutReboot(t *testing.T) {
	f := newStandardFixture(t)
	def := readyDefinition("node-1", "default", t0.Add(-time.Hour))
	def.Status.ManagerPodUID = "uid-of-the-old-pod"
	f.definitions = append(f.definitions, def)

	r := f.run(key1)

	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
	expectActions(t, r, "update hostdefinitions/status "+def1)
	expectEvents(t, r)
	expectPhase(t, f.mustDefinition(def1), hostpathv1.PhaseReady, 0)
}

// While no manager pod serves on its node, a Ready definition stays Ready
// and no try is made, even when a re-verify is overdue.
func TestReadyWithoutServingManager(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *fixture)
	}{
		{name: "pod NotReady (crash loop, kubelet restart)", change: func(f *fixture) {
			f.updatePod("node-1", func(p *v1.Pod) { p.Status.Conditions[0].Status = v1.ConditionFalse })
		}},
		{name: "pod terminating (rolling update)", change: func(f *fixture) {
			f.updatePod("node-1", func(p *v1.Pod) {
				now := metav1.NewTime(t0)
				p.DeletionTimestamp = &now
			})
		}},
		{name: "pod gone", change: func(f *fixture) { f.deletePod("node-1") }},
		{name: "new pod not Ready yet", change: func(f *fixture) {
			f.deletePod("node-1")
			p := managerPod("node-1")
			p.UID = "uid-new"
			p.Status.PodIP, p.Status.Conditions = "", nil
			f.setObject(podsGVR, f.informers.Pods, p)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandardFixture(t)
			f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
			f.volumes = append(f.volumes, multihostPV("pv-new", "standard", "default", []string{"node-0"}, nil, v1.PersistentVolumeReclaimDelete))
			f.newController()
			tc.change(f)
			f.clock.Step(time.Hour)

			r := f.run(key1)

			expectNoCalls(t, r)
			expectActions(t, r)
			expectEvents(t, r)
			expectPhase(t, f.mustDefinition(def1), hostpathv1.PhaseReady, 0)
		})
	}
}

// A reboot that keeps the manager pod (its container starts again, the
// boot ID is new) is noticed at once: the pod became Ready again after the
// last try. A pod Ready since before it changes nothing.
func TestRebootSamePod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started time.Time
		reboot  bool
	}{
		{name: "Ready again after the last try", started: t0.Add(30 * time.Second), reboot: true},
		{name: "Ready since before the last try", started: t0.Add(-time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandardFixture(t)
			f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
			for _, p := range f.pods {
				if p.Spec.NodeName == "node-1" {
					p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(tc.started)}}
				}
			}
			f.managers.Node("node-1").UpdateHost(func(h *managerapi.Host) { h.BootID = "boot-2" })
			f.clock.Step(time.Minute)

			r := f.run(key1)

			if !tc.reboot {
				expectNoCalls(t, r)
				expectEvents(t, r)
				return
			}
			expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
			expectEvents(t, r, "Normal Rebooted")
			if got := f.mustDefinition(def1); got.Status.BootID != "boot-2" {
				t.Errorf("boot ID %q, want boot-2", got.Status.BootID)
			}
		})
	}
}

// A Ready definition is left alone until the re-verify period has passed.
func TestReadyReverify(t *testing.T) {
	f := newStandardFixture(t)
	f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))

	f.clock.Step(9 * time.Minute)
	r := f.run(key1)
	expectNoCalls(t, r)
	expectActions(t, r)
	expectEvents(t, r)

	f.clock.Step(time.Minute)
	r = f.run(key1)
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
	expectActions(t, r, "update hostdefinitions/status "+def1)
	expectEvents(t, r)
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseReady, 0)
	expectTime(t, "lastTryTime", def.Status.LastTryTime, t0.Add(10*time.Minute))
	expectTime(t, "definedTime", def.Status.DefinedTime, t0)
}

// The definition says how the node's pool enforces volume sizes, as its
// manager reports it.
func TestSizeEnforcementInStatus(t *testing.T) {
	for _, tc := range []struct{ kind, reason, want string }{
		{kind: "btrfs", want: "btrfs"},
		{reason: "tmpfs has no per-directory quotas", want: "none"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			f := newStandardFixture(t)
			setPool(f.managers.Node("node-1"), func(p *managerapi.Pool) { p.Enforcement, p.EnforcementReason = tc.kind, tc.reason })
			f.run(key1)
			def := f.mustDefinition(def1)
			if def.Status.SizeEnforcement != tc.want || def.Status.SizeEnforcementReason != tc.reason {
				t.Errorf("size enforcement %q (%q), want %q (%q)", def.Status.SizeEnforcement, def.Status.SizeEnforcementReason, tc.want, tc.reason)
			}
		})
	}
}

// A failed re-verify of a Ready definition starts a round of tries.
func TestReadyReverifyFails(t *testing.T) {
	f := newStandardFixture(t)
	f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
	setPool(f.managers.Node("node-1"), func(p *managerapi.Pool) { p.FreeBytes = 1 })
	f.clock.Step(time.Hour)

	r := f.run(key1)
	expectEvents(t, r, "Warning DefinePending")
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhasePendingForCreation, 1)
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonInsufficientSpace)
}

// A joining node gets every multihost directory of the pool it lacks, and
// is recorded in the PVs.
func TestBackfill(t *testing.T) {
	f := newStandardFixture(t)
	f.classes = append(f.classes,
		newClass("shared", hostpathv1.DefaultProvisionerName, map[string]string{"mode": "multihost", "dirMode": "2775", "enforceSize": "true"}),
		newClass("fast", hostpathv1.DefaultProvisionerName, map[string]string{"mode": "multihost", "pool": "fast"}))
	f.volumes = append(f.volumes,
		// Lacking on node-1: created.
		multihostPV("pv-a", "shared", "default", []string{"node-0"}, []string{"node-1"}, v1.PersistentVolumeReclaimDelete),
		multihostPV("pv-b", "standard", "default", []string{"node-0", "node-2"}, []string{"node-1", "node-3"}, v1.PersistentVolumeReclaimRetain),
		// Present on node-1 already (a multihost create reached it): only recorded.
		multihostPV("pv-c", "shared", "default", []string{"node-0"}, []string{"node-1"}, v1.PersistentVolumeReclaimDelete),
		// Lists node-1 already.
		multihostPV("pv-d", "shared", "default", []string{"node-0", "node-1"}, nil, v1.PersistentVolumeReclaimDelete),
		// Of another pool.
		multihostPV("pv-fast", "fast", "fast", []string{"node-0"}, nil, v1.PersistentVolumeReclaimDelete))
	nodeMode := multihostPV("pv-node", "standard", "default", nil, nil, v1.PersistentVolumeReclaimDelete)
	nodeMode.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeNode
	noMode := multihostPV("pv-nomode", "standard", "default", nil, nil, v1.PersistentVolumeReclaimDelete)
	delete(noMode.Annotations, hostpathv1.AnnotationMode)
	otherProv := multihostPV("pv-other", "standard", "default", nil, nil, v1.PersistentVolumeReclaimDelete)
	otherProv.Annotations[storagehelpers.AnnDynamicallyProvisioned] = otherProvider
	released := multihostPV("pv-released", "standard", "default", []string{"node-0"}, nil, v1.PersistentVolumeReclaimDelete)
	released.Status.Phase = v1.VolumeReleased
	f.volumes = append(f.volumes, nodeMode, noMode, otherProv, released)
	// pv-a has a size: its new directory gets it (and the class's
	// enforceSize). Each create names the PV's claim: pv-a's by its
	// annotations, pv-b's by its claimRef.
	for _, pv := range f.volumes {
		switch pv.Name {
		case "pv-a":
			pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")}
			pv.Annotations[hostpathv1.AnnotationClaimNamespace] = "team-a"
			pv.Annotations[hostpathv1.AnnotationClaimName] = "data-a"
		case "pv-b":
			pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "team-b", Name: "data-b"}
		}
	}
	m := f.managers.Node("node-1")
	for _, v := range []managerapi.Volume{
		{Name: "dir-pv-c", Pool: "default", Owner: "pv-c"},
		{Name: "dir-pv-d", Pool: "default", Owner: "pv-d"},
		{Name: "unrelated", Pool: "default", Owner: "pv-gone"},
	} {
		m.AddVolume(v)
	}

	r := f.run(key1)

	expectActions(t, r,
		"create hostdefinitions "+def1, "update hostdefinitions/status "+def1,
		"patch persistentvolumes pv-a", "patch persistentvolumes pv-b", "patch persistentvolumes pv-c")
	expectEvents(t, r, "Normal Defined", "Normal Backfilled")
	if msg := event(t, r, EventBackfilled); !strings.Contains(msg, "Created 2 missing multihost directories of pool default on node node-1") {
		t.Errorf("Backfilled event %q", msg)
	}
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default",
		"CreateVolume default/dir-pv-a", "CreateVolume default/dir-pv-b")
	wantCreates := []createCall{
		{pool: "default", name: "dir-pv-a", req: managerapi.CreateVolumeRequest{Owner: "pv-a", Mode: "02775", ReclaimPolicy: "Delete", RequiredBytes: 16 << 20, EnforceSize: true, Multihost: true,
			ClaimNamespace: "team-a", ClaimName: "data-a"}},
		{pool: "default", name: "dir-pv-b", req: managerapi.CreateVolumeRequest{Owner: "pv-b", Mode: "0777", ReclaimPolicy: "Retain", Multihost: true, ClaimName: "data-b"}},
	}
	if got := creates(r, "node-1"); !slices.Equal(got, wantCreates) {
		t.Errorf("CreateVolume calls:\n  got  %+v\n  want %+v", got, wantCreates)
	}
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseReady, 0)
	if def.Status.MultihostVolumes != 4 || def.Status.BackfilledVolumes != 2 {
		t.Errorf("multihost volumes %d, backfilled %d; want 4, 2", def.Status.MultihostVolumes, def.Status.BackfilledVolumes)
	}
	for _, tc := range []struct {
		pv, nodes, pending string
	}{
		{pv: "pv-a", nodes: "node-0,node-1"},
		{pv: "pv-b", nodes: "node-0,node-1,node-2", pending: "node-3"},
		{pv: "pv-c", nodes: "node-0,node-1"},
		{pv: "pv-d", nodes: "node-0,node-1"},
		{pv: "pv-fast", nodes: "node-0"},
		{pv: "pv-released", nodes: "node-0"},
	} {
		a := f.volume(tc.pv).Annotations
		pending, hasPending := a[hostpathv1.AnnotationPendingNodes]
		if a[hostpathv1.AnnotationNodes] != tc.nodes || pending != tc.pending || hasPending != (tc.pending != "") {
			t.Errorf("PV %s: nodes %q, pending %q (set %v); want %q, %q", tc.pv, a[hostpathv1.AnnotationNodes], pending, hasPending, tc.nodes, tc.pending)
		}
		if a[hostpathv1.AnnotationDirectory] != "dir-"+tc.pv {
			t.Errorf("PV %s: the patch changed other annotations: %v", tc.pv, a)
		}
	}

	// Everything is there now: the next sync has nothing to do.
	r = f.run(key1)
	expectNoCalls(t, r)
	expectActions(t, r)
}

// A directory of the same name owned by another PV is never taken over.
func TestBackfillOwnerConflict(t *testing.T) {
	f := newStandardFixture(t)
	f.volumes = append(f.volumes,
		multihostPV("pv-a", "standard", "default", []string{"node-0"}, []string{"node-1"}, v1.PersistentVolumeReclaimDelete),
		multihostPV("pv-b", "standard", "default", []string{"node-0"}, nil, v1.PersistentVolumeReclaimDelete))
	f.managers.Node("node-1").AddVolume(managerapi.Volume{Name: "dir-pv-a", Pool: "default", Owner: "pv-someone-else"})

	r := f.run(key1)

	expectActions(t, r, "create hostdefinitions "+def1, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Warning DefinePending")
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default", "CreateVolume default/dir-pv-b")
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhasePendingForCreation, 1)
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonBackfillFailed,
		`directory "dir-pv-a" of PersistentVolume pv-a belongs to pv-someone-else on node "node-1"`)
	if a := f.volume("pv-a").Annotations; a[hostpathv1.AnnotationNodes] != "node-0" || a[hostpathv1.AnnotationPendingNodes] != "node-1" {
		t.Errorf("PV pv-a was changed: %v", a)
	}
	if a := f.volume("pv-b").Annotations; a[hostpathv1.AnnotationNodes] != "node-0" {
		t.Errorf("PV pv-b was changed: %v", a)
	}
}

// A directory of a multihost volume's name without an owner record (made
// before owner records) is recorded as the volume's, with its claim's
// namespace, marked multihost, not created again; the adoption names the
// claim (claimName), which a manager of another node checks.
func TestBackfillRecordsUnownedDirectory(t *testing.T) {
	f := newStandardFixture(t)
	pv := multihostPV("pv-a", "standard", "default", []string{"node-0"}, []string{"node-1"}, v1.PersistentVolumeReclaimDelete)
	pv.Annotations[hostpathv1.AnnotationClaimNamespace] = "team-a"
	pv.Annotations[hostpathv1.AnnotationClaimName] = "data-a"
	f.volumes = append(f.volumes, pv)
	m := f.managers.Node("node-1")
	m.AddVolume(managerapi.Volume{Name: "dir-pv-a", Pool: "default"})

	r := f.run(key1)

	expectEvents(t, r, "Normal Defined")
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default", "SetOwner default/dir-pv-a pv-a multihost")
	if v, _ := m.Volume("default", "dir-pv-a"); v.ClaimNamespace != "team-a" {
		t.Errorf("the owner record names claim namespace %q, want team-a", v.ClaimNamespace)
	}
	want := managerapi.SetOwnerRequest{Owner: "pv-a", ReclaimPolicy: managerapi.ReclaimDelete, ClaimNamespace: "team-a", ClaimName: "data-a", Multihost: true}
	if got := setOwners(r, "node-1"); len(got) != 1 || got[0] != want {
		t.Errorf("SetOwner requests %+v, want one of %+v", got, want)
	}
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseReady, 0)
	if def.Status.MultihostVolumes != 1 || def.Status.BackfilledVolumes != 0 {
		t.Errorf("multihost %d, backfilled %d; want 1, 0", def.Status.MultihostVolumes, def.Status.BackfilledVolumes)
	}
	if a := f.volume("pv-a").Annotations; a[hostpathv1.AnnotationNodes] != "node-0,node-1" {
		t.Errorf("PV pv-a nodes = %q, want node-0,node-1", a[hostpathv1.AnnotationNodes])
	}
}

// A multihost volume made while a Ready node was not listed (it was being
// defined, or was unreachable) makes the node verified again and
// backfilled.
func TestReadyBackfillsNewVolume(t *testing.T) {
	f := newStandardFixture(t)
	f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
	f.volumes = append(f.volumes, multihostPV("pv-new", "standard", "default", []string{"node-0"}, []string{"node-1"}, v1.PersistentVolumeReclaimDelete))

	r := f.run(key1)

	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default", "CreateVolume default/dir-pv-new")
	expectActions(t, r, "update hostdefinitions/status "+def1, "patch persistentvolumes pv-new")
	expectEvents(t, r, "Normal Backfilled")
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseReady, 0)
	if def.Status.MultihostVolumes != 1 || def.Status.BackfilledVolumes != 1 {
		t.Errorf("multihost volumes %d, backfilled %d; want 1, 1", def.Status.MultihostVolumes, def.Status.BackfilledVolumes)
	}
	a := f.volume("pv-new").Annotations
	if a[hostpathv1.AnnotationNodes] != "node-0,node-1" {
		t.Errorf("nodes = %q, want node-0,node-1", a[hostpathv1.AnnotationNodes])
	}
	if _, ok := a[hostpathv1.AnnotationPendingNodes]; ok {
		t.Errorf("pending-nodes = %q, want the annotation removed", a[hostpathv1.AnnotationPendingNodes])
	}
}

// A node that leaves loses its definition; one that is only unhealthy,
// cordoned or restarting its manager keeps it.
func TestLeaving(t *testing.T) {
	tests := []struct {
		name        string
		change      func(f *fixture)
		wantDeleted bool
		wantWhy     string
	}{
		{
			name:        "Node deleted",
			change:      func(f *fixture) { f.deleteNode("node-1"); f.deletePod("node-1") },
			wantDeleted: true, wantWhy: "NodeDeleted",
		},
		{
			name: "relabelled hostpath.dev/manager=false",
			change: func(f *fixture) {
				// The manager pod is still there until the DaemonSet
				// controller deletes it.
				f.updateNode("node-1", func(n *v1.Node) { n.Labels[managerLabel] = "false" })
			},
			wantDeleted: true, wantWhy: "NodeAffinity",
		},
		{
			name: "untolerated NoExecute taint",
			change: func(f *fixture) {
				f.updateNode("node-1", func(n *v1.Node) {
					n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "example.com/drain", Effect: v1.TaintEffectNoExecute})
				})
			},
			wantDeleted: true, wantWhy: "example.com/drain:NoExecute",
		},
		{
			name: "cordoned",
			change: func(f *fixture) {
				f.updateNode("node-1", func(n *v1.Node) {
					n.Spec.Unschedulable = true
					n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
				})
			},
		},
		{
			name: "NotReady",
			change: func(f *fixture) {
				f.updateNode("node-1", func(n *v1.Node) {
					n.Status.Conditions[0].Status = v1.ConditionFalse
					n.Spec.Taints = append(n.Spec.Taints,
						v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
						v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute})
				})
				f.updatePod("node-1", func(p *v1.Pod) { p.Status.Conditions[0].Status = v1.ConditionFalse })
			},
		},
		{
			name: "unreachable",
			change: func(f *fixture) {
				f.updateNode("node-1", func(n *v1.Node) {
					n.Status.Conditions[0].Status = v1.ConditionUnknown
					n.Spec.Taints = append(n.Spec.Taints,
						v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoSchedule},
						v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute})
				})
			},
		},
		{
			name: "untolerated NoSchedule taint",
			change: func(f *fixture) {
				f.updateNode("node-1", func(n *v1.Node) {
					n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "hostpath.dev/fake-node", Value: "true", Effect: v1.TaintEffectNoSchedule})
				})
			},
		},
		{
			name:   "manager pod missing (rolling update, crash)",
			change: func(f *fixture) { f.deletePod("node-1") },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandardFixture(t)
			f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
			f.newController()
			tc.change(f)

			r := f.run(key1)

			expectNoCalls(t, r)
			if !tc.wantDeleted {
				expectActions(t, r)
				expectEvents(t, r)
				expectPhase(t, f.mustDefinition(def1), hostpathv1.PhaseReady, 0)
				return
			}
			expectActions(t, r, "delete hostdefinitions "+def1)
			expectEvents(t, r, "Normal Undefined")
			if f.definition(def1) != nil {
				t.Errorf("HostDefinition %s still exists", def1)
			}
			msg := event(t, r, EventUndefined)
			for _, want := range []string{"Node node-1 left pool default", tc.wantWhy, "Its directories and PersistentVolumes are kept"} {
				if !strings.Contains(msg, want) {
					t.Errorf("Undefined event %q does not contain %q", msg, want)
				}
			}
			// Deleted means gone: a second sync does not make it again,
			// even while the manager pod is still there.
			r = f.run(key1)
			expectActions(t, r)
			expectEvents(t, r)
		})
	}
}

// A new node gets a definition when the DaemonSet would start a pod there
// or a manager pod is there.
func TestNewNodePlacement(t *testing.T) {
	controlPlane := func(n *v1.Node) {
		n.Labels["node-role.kubernetes.io/control-plane"] = ""
		n.Spec.Taints = []v1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoSchedule}}
	}
	tests := []struct {
		name string
		node func(n *v1.Node)
		// ds changes the manager DaemonSet (nil: as in the base).
		ds          func(ds *appsv1.DaemonSet)
		withPod     bool
		wantCreated bool
	}{
		{
			name: "untolerated NoSchedule taint, no manager pod (an e2e fake node)",
			node: func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "hostpath.dev/fake-node", Value: "true", Effect: v1.TaintEffectNoSchedule}}
			},
		},
		{
			name: "untolerated NoSchedule taint added after the manager pod started",
			node: func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "example.com/maintenance", Effect: v1.TaintEffectNoSchedule}}
			},
			withPod: true, wantCreated: true,
		},
		{
			name: "labelled hostpath.dev/manager=false",
			node: func(n *v1.Node) { n.Labels[managerLabel] = "false" },
		},
		{
			name:    "labelled hostpath.dev/manager=false, its manager pod not deleted yet",
			node:    func(n *v1.Node) { n.Labels[managerLabel] = "false" },
			withPod: true,
		},
		{
			name: "untolerated NoExecute taint, its manager pod not evicted yet",
			node: func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "example.com/drain", Effect: v1.TaintEffectNoExecute}}
			},
			withPod: true,
		},
		{
			name: "control-plane node: the node agents are opt-in",
			node: controlPlane,
		},
		{
			name: "control-plane node with the control-plane component, no manager pod yet",
			node: controlPlane,
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations,
					v1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
			},
			wantCreated: true,
		},
		{
			name: "control-plane node whose manager pod still runs (installed with the component before)",
			node: controlPlane, withPod: true, wantCreated: true,
		},
		{
			name: "cordoned, no manager pod yet (the DaemonSet tolerates unschedulable)",
			node: func(n *v1.Node) {
				n.Spec.Unschedulable = true
				n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}
			},
			wantCreated: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ds := hostpathtest.ManagerDaemonSet(testNamespace, testDaemonSet)
			if tc.ds != nil {
				tc.ds(ds)
			}
			f.daemonSets = append(f.daemonSets, ds)
			f.classes = append(f.classes, newClass("standard", hostpathv1.DefaultProvisionerName, nil))
			n := newNode("node-1")
			tc.node(n)
			f.nodes = append(f.nodes, n)
			f.addManager("node-1")
			if tc.withPod {
				f.pods = append(f.pods, managerPod("node-1"))
			}

			r := f.run(key1)

			if !tc.wantCreated {
				expectActions(t, r)
				expectEvents(t, r)
				expectNoCalls(t, r)
				return
			}
			if len(r.actions) == 0 || r.actions[0] != "create hostdefinitions "+def1 {
				t.Errorf("actions %q, want a create first", r.actions)
			}
			if f.definition(def1) == nil {
				t.Errorf("HostDefinition %s was not created", def1)
			}
		})
	}
}

// A pool no class names any more loses its definitions.
func TestClassDeleted(t *testing.T) {
	f := newStandardFixture(t)
	f.classes = append(f.classes, newClass("fast", hostpathv1.DefaultProvisionerName, map[string]string{"pool": "fast"}),
		newClass("fast-shared", hostpathv1.DefaultProvisionerName, map[string]string{"pool": "fast", "mode": "multihost"}))
	f.definitions = append(f.definitions,
		readyDefinition("node-1", "default", t0.Add(-time.Hour)), readyDefinition("node-1", "fast", t0.Add(-time.Hour)))
	f.newController()
	keyFast := Key{Node: "node-1", Pool: "fast"}
	nameFast := hostpathv1.Name("node-1", "fast")

	// One of the two classes of the pool goes: the pool stays.
	f.deleteClass("fast")
	r := f.run(keyFast)
	expectActions(t, r)
	expectEvents(t, r)

	f.deleteClass("fast-shared")
	r = f.run(keyFast)
	expectNoCalls(t, r)
	expectActions(t, r, "delete hostdefinitions "+nameFast)
	expectEvents(t, r, "Normal Undefined")
	if msg := event(t, r, EventUndefined); !strings.Contains(msg, ReasonNoClass) || !strings.Contains(msg, `names pool "fast"`) {
		t.Errorf("Undefined event %q does not say no class names the pool", msg)
	}
	r = f.run(key1)
	expectActions(t, r)
	if f.definition(def1) == nil {
		t.Errorf("the definition of the default pool was deleted")
	}
}

// Without the manager DaemonSet nothing is decided: no definition is made
// or deleted.
func TestNoManagerDaemonSet(t *testing.T) {
	f := newFixture(t)
	f.classes = append(f.classes, newClass("standard", hostpathv1.DefaultProvisionerName, nil))
	f.addNode(newNode("node-1"))
	f.addNode(newNode("node-2"))
	n3 := newNode("node-3")
	n3.Labels[managerLabel] = "false"
	f.nodes = append(f.nodes, n3)
	f.definitions = append(f.definitions, readyDefinition("node-2", "default", t0.Add(-time.Hour)),
		readyDefinition("node-3", "default", t0.Add(-time.Hour)))
	f.clock.Step(time.Hour)

	for _, n := range []string{"node-1", "node-2", "node-3"} {
		r := f.run(Key{Node: n, Pool: "default"})
		expectActions(t, r)
		expectEvents(t, r)
		expectNoCalls(t, r)
	}
	if f.definition(def1) != nil {
		t.Errorf("HostDefinition %s was created", def1)
	}
}

// --allow-delete=false and the avoid-deletion label keep a definition of a
// node that leaves, with a condition and one event.
func TestUndefineBlocked(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(f *fixture)
		wantReason  string
		wantMessage string
		// wantRestore are the writes when the node is wanted again.
		wantRestore []string
	}{
		{
			name:        "allowDelete=false",
			setup:       func(f *fixture) { f.cfg.AllowDelete = false },
			wantReason:  ReasonAllowDeleteFalse,
			wantMessage: "--allow-delete=false",
			wantRestore: []string{"update hostdefinitions/status " + def1},
		},
		{
			name:        "avoid-deletion label on the node",
			setup:       func(f *fixture) { f.nodes[0].Labels[hostpathv1.AvoidDeletionLabel] = "true" },
			wantReason:  ReasonAvoidDeletion,
			wantMessage: "hostdefiner.hostpath.dev/avoid-deletion=true",
			// The label is copied onto the definition first.
			wantRestore: []string{"update hostdefinitions " + def1, "update hostdefinitions/status " + def1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandardFixture(t)
			f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
			tc.setup(f)
			f.newController()
			f.updateNode("node-1", func(n *v1.Node) { n.Labels[managerLabel] = "false" })

			r := f.run(key1)
			expectNoCalls(t, r)
			expectActions(t, r, "update hostdefinitions/status "+def1)
			expectEvents(t, r, "Warning UndefineBlocked")
			def := f.mustDefinition(def1)
			expectPhase(t, def, hostpathv1.PhaseReady, 0)
			expectCondition(t, def, hostpathv1.ConditionUndefineBlocked, metav1.ConditionTrue, tc.wantReason,
				"Node node-1 left pool default", tc.wantMessage, "the HostDefinition is kept")
			expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined)
			if msg := event(t, r, EventUndefineBlocked); !strings.Contains(msg, tc.wantMessage) {
				t.Errorf("UndefineBlocked event %q does not contain %q", msg, tc.wantMessage)
			}

			// Once only.
			f.clock.Step(time.Hour)
			r = f.run(key1)
			expectActions(t, r)
			expectEvents(t, r)

			// Wanted again: the condition goes.
			f.updateNode("node-1", func(n *v1.Node) { delete(n.Labels, managerLabel) })
			f.clock.SetTime(t0.Add(time.Minute)) // before the re-verify is due
			r = f.run(key1)
			expectNoCalls(t, r)
			expectActions(t, r, tc.wantRestore...)
			expectEvents(t, r)
			def = f.mustDefinition(def1)
			if c := condition(def, hostpathv1.ConditionUndefineBlocked); c != nil {
				t.Errorf("condition %s is still there: %+v", hostpathv1.ConditionUndefineBlocked, c)
			}
			expectPhase(t, def, hostpathv1.PhaseReady, 0)
		})
	}
}

// The node's avoid-deletion label is copied onto its definitions, so it
// still guards them once the Node is gone.
func TestAvoidDeletionLabelCopied(t *testing.T) {
	f := newStandardFixture(t)
	f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
	f.newController()

	f.updateNode("node-1", func(n *v1.Node) { n.Labels[hostpathv1.AvoidDeletionLabel] = "true" })
	r := f.run(key1)
	expectActions(t, r, "update hostdefinitions "+def1)
	expectNoCalls(t, r)
	if got := f.mustDefinition(def1).Labels[hostpathv1.AvoidDeletionLabel]; got != "true" {
		t.Fatalf("label %s = %q on the definition, want true", hostpathv1.AvoidDeletionLabel, got)
	}

	// Removed from the node: removed from the definition.
	f.updateNode("node-1", func(n *v1.Node) { delete(n.Labels, hostpathv1.AvoidDeletionLabel) })
	r = f.run(key1)
	expectActions(t, r, "update hostdefinitions "+def1)
	if _, ok := f.mustDefinition(def1).Labels[hostpathv1.AvoidDeletionLabel]; ok {
		t.Fatalf("label %s is still on the definition", hostpathv1.AvoidDeletionLabel)
	}

	// Back, then the Node goes: the definition stays.
	f.updateNode("node-1", func(n *v1.Node) { n.Labels[hostpathv1.AvoidDeletionLabel] = "true" })
	f.run(key1)
	f.deleteNode("node-1")
	f.deletePod("node-1")
	r = f.run(key1)
	expectActions(t, r, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Warning UndefineBlocked")
	def := f.mustDefinition(def1)
	expectCondition(t, def, hostpathv1.ConditionUndefineBlocked, metav1.ConditionTrue, ReasonAvoidDeletion, "NodeDeleted")
	expectPhase(t, def, hostpathv1.PhaseReady, 0)

	// A new node's definition gets the label in its first sync too.
	n2 := newNode("node-2")
	n2.Labels[hostpathv1.AvoidDeletionLabel] = "true"
	f.setObject(nodesGVR, f.informers.Nodes, n2)
	f.setObject(podsGVR, f.informers.Pods, managerPod("node-2"))
	f.addManager("node-2")
	name2 := hostpathv1.Name("node-2", "default")
	r = f.run(Key{Node: "node-2", Pool: "default"})
	if len(r.actions) == 0 || r.actions[0] != "create hostdefinitions "+name2 {
		t.Errorf("actions %q, want a create first", r.actions)
	}
	if got := f.mustDefinition(name2); got.Labels[hostpathv1.AvoidDeletionLabel] != "true" || got.Status.Phase != hostpathv1.PhaseReady {
		t.Errorf("new definition: labels %v, phase %q", got.Labels, got.Status.Phase)
	}
}

// The recovery procedure of the design: a definition in Error goes when
// its node's manager is undeployed (hostpath.dev/manager=false) and comes
// back Ready when it is deployed again.
func TestRecoveryProcedure(t *testing.T) {
	f := newStandardFixture(t)
	def := readyDefinition("node-1", "default", t0.Add(-time.Hour))
	def.Status.Phase, def.Status.Tries = hostpathv1.PhaseError, 5
	def.Status.Conditions[0] = metav1.Condition{Type: hostpathv1.ConditionDefined, Status: metav1.ConditionFalse,
		Reason: ReasonInsufficientSpace, Message: "full", LastTransitionTime: metav1.NewTime(t0)}
	f.definitions = append(f.definitions, def)
	f.newController()

	f.updateNode("node-1", func(n *v1.Node) { n.Labels[managerLabel] = "false" })
	f.deletePod("node-1")
	r := f.run(key1)
	expectActions(t, r, "delete hostdefinitions "+def1)
	expectEvents(t, r, "Normal Undefined")

	f.updateNode("node-1", func(n *v1.Node) { delete(n.Labels, managerLabel) })
	r = f.run(key1) // scheduled, manager pod not there yet: waits, no try
	expectActions(t, r, "create hostdefinitions "+def1, "update hostdefinitions/status "+def1)
	expectPhase(t, f.mustDefinition(def1), hostpathv1.PhasePendingForCreation, 0)

	pod := managerPod("node-1")
	pod.UID = "uid-redeployed"
	f.setObject(podsGVR, f.informers.Pods, pod)
	f.clock.Step(10 * time.Second)
	r = f.run(key1)
	expectEvents(t, r, "Normal Defined")
	got := f.mustDefinition(def1)
	expectPhase(t, got, hostpathv1.PhaseReady, 0)
	if got.Status.ManagerPodUID != "uid-redeployed" {
		t.Errorf("manager pod UID %q, want uid-redeployed", got.Status.ManagerPodUID)
	}
}

// queued drains the controller's queue (the keys added without a delay).
func queued(c *Controller) []string {
	var keys []string
	for _, k := range workertest.Queued(c.queue) {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	return keys
}

// The event handlers queue the (node, pool) keys an object concerns.
func TestEventHandlers(t *testing.T) {
	f := newStandardFixture(t)
	f.classes = append(f.classes, newClass("fast", hostpathv1.DefaultProvisionerName, map[string]string{"pool": "fast"}))
	f.addNode(newNode("node-2"))
	f.definitions = append(f.definitions,
		readyDefinition("node-1", "default", t0), readyDefinition("node-2", "default", t0),
		readyDefinition("node-1", "gone", t0)) // a pool no class names any more
	f.volumes = append(f.volumes, multihostPV("pv-a", "standard", "default", []string{"node-1"}, nil, v1.PersistentVolumeReclaimDelete))
	c := f.newController()
	otherPod := managerPod("node-2")
	otherPod.Labels = map[string]string{"app": "something-else"}
	otherDS := hostpathtest.ManagerDaemonSet(testNamespace, testDaemonSet)
	otherDS.Name = "something-else"

	tests := []struct {
		name string
		call func()
		want []string
	}{
		{name: "node", call: func() { c.onNode(f.nodes[0]) }, want: []string{"default/node-1", "fast/node-1", "gone/node-1"}},
		{name: "deleted node (tombstone)", call: func() {
			c.onNode(cache.DeletedFinalStateUnknown{Key: "node-2", Obj: f.nodes[1]})
		}, want: []string{"default/node-2", "fast/node-2"}},
		{name: "manager pod", call: func() { c.onPod(f.pods[1]) }, want: []string{"default/node-2", "fast/node-2"}},
		{name: "other pod", call: func() { c.onPod(otherPod) }},
		{name: "manager DaemonSet", call: func() { c.onDaemonSet(f.daemonSets[0]) },
			want: []string{"default/node-1", "default/node-2", "fast/node-1", "fast/node-2", "gone/node-1"}},
		{name: "other DaemonSet", call: func() { c.onDaemonSet(otherDS) }},
		{name: "class", call: func() { c.onClass(f.classes[1]) },
			want: []string{"default/node-1", "default/node-2", "fast/node-1", "fast/node-2", "gone/node-1"}},
		{name: "class of another provisioner", call: func() { c.onClass(newClass("x", otherProvider, nil)) }},
		{name: "definition", call: func() { c.onDefinition(f.definitions[2]) }, want: []string{"gone/node-1"}},
		{name: "multihost volume", call: func() { c.onVolume(f.volumes[0]) }, want: []string{"default/node-2"}},
		{name: "node-mode volume", call: func() {
			pv := f.volumes[0].DeepCopy()
			pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeNode
			c.onVolume(pv)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			queued(c)
			tc.call()
			if got := queued(c); !slices.Equal(got, tc.want) {
				t.Errorf("queued %q, want %q", got, tc.want)
			}
		})
	}
}

// A delete that fails is retried with backoff (PendingForDeletion), then
// given up (Error) until the RetryAnnotation changes.
func TestUndefineFailure(t *testing.T) {
	f := newStandardFixture(t)
	f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0.Add(-time.Hour)))
	f.newController()
	var failDelete atomic.Bool
	failDelete.Store(true)
	f.client.PrependReactor("delete", "hostdefinitions", func(core.Action) (bool, runtime.Object, error) {
		if failDelete.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	f.deleteNode("node-1")
	f.deletePod("node-1")

	r := f.run(key1)
	expectActions(t, r, "delete hostdefinitions "+def1, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Warning UndefinePending")
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhasePendingForDeletion, 1)
	expectTime(t, "nextTryTime", def.Status.NextTryTime, t0.Add(10*time.Second))
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonUndefineFailed, "etcdserver: request timed out")
	if msg := event(t, r, EventUndefinePending); !strings.Contains(msg, "Try 1 of 5 to undefine node node-1") || !strings.Contains(msg, "next try in 10s") {
		t.Errorf("UndefinePending event %q", msg)
	}

	// Not before the next try time.
	f.clock.Step(5 * time.Second)
	r = f.run(key1)
	expectActions(t, r)
	expectEvents(t, r)

	f.clock.Step(5 * time.Second)
	for i, wait := range []time.Duration{20 * time.Second, 40 * time.Second, 40 * time.Second} {
		tries := int32(i + 2)
		now := f.clock.Now()
		r = f.run(key1)
		expectActions(t, r, "delete hostdefinitions "+def1, "update hostdefinitions/status "+def1)
		expectEvents(t, r, "Warning UndefinePending")
		def = f.mustDefinition(def1)
		expectPhase(t, def, hostpathv1.PhasePendingForDeletion, tries)
		expectTime(t, "nextTryTime", def.Status.NextTryTime, now.Add(wait))
		f.clock.Step(wait)
	}

	r = f.run(key1)
	expectActions(t, r, "delete hostdefinitions "+def1, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Warning UndefineError")
	def = f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhaseError, 5)
	expectTime(t, "nextTryTime", def.Status.NextTryTime, time.Time{})
	if msg := event(t, r, EventUndefineError); !strings.Contains(msg, "Gave up undefining node node-1 after 5 tries") ||
		!strings.Contains(msg, "kubectl annotate hostdefinition default.node-1 hostdefiner.hostpath.dev/retry=") {
		t.Errorf("UndefineError event %q", msg)
	}

	// In Error: no more tries.
	failDelete.Store(false)
	f.clock.Step(time.Hour)
	r = f.run(key1)
	expectActions(t, r)
	expectEvents(t, r)

	// The RetryAnnotation starts a new round, which deletes it.
	f.updateDefinition(def1, func(d *hostpathv1.HostDefinition) {
		d.Annotations = map[string]string{hostpathv1.RetryAnnotation: "now"}
	})
	r = f.run(key1)
	expectActions(t, r, "delete hostdefinitions "+def1)
	expectEvents(t, r, "Normal Undefined")
	if f.definition(def1) != nil {
		t.Errorf("HostDefinition %s still exists", def1)
	}
}

// A definition PendingForDeletion whose node is wanted again starts a new
// round of define tries.
func TestPendingForDeletionWantedAgain(t *testing.T) {
	f := newStandardFixture(t)
	def := readyDefinition("node-1", "default", t0.Add(-time.Hour))
	next := metav1.NewTime(t0.Add(time.Minute))
	def.Status.Phase, def.Status.Tries, def.Status.NextTryTime = hostpathv1.PhasePendingForDeletion, 2, &next
	def.Status.Conditions[0] = metav1.Condition{Type: hostpathv1.ConditionDefined, Status: metav1.ConditionFalse,
		Reason: ReasonUndefineFailed, Message: "timed out", LastTransitionTime: metav1.NewTime(t0)}
	f.definitions = append(f.definitions, def)

	r := f.run(key1)
	expectCalls(t, r, "node-1", "Host", "PreparePool default", "ListVolumes default")
	expectEvents(t, r, "Normal Defined")
	got := f.mustDefinition(def1)
	expectPhase(t, got, hostpathv1.PhaseReady, 0)
	expectCondition(t, got, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined)
}

// A node whose manager pod does not exist yet waits without counting tries;
// a pod that exists but is not Ready counts; once a pod serves, the next
// sync tries at once, before the backoff is over.
func TestWaitForManagerPod(t *testing.T) {
	f := newStandardFixture(t)
	f.pods = nil
	f.newController()

	r := f.run(key1)
	expectActions(t, r, "create hostdefinitions "+def1, "update hostdefinitions/status "+def1)
	expectEvents(t, r, "Normal WaitingForManager")
	expectNoCalls(t, r)
	def := f.mustDefinition(def1)
	expectPhase(t, def, hostpathv1.PhasePendingForCreation, 0)
	expectCondition(t, def, hostpathv1.ConditionDefined, metav1.ConditionFalse, ReasonManagerNotReady, "waiting for the DaemonSet")

	r = f.run(key1)
	expectActions(t, r)

	pod := managerPod("node-1")
	pod.Status.Conditions = nil
	f.setObject(podsGVR, f.informers.Pods, pod)
	r = f.run(key1)
	expectEvents(t, r, "Warning DefinePending")
	expectPhase(t, f.mustDefinition(def1), hostpathv1.PhasePendingForCreation, 1)

	f.setObject(podsGVR, f.informers.Pods, managerPod("node-1"))
	r = f.run(key1)
	expectEvents(t, r, "Normal Defined")
	expectPhase(t, f.mustDefinition(def1), hostpathv1.PhaseReady, 0)
}

// A definition given up for want of a Ready or answering manager starts a
// new round by itself once a new manager pod serves; one given up for
// another reason waits for the retry annotation.
func TestErrorEndsWhenManagerServes(t *testing.T) {
	for _, tc := range []struct {
		reason string
		ready  bool
	}{
		{reason: ReasonManagerNotReady, ready: true},
		{reason: ReasonManagerFailed, ready: true},
		{reason: ReasonInsufficientSpace, ready: false},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			f := newStandardFixture(t)
			def := readyDefinition("node-1", "default", t0.Add(-time.Hour))
			def.Status.Phase, def.Status.Tries, def.Status.ManagerPodUID = hostpathv1.PhaseError, 5, ""
			def.Status.Conditions[0] = metav1.Condition{Type: hostpathv1.ConditionDefined, Status: metav1.ConditionFalse,
				Reason: tc.reason, Message: "given up", LastTransitionTime: metav1.NewTime(t0)}
			f.definitions = append(f.definitions, def)
			f.newController()

			f.run(key1)
			got := f.mustDefinition(def1)
			if ready := got.Status.Phase == hostpathv1.PhaseReady; ready != tc.ready {
				t.Errorf("phase %q after a manager pod serves, want Ready=%v", got.Status.Phase, tc.ready)
			}
		})
	}
}

// TestClaimNameOf: a backfill names the PV's claim by its annotation, else
// by its claimRef.
func TestClaimNameOf(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		annotation string
		claimRef   *v1.ObjectReference
		want       string
	}{
		{desc: "annotation", annotation: "data", claimRef: &v1.ObjectReference{Name: "other"}, want: "data"},
		{desc: "claimRef", claimRef: &v1.ObjectReference{Namespace: "ns", Name: "data"}, want: "data"},
		{desc: "neither"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pv := multihostPV("pv-a", "standard", "default", nil, nil, v1.PersistentVolumeReclaimDelete)
			if tc.annotation != "" {
				pv.Annotations[hostpathv1.AnnotationClaimName] = tc.annotation
			}
			pv.Spec.ClaimRef = tc.claimRef
			if got := claimNameOf(pv); got != tc.want {
				t.Errorf("claimNameOf = %q, want %q", got, tc.want)
			}
		})
	}
}
