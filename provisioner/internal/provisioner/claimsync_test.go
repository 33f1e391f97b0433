package provisioner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// TestClaimSync checks that the claim sync does each effect once, and only
// on the instance it belongs to: the events of claimCases, and the
// selected-node patch, over repeated syncs.
func TestClaimSync(t *testing.T) {
	for _, tc := range claimCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, f, c := tc.setUp(t)
			for range 3 {
				f.syncClaim(ctx, t, c, 0)
			}
			hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), tc.wantEvents)
			actions := f.kube.Actions()
			if !tc.wantPatch {
				if len(actions) > 0 {
					t.Errorf("API actions = %v, want none", actions)
				}
				return
			}
			patches := hostpathtest.Patches(actions, "")
			if len(patches) != 1 || len(actions) != 1 {
				t.Fatalf("API actions = %v, want one patch", actions)
			}
			checkSelectNodePatch(t, patches[0], c)
		})
	}
}

// TestClaimSyncPinnedWaitForFirstConsumer follows a pinned
// WaitForFirstConsumer claim: the Qualifier says no until the sync has set
// selected-node, then yes.
func TestClaimSyncPinnedWaitForFirstConsumer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := claim("wffc", hostpathv1.AnnotationProvisionOnNode+"="+selfNode)
	f := newFixture(t, responsibilitytest.Instances{On: []string{selfNode}}, append(append(testNodes(), testClasses()...), c)...)
	if f.prov.ShouldProvision(ctx, c) {
		t.Fatal("ShouldProvision before the sync = true, want false")
	}
	c = f.syncClaim(ctx, t, c, 0)
	if got := c.Annotations[storagehelpers.AnnSelectedNode]; got != selfNode {
		t.Fatalf("selected-node after the sync = %q, want %q", got, selfNode)
	}
	if !f.prov.ShouldProvision(ctx, c) {
		t.Error("ShouldProvision after the sync = false, want true")
	}
}

// TestClaimSyncBoundClaim checks that a bound claim gets nothing, as the
// library does not ask the Qualifier about it either.
func TestClaimSyncBoundClaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := claim("wffc", hostpathv1.AnnotationProvisionOnNode+"="+selfNode, hostpathv1.AnnotationKubevirtProvisionOnNode+"="+otherNode)
	c.Spec.VolumeName = "pv"
	f := newFixture(t, responsibilitytest.Instances{Wins: true}, append(append(testNodes(), testClasses()...), c)...)
	f.syncClaim(ctx, t, c, 0)
	if events, actions := hostpathtest.Events(f.recorder), f.kube.Actions(); len(events) > 0 || len(actions) > 0 {
		t.Errorf("events = %q, API actions = %v; want none", events, actions)
	}
}

// TestClaimSyncPatchFailure checks the failures of the selected-node patch:
// a conflict (the claim changed: its update queues it again) is no error, any
// other failure is retried; neither emits NodeSelected.
func TestClaimSyncPatchFailure(t *testing.T) {
	resource := schema.GroupResource{Resource: "persistentvolumeclaims"}
	tests := []struct {
		name         string
		err          error
		wantRequeues int
	}{
		{name: "conflict", err: apierrors.NewConflict(resource, "data", errors.New("changed"))},
		{name: "claim deleted", err: apierrors.NewNotFound(resource, "data")},
		{name: "server error is retried", err: apierrors.NewInternalError(errors.New("boom")), wantRequeues: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := claim("wffc", hostpathv1.AnnotationProvisionOnNode+"="+selfNode)
			f := newFixture(t, responsibilitytest.Instances{}, append(append(testNodes(), testClasses()...), c)...)
			f.kube.PrependReactor("patch", "persistentvolumeclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			f.syncClaim(ctx, t, c, tc.wantRequeues)
			if events := hostpathtest.Events(f.recorder); len(events) > 0 {
				t.Errorf("events = %q, want none", events)
			}
		})
	}
}

