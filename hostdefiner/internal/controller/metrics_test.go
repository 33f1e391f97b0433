package controller

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi/managertest"
)

// hostdefiner_definitions counts the cached definitions by phase.
func TestMetricsDefinitionsByPhase(t *testing.T) {
	f := newStandardFixture(t)
	f.addNode(newNode("node-2"))
	f.addNode(newNode("node-3"))
	f.managers.Fail(managertest.Failure{Node: "node-3", Method: managertest.Host, Err: errBoom})
	pending := readyDefinition("node-4", "default", t0)
	pending.Status.Phase = hostpathv1.PhasePendingForDeletion
	failed := readyDefinition("node-5", "default", t0)
	failed.Status.Phase = hostpathv1.PhaseError
	fresh := readyDefinition("node-6", "default", t0)
	fresh.Status = hostpathv1.HostDefinitionStatus{} // not tried yet: no phase
	f.definitions = append(f.definitions, readyDefinition("node-1", "default", t0), pending, failed, fresh)
	f.newController()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(f.metrics); err != nil {
		t.Fatalf("register: %v", err)
	}

	compare := func(ready, creating, deleting, errored int) {
		t.Helper()
		want := `# HELP hostdefiner_definitions HostDefinitions by phase (the elected host definer's cache).
# TYPE hostdefiner_definitions gauge
hostdefiner_definitions{phase="Error"} ` + strconv.Itoa(errored) + `
hostdefiner_definitions{phase="PendingForCreation"} ` + strconv.Itoa(creating) + `
hostdefiner_definitions{phase="PendingForDeletion"} ` + strconv.Itoa(deleting) + `
hostdefiner_definitions{phase="Ready"} ` + strconv.Itoa(ready) + `
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hostdefiner_definitions"); err != nil {
			t.Error(err)
		}
	}
	compare(1, 0, 1, 1)

	f.run(Key{Node: "node-2", Pool: "default"}) // Ready
	f.run(Key{Node: "node-3", Pool: "default"}) // PendingForCreation
	compare(2, 1, 1, 1)

	const tries = `# HELP hostdefiner_tries_total Define and undefine tries, by action (define, undefine).
# TYPE hostdefiner_tries_total counter
hostdefiner_tries_total{action="define"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(tries), "hostdefiner_tries_total"); err != nil {
		t.Error(err)
	}

	// syncTimed observes each sync.
	f.clock.Step(time.Minute)
	if err := f.c.syncTimed(f.ctx, Key{Node: "node-3", Pool: "default"}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(f.metrics, "hostdefiner_sync_duration_seconds"); n != 1 {
		t.Errorf("hostdefiner_sync_duration_seconds has %d series, want 1 (result=success)", n)
	}
}
