package resize

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// claimStatus is what the resizer writes of a claim's status, as text.
type claimStatus struct {
	capacity, allocated, state string
	conditions                 []string
}

func statusOf(c *v1.PersistentVolumeClaim) claimStatus {
	s := claimStatus{state: string(c.Status.AllocatedResourceStatuses[v1.ResourceStorage]), conditions: conditionTypes(c)}
	if q, ok := c.Status.Capacity[v1.ResourceStorage]; ok {
		s.capacity = q.String()
	}
	if q, ok := c.Status.AllocatedResources[v1.ResourceStorage]; ok {
		s.allocated = q.String()
	}
	return s
}

const (
	writeClaimStatus = "patch persistentvolumeclaims/status data"
	writePV          = "patch persistentvolumes pv-1"
)

func TestSync(t *testing.T) {
	untouched := claimStatus{capacity: "1Gi"}
	grownTo2Gi := claimStatus{capacity: "2Gi", allocated: "2Gi"}
	tests := []struct {
		name     string
		claim    *v1.PersistentVolumeClaim
		pv       *v1.PersistentVolume
		elected  bool
		errs     map[string]error
		missing  map[string]bool
		enforced string

		wantErr        bool
		wantCalls      []string
		wantWrites     []string
		wantPVCapacity string
		wantStatus     claimStatus
		// wantConditionMessage is contained in ControllerResizeError's.
		wantConditionMessage string
		wantEvents           [][]string
	}{
		{
			name:           "node mode: the manager grows the directory, then the PV and the claim",
			claim:          newClaim("data", "pv-1", "2Gi"),
			pv:             newPV("pv-1", "data"),
			enforced:       managerapi.EnforcementXFS,
			wantCalls:      []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:     []string{writeClaimStatus, writePV, writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     grownTo2Gi,
			wantEvents: [][]string{
				{"Normal Resizing", `volume "pv-1"`, `directory "pv-1-dir" in pool "default"`, "to 2Gi", `on node "node-a"`},
				{"Normal VolumeResizeSuccessful", `Resized volume "pv-1" to 2Gi on node "node-a"`, "size enforcement: xfs"},
			},
		},
		{
			name:           "conditions of others are kept",
			claim:          newClaim("data", "pv-1", "2Gi", withOtherCondition),
			pv:             newPV("pv-1", "data"),
			wantCalls:      []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:     []string{writeClaimStatus, writePV, writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     claimStatus{capacity: "2Gi", allocated: "2Gi", conditions: []string{"ModifyingVolume"}},
			wantEvents:     [][]string{{"Normal Resizing"}, {"Normal VolumeResizeSuccessful", "size enforcement: none"}},
		},
		{
			name:           "the PV of another node: nothing",
			claim:          newClaim("data", "pv-1", "2Gi"),
			pv:             newPV("pv-1", "data", hostpathtest.OnNode(otherNode)),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:           "the PV of another provisioner: nothing",
			claim:          newClaim("data", "pv-1", "2Gi"),
			pv:             newPV("pv-1", "data", hostpathtest.ProvisionedBy("example.com/other")),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:           "a class without allowVolumeExpansion: nothing",
			claim:          newClaim("data", "pv-1", "2Gi", hostpathtest.ClaimOfClass(fixedClass)),
			pv:             newPV("pv-1", "data"),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:           "a class that does not exist: nothing",
			claim:          newClaim("data", "pv-1", "2Gi", hostpathtest.ClaimOfClass("gone")),
			pv:             newPV("pv-1", "data"),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:           "a claim not bound: nothing",
			claim:          newClaim("data", "pv-1", "2Gi", pending),
			pv:             newPV("pv-1", "data"),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:           "a request no larger than the PV: nothing",
			claim:          newClaim("data", "pv-1", "1Gi"),
			pv:             newPV("pv-1", "data"),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:           "multihost, elected: every node grows, in parallel",
			claim:          newClaim("data", "pv-1", "2Gi"),
			pv:             newPV("pv-1", "data", hostpathtest.Multihost(selfNode, otherNode, thirdNode)),
			elected:        true,
			enforced:       managerapi.EnforcementBtrfs,
			wantCalls:      []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648", "node-b setSize default/pv-1-dir owner=pv-1 bytes=2147483648", "node-c setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:     []string{writeClaimStatus, writePV, writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     grownTo2Gi,
			wantEvents: [][]string{
				{"Normal Resizing", `on nodes "node-a", "node-b", "node-c"`},
				{"Normal VolumeResizeSuccessful", `on nodes "node-a", "node-b", "node-c"`, "size enforcement: btrfs"},
			},
		},
		{
			name:           "multihost, not elected: nothing",
			claim:          newClaim("data", "pv-1", "2Gi"),
			pv:             newPV("pv-1", "data", hostpathtest.Multihost(selfNode, otherNode)),
			wantPVCapacity: "1Gi",
			wantStatus:     untouched,
		},
		{
			name:                 "507: infeasible until the request changes, with the manager's message",
			claim:                newClaim("data", "pv-1", "100Gi"),
			pv:                   newPV("pv-1", "data"),
			errs:                 map[string]error{selfNode: managertest.Answer(managerapi.ReasonInsufficientStorage, `pool "default" on node "node-a" has 3Gi available, 99Gi requested`)},
			wantCalls:            []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=107374182400"},
			wantWrites:           []string{writeClaimStatus, writeClaimStatus},
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "100Gi", state: "ControllerResizeInfeasible", conditions: []string{"ControllerResizeError"}},
			wantConditionMessage: `pool "default" on node "node-a" has 3Gi available, 99Gi requested`,
			wantEvents: [][]string{
				{"Normal Resizing"},
				{"Warning VolumeResizeFailed", `Cannot grow volume "pv-1" to 100Gi`, `pool "default" on node "node-a" has 3Gi available, 99Gi requested`, "change the request"},
			},
		},
		{
			name:                 "multihost, 507 on one node: infeasible, the others grown",
			claim:                newClaim("data", "pv-1", "100Gi"),
			pv:                   newPV("pv-1", "data", hostpathtest.Multihost(selfNode, otherNode)),
			elected:              true,
			errs:                 map[string]error{otherNode: managertest.Answer(managerapi.ReasonInsufficientStorage, `pool "default" on node "node-b" has 3Gi available, 99Gi requested`)},
			wantCalls:            []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=107374182400", "node-b setSize default/pv-1-dir owner=pv-1 bytes=107374182400"},
			wantWrites:           []string{writeClaimStatus, writeClaimStatus},
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "100Gi", state: "ControllerResizeInfeasible", conditions: []string{"ControllerResizeError"}},
			wantConditionMessage: `node "node-b": pool "default" on node "node-b" has 3Gi available`,
			wantEvents:           [][]string{{"Normal Resizing"}, {"Warning VolumeResizeFailed", `node "node-b"`}},
		},
		{
			name:                 "409: volumes never shrink, infeasible",
			claim:                newClaim("data", "pv-1", "2Gi"),
			pv:                   newPV("pv-1", "data"),
			errs:                 map[string]error{selfNode: managertest.Answer(managerapi.ReasonConflict, `volume "pv-1-dir" in pool "default" has size 5Gi; it cannot shrink to 2Gi`)},
			wantCalls:            []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:           []string{writeClaimStatus, writeClaimStatus},
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "2Gi", state: "ControllerResizeInfeasible", conditions: []string{"ControllerResizeError"}},
			wantConditionMessage: "it cannot shrink to 2Gi",
			wantEvents:           [][]string{{"Normal Resizing"}, {"Warning VolumeResizeFailed", "cannot shrink", "volumes never shrink"}},
		},
		{
			name:                 "a request over the largest size: infeasible, no manager asked",
			claim:                newClaim("data", "pv-1", "10E"),
			pv:                   newPV("pv-1", "data"),
			wantWrites:           []string{writeClaimStatus},
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "10E", state: "ControllerResizeInfeasible", conditions: []string{"ControllerResizeError"}},
			wantConditionMessage: "more than the largest volume size",
			wantEvents:           [][]string{{"Warning VolumeResizeFailed", "more than the largest volume size"}},
		},
		{
			name:                 "infeasible at the request: waits for the user, nothing",
			claim:                newClaim("data", "pv-1", "100Gi", infeasibleAt("100Gi")),
			pv:                   newPV("pv-1", "data"),
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "100Gi", state: "ControllerResizeInfeasible", conditions: []string{"ControllerResizeError"}},
			wantConditionMessage: "no room",
		},
		{
			name:           "infeasible, then a smaller request: grown, the error cleared",
			claim:          newClaim("data", "pv-1", "2Gi", infeasibleAt("100Gi")),
			pv:             newPV("pv-1", "data"),
			wantCalls:      []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:     []string{writeClaimStatus, writePV, writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     grownTo2Gi,
			wantEvents:     [][]string{{"Normal Resizing"}, {"Normal VolumeResizeSuccessful"}},
		},
		{
			name:                 "manager unreachable: retried, still resizing, with the error",
			claim:                newClaim("data", "pv-1", "2Gi"),
			pv:                   newPV("pv-1", "data"),
			errs:                 map[string]error{selfNode: errors.New("dial tcp 10.0.0.1:8443: connect: connection refused")},
			wantErr:              true,
			wantCalls:            []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:           []string{writeClaimStatus, writeClaimStatus},
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "2Gi", state: "ControllerResizeInProgress", conditions: []string{"Resizing", "ControllerResizeError"}},
			wantConditionMessage: "connection refused",
			wantEvents:           [][]string{{"Normal Resizing"}, {"Warning VolumeResizeFailed", "will retry", "connection refused"}},
		},
		{
			name:                 "no manager on the node: retried",
			claim:                newClaim("data", "pv-1", "2Gi"),
			pv:                   newPV("pv-1", "data"),
			missing:              map[string]bool{selfNode: true},
			wantErr:              true,
			wantWrites:           []string{writeClaimStatus, writeClaimStatus},
			wantPVCapacity:       "1Gi",
			wantStatus:           claimStatus{capacity: "1Gi", allocated: "2Gi", state: "ControllerResizeInProgress", conditions: []string{"Resizing", "ControllerResizeError"}},
			wantConditionMessage: "no Ready manager pod",
			wantEvents:           [][]string{{"Normal Resizing"}, {"Warning VolumeResizeFailed", "find the manager"}},
		},
		{
			name:           "crash after the PV grew: only the claim is finished",
			claim:          newClaim("data", "pv-1", "2Gi", resizing("2Gi")),
			pv:             newPV("pv-1", "data", hostpathtest.Capacity("2Gi")),
			wantWrites:     []string{writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     grownTo2Gi,
			wantEvents:     [][]string{{"Normal VolumeResizeSuccessful", `Resized volume "pv-1" to 2Gi`}},
		},
		{
			name:           "crash after the claim was marked: the manager is asked again",
			claim:          newClaim("data", "pv-1", "2Gi", resizing("2Gi")),
			pv:             newPV("pv-1", "data"),
			wantCalls:      []string{"node-a setSize default/pv-1-dir owner=pv-1 bytes=2147483648"},
			wantWrites:     []string{writePV, writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     grownTo2Gi,
			wantEvents:     [][]string{{"Normal VolumeResizeSuccessful"}},
		},
		{
			name:           "multihost, crash after the PV grew: the elected instance finishes the claim",
			claim:          newClaim("data", "pv-1", "2Gi", resizing("2Gi")),
			pv:             newPV("pv-1", "data", hostpathtest.Multihost(selfNode, otherNode), hostpathtest.Capacity("2Gi")),
			elected:        true,
			wantWrites:     []string{writeClaimStatus},
			wantPVCapacity: "2Gi",
			wantStatus:     grownTo2Gi,
			wantEvents:     [][]string{{"Normal VolumeResizeSuccessful"}},
		},
		{
			name:           "finished already: nothing",
			claim:          newClaim("data", "pv-1", "2Gi", statusCapacity("2Gi")),
			pv:             newPV("pv-1", "data", hostpathtest.Capacity("2Gi")),
			wantPVCapacity: "2Gi",
			wantStatus:     claimStatus{capacity: "2Gi"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			mgrs := newManagers(tc.enforced, tc.errs, tc.missing)
			f := newFixture(t, responsibilitytest.Instances{Wins: tc.elected}, mgrs, []*v1.PersistentVolumeClaim{tc.claim}, []*v1.PersistentVolume{tc.pv})

			err := f.ctrl.sync(ctx, testNamespace+"/"+tc.claim.Name)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync() error = %v, want error %t", err, tc.wantErr)
			}
			if got := setSizes(mgrs); !slices.Equal(got, tc.wantCalls) {
				t.Errorf("manager calls = %q, want %q", got, tc.wantCalls)
			}
			if got := hostpathtest.DescribeWrites(f.kube.Actions()); !slices.Equal(got, tc.wantWrites) {
				t.Errorf("writes = %q, want %q", got, tc.wantWrites)
			}
			if got := f.pvCapacity(t, tc.pv.Name); got != tc.wantPVCapacity {
				t.Errorf("PV capacity = %s, want %s", got, tc.wantPVCapacity)
			}
			claim := f.claim(t, tc.claim.Name)
			if got := statusOf(claim); !equalStatus(got, tc.wantStatus) {
				t.Errorf("claim status = %+v, want %+v", got, tc.wantStatus)
			}
			if msg := conditionMessage(claim, v1.PersistentVolumeClaimControllerResizeError); !strings.Contains(msg, tc.wantConditionMessage) {
				t.Errorf("ControllerResizeError message = %q, want it to contain %q", msg, tc.wantConditionMessage)
			}
			hostpathtest.CheckEventParts(t, hostpathtest.Events(f.recorder), tc.wantEvents)

			// A second sync over the caches the informers would then hold
			// writes nothing, calls no manager on success or infeasible, and
			// emits no event but a failure's.
			f.refresh(t)
			before := len(setSizes(mgrs))
			err = f.ctrl.sync(ctx, testNamespace+"/"+tc.claim.Name)
			if tc.wantErr {
				return
			}
			if err != nil {
				t.Fatalf("second sync() error = %v", err)
			}
			if got := hostpathtest.DescribeWrites(f.kube.Actions()); len(got) > 0 {
				t.Errorf("second sync wrote %q, want nothing", got)
			}
			if got := setSizes(mgrs); len(got) != before {
				t.Errorf("second sync called the managers: %q", got[before:])
			}
			if got := hostpathtest.Events(f.recorder); len(got) > 0 {
				t.Errorf("second sync emitted %q", got)
			}
		})
	}
}