// TestClaimSyncReportsOnce checks that an instance reports a problem of a
// claim once, a new problem again, and forgets a deleted claim.
func TestClaimSyncReportsOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := claim("immediate")
	f := newFixture(t, responsibilitytest.Instances{Wins: true}, append(append(testNodes(), testClasses()...), c)...)
	for range 3 {
		f.syncClaim(ctx, t, c, 0)
	}
	hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), []string{"Warning " + ReasonNoNode})

	// A changed problem is reported again.
	c = c.DeepCopy()
	c.Annotations[hostpathv1.AnnotationProvisionOnNode] = "ghost"
	if err := errors.Join(f.kube.Tracker().Update(claimsResource, c, c.Namespace), f.claims.Update(c)); err != nil {
		t.Fatal(err)
	}
	f.syncClaim(ctx, t, c, 0)
	hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), []string{"Warning " + ReasonNodeNotFound})

	// Once the claim is deleted, a new claim with the same UID is
	// reported again.
	f.sync.claimDeleted(c)
	f.syncClaim(ctx, t, c, 0)
	hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), []string{"Warning " + ReasonNodeNotFound})
}

// claimsResource is the resource of claims on the fake API server.
var claimsResource = v1.SchemeGroupVersion.WithResource("persistentvolumeclaims")