func equalStatus(a, b claimStatus) bool {
	return a.capacity == b.capacity && a.allocated == b.allocated && a.state == b.state && slices.Equal(a.conditions, b.conditions)
}

// TestSyncRetryKeepsTheError checks that a retried failure writes the
// claim's status once, and that success then clears it.
func TestSyncRetryKeepsTheError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgrs := newManagers("", map[string]error{selfNode: managertest.Answer(managerapi.ReasonInternal, "disk on fire")}, nil)
	f := newFixture(t, responsibilitytest.Instances{}, mgrs, []*v1.PersistentVolumeClaim{newClaim("data", "pv-1", "2Gi")}, []*v1.PersistentVolume{newPV("pv-1", "data")})
	key := testNamespace + "/data"
	if err := f.ctrl.sync(ctx, key); err == nil {
		t.Fatal("first sync() = nil, want the manager's error")
	}
	f.refresh(t)
	if err := f.ctrl.sync(ctx, key); err == nil {
		t.Fatal("second sync() = nil, want the manager's error")
	}
	if got := hostpathtest.DescribeWrites(f.kube.Actions()); len(got) > 0 {
		t.Errorf("a retry with the same error wrote %q, want nothing", got)
	}
	f.refresh(t)
	mgrs.ClearFailures()
	if err := f.ctrl.sync(ctx, key); err != nil {
		t.Fatalf("third sync() error = %v", err)
	}
	if got, want := statusOf(f.claim(t, "data")), (claimStatus{capacity: "2Gi", allocated: "2Gi"}); !equalStatus(got, want) {
		t.Errorf("claim status = %+v, want %+v", got, want)
	}
	if got, want := hostpathtest.DescribeWrites(f.kube.Actions()), []string{writePV, writeClaimStatus}; !slices.Equal(got, want) {
		t.Errorf("writes = %q, want %q", got, want)
	}
}