// syncClaim queues c as its event handler does, syncs it through the queue,
// checks that it was retried wantRequeues times, and then, like the
// informer, puts the claim from the fake API server in the cache and
// returns it.
func (f *fixture) syncClaim(ctx context.Context, t *testing.T, c *v1.PersistentVolumeClaim, wantRequeues int) *v1.PersistentVolumeClaim {
	t.Helper()
	f.sync.enqueue(c)
	if !f.sync.queue.ProcessNextWorkItem(ctx) {
		t.Fatal("ProcessNextWorkItem = false, want true")
	}
	key := c.Namespace + "/" + c.Name
	if got := f.sync.queue.NumRequeues(key); got != wantRequeues {
		t.Errorf("requeues of %s = %d, want %d", key, got, wantRequeues)
	}
	obj, err := f.kube.Tracker().Get(claimsResource, c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.claims.Update(obj); err != nil {
		t.Fatal(err)
	}
	return obj.(*v1.PersistentVolumeClaim)
}

// checkSelectNodePatch checks that p sets selected-node of c to selfNode
// with the field manager, guarded by c's resourceVersion.
func checkSelectNodePatch(t *testing.T, p clienttesting.PatchActionImpl, c *v1.PersistentVolumeClaim) {
	t.Helper()
	if p.Name != c.Name || p.Namespace != c.Namespace || p.PatchOptions.FieldManager != FieldManager {
		t.Errorf("patch of %s/%s with field manager %q, want %s/%s with %q", p.Namespace, p.Name, p.PatchOptions.FieldManager, c.Namespace, c.Name, FieldManager)
	}
	var body struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(p.Patch, &body); err != nil {
		t.Fatal(err)
	}
	if body.Metadata.Annotations[storagehelpers.AnnSelectedNode] != selfNode || body.Metadata.ResourceVersion != c.ResourceVersion {
		t.Errorf("patch = %s, want selected-node %q at resourceVersion %q", p.Patch, selfNode, c.ResourceVersion)
	}
}

// TestControlPlaneNode checks that a claim of a node without an instance
// learns why when the node is a control-plane node (tainted or labelled
// node-role.kubernetes.io/control-plane): control-plane nodes are opt-in,
// through the kustomize component. A pinned claim gets NoProvisionerOnNode
// and keeps its node; a WaitForFirstConsumer claim the scheduler placed
// there goes back to the scheduler. Other nodes without an instance are
// not called control-plane nodes.
func TestControlPlaneNode(t *testing.T) {
	const controlPlane = "node-m" // its name says nothing of its role
	tainted := node(controlPlane, controlPlane)
	tainted.Spec.Taints = []v1.Taint{{Key: controlPlaneRole, Effect: v1.TaintEffectNoSchedule}}
	labelled := node(controlPlane, controlPlane)
	labelled.Labels[controlPlaneRole] = ""
	worker := node(controlPlane, controlPlane) // a plain node of that name
	optIn := []string{"is a control-plane node", ControlPlaneComponent, "control-plane nodes are opt-in"}
	tests := []struct {
		name      string
		node      *v1.Node
		claim     []string // class name, then annotations as key=value
		wantEvent string   // "Type Reason"
		want      []string // in the event's message
		// wantReschedule: Provision gives the claim back to the
		// scheduler, saying the same.
		wantReschedule bool
		notWant        string
	}{
		{name: "pinned, tainted", node: tainted, claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + controlPlane},
			wantEvent: "Warning " + ReasonNoInstance, want: append(optIn, "pick a node that is not a control-plane node")},
		{name: "pinned by the kubevirt annotation, labelled only", node: labelled, claim: []string{"immediate", hostpathv1.AnnotationKubevirtProvisionOnNode + "=" + controlPlane},
			wantEvent: "Warning " + ReasonNoInstance, want: optIn},
		{name: "pinned WaitForFirstConsumer claim, tainted", node: tainted, claim: []string{"wffc", hostpathv1.AnnotationProvisionOnNode + "=" + controlPlane, storagehelpers.AnnSelectedNode + "=" + controlPlane},
			wantEvent: "Warning " + ReasonNoInstance, want: optIn},
		{name: "selected by the scheduler, tainted", node: tainted, claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=" + controlPlane},
			wantEvent: "Warning " + ReasonRescheduling, want: append(optIn, "removing "+storagehelpers.AnnSelectedNode), wantReschedule: true},
		{name: "pinned, a worker without an instance", node: worker, claim: []string{"immediate", hostpathv1.AnnotationProvisionOnNode + "=" + controlPlane},
			wantEvent: "Warning " + ReasonNoInstance, want: []string{"pick a node where the provisioner DaemonSet runs"}, notWant: "control-plane"},
		{name: "selected by the scheduler, a worker without an instance", node: worker, claim: []string{"wffc", storagehelpers.AnnSelectedNode + "=" + controlPlane},
			wantEvent: "Warning " + ReasonRescheduling, want: []string{"runs no hostpath provisioner"}, wantReschedule: true, notWant: "control-plane"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := claim(tc.claim[0], tc.claim[1:]...)
			f := newFixture(t, responsibilitytest.Instances{Wins: true, On: []string{selfNode, otherNode}},
				append(append(testNodes(), testClasses()...), tc.node, c)...)
			f.syncClaim(ctx, t, c, 0)
			events := hostpathtest.Events(f.recorder)
			hostpathtest.CheckEvents(t, events, []string{tc.wantEvent})
			checkMessage(t, "event", events[0], tc.want, tc.notWant)

			if !tc.wantReschedule {
				return
			}
			class, err := f.prov.cfg.Classes.Get(tc.claim[0])
			if err != nil {
				t.Fatal(err)
			}
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: class, PVName: testPVName, PVC: c})
			if pv != nil || state != controller.ProvisioningReschedule || err == nil {
				t.Fatalf("Provision = %v, %s, %v; want no volume, %s", pv, state, err, controller.ProvisioningReschedule)
			}
			checkMessage(t, "Provision error", err.Error(), tc.want, tc.notWant)
		})
	}
}

// checkMessage fails unless msg contains every string of want and not
// notWant (when set).
func checkMessage(t *testing.T, what, msg string, want []string, notWant string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s %q does not say %q", what, msg, w)
		}
	}
	if notWant != "" && strings.Contains(msg, notWant) {
		t.Errorf("%s %q says %q", what, msg, notWant)
	}
}