// TestStatusPatches checks the status patches of a growth: the mark, then
// the finish, each with the claim's resourceVersion.
func TestStatusPatches(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, responsibilitytest.Instances{}, newManagers("", nil, nil), []*v1.PersistentVolumeClaim{newClaim("data", "pv-1", "2Gi")}, []*v1.PersistentVolume{newPV("pv-1", "data")})
	if err := f.ctrl.sync(ctx, testNamespace+"/data"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"metadata":{"resourceVersion":"9"},"status":{"allocatedResourceStatuses":{"storage":"ControllerResizeInProgress"},"allocatedResources":{"storage":"2Gi"},"conditions":[{"type":"Resizing","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-23T05:41:03Z"}]}}`,
		`{"metadata":{"resourceVersion":"9"},"status":{"allocatedResourceStatuses":{"storage":null},"allocatedResources":{"storage":"2Gi"},"capacity":{"storage":"2Gi"},"conditions":null}}`,
	}
	if got := patches(f.kube); !slices.Equal(got, want) {
		t.Errorf("claim patches =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHandlers(t *testing.T) {
	claim := newClaim("data", "pv-1", "2Gi")
	bigger := newClaim("data", "pv-1", "3Gi")
	bigger.ResourceVersion = "10"
	statusOnly := newClaim("data", "pv-1", "2Gi", resizing("2Gi"))
	statusOnly.ResourceVersion = "10"
	tests := []struct {
		name  string
		pv    *v1.PersistentVolume
		event func(c *Controller)
		want  int
	}{
		{"added claim to grow", newPV("pv-1", "data"), func(c *Controller) { c.claimChanged(claim) }, 1},
		{"added claim of another node", newPV("pv-1", "data", hostpathtest.OnNode(otherNode)), func(c *Controller) { c.claimChanged(claim) }, 0},
		{"added claim with nothing to do", newPV("pv-1", "data", hostpathtest.Capacity("2Gi")), func(c *Controller) { c.claimChanged(newClaim("data", "pv-1", "1Gi")) }, 0},
		{"resync", newPV("pv-1", "data"), func(c *Controller) { c.claimUpdated(claim, claim) }, 1},
		{"request raised", newPV("pv-1", "data"), func(c *Controller) { c.claimUpdated(claim, bigger) }, 1},
		{"status changed only", newPV("pv-1", "data"), func(c *Controller) { c.claimUpdated(claim, statusOnly) }, 0},
		{"PV added after its claim", newPV("pv-1", "data"), func(c *Controller) { c.volumeChanged(newPV("pv-1", "data")) }, 1},
		{"multihost PV on any instance", newPV("pv-1", "data", hostpathtest.Multihost(otherNode)), func(c *Controller) { c.claimChanged(claim) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, responsibilitytest.Instances{}, newManagers("", nil, nil), []*v1.PersistentVolumeClaim{claim}, []*v1.PersistentVolume{tc.pv})
			tc.event(f.ctrl)
			if got := f.ctrl.queue.Len(); got != tc.want {
				t.Errorf("queued %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNextStep(t *testing.T) {
	tests := []struct {
		name     string
		claim    *v1.PersistentVolumeClaim
		pv       *v1.PersistentVolume
		want     step
		wantSize string
	}{
		{"request above the PV", newClaim("c", "pv", "2Gi"), newPV("pv", "c"), stepGrow, "2Gi"},
		{"request equal to the PV", newClaim("c", "pv", "1Gi"), newPV("pv", "c"), stepNone, ""},
		{"request below the PV", newClaim("c", "pv", "512Mi"), newPV("pv", "c"), stepNone, ""},
		{"infeasible at the request", newClaim("c", "pv", "2Gi", infeasibleAt("2Gi")), newPV("pv", "c"), stepNone, ""},
		{"infeasible at another size", newClaim("c", "pv", "3Gi", infeasibleAt("2Gi")), newPV("pv", "c"), stepGrow, "3Gi"},
		{"in progress at the request", newClaim("c", "pv", "2Gi", resizing("2Gi")), newPV("pv", "c"), stepGrow, "2Gi"},
		{"PV grown, claim marked", newClaim("c", "pv", "2Gi", resizing("2Gi")), newPV("pv", "c", hostpathtest.Capacity("2Gi")), stepFinish, "2Gi"},
		{"PV grown by someone else", newClaim("c", "pv", "2Gi"), newPV("pv", "c", hostpathtest.Capacity("2Gi")), stepFinish, "2Gi"},
		{"infeasible, then the request back to the capacity", newClaim("c", "pv", "1Gi", infeasibleAt("9Gi")), newPV("pv", "c"), stepFinish, "1Gi"},
		{"no request", newClaim("c", "pv", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil }), newPV("pv", "c"), stepNone, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, size := nextStep(tc.claim, tc.pv)
			if got != tc.want {
				t.Fatalf("nextStep() = %d, want %d", got, tc.want)
			}
			if tc.wantSize != "" && size.Cmp(resource.MustParse(tc.wantSize)) != 0 {
				t.Errorf("size = %s, want %s", size.String(), tc.wantSize)
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	size := resource.MustParse("2Gi")
	ok := func(node, enforcement string) result {
		return result{node: node, vol: &managerapi.Volume{Enforcement: enforcement}}
	}
	full := managertest.Answer(managerapi.ReasonInsufficientStorage, `pool "default" on node "b" has 1Gi available, 1Gi requested`)
	tests := []struct {
		name    string
		results []result
		want    kind
		wantMsg []string
	}{
		{"one node grown", []result{ok("a", "xfs")}, grown, []string{`Resized volume "pv" to 2Gi on node "a" (size enforcement: xfs)`}},
		{"nodes grown, mixed enforcement", []result{ok("a", ""), ok("b", "xfs"), ok("c", "xfs")}, grown, []string{`on nodes "a", "b", "c"`, "size enforcement: none, xfs"}},
		{"507", []result{{node: "b", err: full}}, infeasible, []string{`Cannot grow volume "pv" to 2Gi: node "b": pool "default" on node "b" has 1Gi available, 1Gi requested (507 InsufficientStorage)`, "must fit in the pool of every node: change the request"}},
		{"409", []result{{node: "a", err: managertest.Answer(managerapi.ReasonConflict, "cannot shrink")}}, infeasible, []string{"cannot shrink (409 Conflict)", "volumes never shrink"}},
		{"507 beats a transport error", []result{{node: "a", err: errors.New("timeout")}, {node: "b", err: full}}, infeasible, []string{`node "b"`}},
		{"transport error", []result{ok("a", ""), {node: "b", err: errors.New("connection refused")}}, failed, []string{`Failed to grow volume "pv" to 2Gi (will retry): node "b": connection refused`}},
		{"500", []result{{node: "a", err: managertest.Answer(managerapi.ReasonInternal, "boom")}}, failed, []string{"boom (500 Internal)"}},
		{"owner conflict is retried", []result{{node: "a", err: managertest.Answer(managerapi.ReasonOwnerConflict, "belongs to pv-x")}}, failed, []string{"belongs to pv-x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := outcomeOf(`volume "pv"`, size, tc.results)
			if o.kind != tc.want {
				t.Fatalf("kind = %d, want %d (%s)", o.kind, tc.want, o.message)
			}
			for _, part := range tc.wantMsg {
				if !strings.Contains(o.message, part) {
					t.Errorf("message = %q, want it to contain %q", o.message, part)
				}
			}
			if (o.err != nil) != (tc.want == failed) {
				t.Errorf("err = %v, want one only when failed", o.err)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("connection refused"), true},
		{managertest.Answer(managerapi.ReasonTooManyRequests, "busy"), true},
		{managertest.Answer(managerapi.ReasonInternal, "boom"), true},
		{managertest.Answer(managerapi.ReasonInsufficientStorage, "full"), false},
		{managertest.Answer(managerapi.ReasonConflict, "shrink"), false},
		{managertest.Answer(managerapi.ReasonOwnerConflict, "other"), false},
	} {
		if got := managerapi.Retryable(tc.err); got != tc.want {
			t.Errorf("client.Retryable(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func TestSizeBytes(t *testing.T) {
	if got, ok := sizeBytes(resource.MustParse("1500m")); !ok || got != 2 {
		t.Errorf("sizeBytes(1500m) = %d, %t, want 2, true (rounded up)", got, ok)
	}
	if _, ok := sizeBytes(resource.MustParse("10E")); ok {
		t.Error("sizeBytes(10E) fits, want not")
	}
}

// TestRunWatchError checks that Run returns at once, without a cache sync,
// when the handlers could not be registered.
func TestRunWatchError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, responsibilitytest.Instances{}, newManagers("", nil, nil), nil, nil)
	f.ctrl.watchErr = errors.New("stopped informer")
	if err := f.ctrl.Run(context.WithoutCancel(ctx), 1); err == nil || !strings.Contains(err.Error(), "stopped informer") {
		t.Errorf("Run() = %v, want the watch error", err)
	}
}
