package reclaim

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/managers/managerstest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

const thirdNode = "node-c"

// multihostPV returns a multihost PV of this provisioner under deletion
// (newPV's defaults), held on nodes and pending on pending ("": none),
// both annotations as written (so that a test can spell one badly).
func multihostPV(name, nodes, pending string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pendingOn := hostpathtest.PendingOn()
	if pending != "" {
		pendingOn = hostpathtest.PendingOn(pending)
	}
	return newPV(name, slices.Concat(mods, []func(*v1.PersistentVolume){
		hostpathtest.Multihost(), hostpathtest.Annotation(hostpathv1.AnnotationNodes, nodes), pendingOn})...)
}

// newMultihostFixture is a Controller over pv and nodes whose Managers
// are managers.
func newMultihostFixture(t *testing.T, elected bool, managers *managertest.Fake, pv *v1.PersistentVolume, nodes ...string) *controllerFixture {
	t.Helper()
	objects := []runtime.Object{pv}
	for _, n := range nodes {
		objects = append(objects, hostpathtest.Node(n))
	}
	kube := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	if err := factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(pv); err != nil {
		t.Fatal(err)
	}
	f := &controllerFixture{kube: kube, managers: managers, recorder: record.NewFakeRecorder(10),
		pvCache: factory.Core().V1().PersistentVolumes().Informer().GetIndexer()}
	f.ctrl = NewController(Config{
		ProvisionerNames: testNames, Node: selfNode, FieldManager: testFieldManager, Client: kube,
		Volumes: factory.Core().V1().PersistentVolumes(), Nodes: newFakeNodes(kube, nodes...),
		Instances: responsibilitytest.Instances{Wins: elected},
		Managers: func(node string) (Manager, error) {
			f.asked = append(f.asked, node)
			return managertest.For[Manager](managers)(node)
		},
		// Every existing node has a Ready definition of the pool.
		Targets:  managerstest.Targets{Ready: nodes},
		Recorder: f.recorder,
		Fanout:   fanout.Options{Attempts: 1},
	})
	t.Cleanup(f.ctrl.queue.ShutDown)
	return f
}

func TestSyncMultihost(t *testing.T) {
	kept := []string{otherFinalizer, hostpathv1.FinalizerDirectoryProtection}
	released := []string{otherFinalizer}
	deleteCall := []string{"delete default/shared-dir owner=shared ifEmpty=false"}
	retainCall := []string{"setOwner default/shared-dir owner=shared previous=shared retained=true policy=Retain"}
	tests := []struct {
		name     string
		pv       *v1.PersistentVolume
		nodes    []string // existing Nodes
		managers []string // nodes with a manager
		// deleteErrs and setOwnerErrs answer per node.
		deleteErrs, setOwnerErrs map[string]error
		notElected               bool

		wantErr        bool
		wantCalls      map[string][]string // per node
		wantFinalizers []string
		wantEvents     []string
		// wantLogged: as in TestSync.
		wantLogged []string
	}{
		{
			name: "instance not elected writes nothing", notElected: true,
			pv:    multihostPV("shared", "node-a,node-b", ""),
			nodes: []string{selfNode, otherNode}, managers: []string{selfNode, otherNode},
			wantFinalizers: kept,
		},
		{
			name:  "delete on every node, pending ones included, then the finalizer goes",
			pv:    multihostPV("shared", "node-a,node-b", thirdNode),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, otherNode, thirdNode},
			wantCalls:      map[string][]string{selfNode: deleteCall, otherNode: deleteCall, thirdNode: deleteCall},
			wantFinalizers: released,
			wantLogged:     []string{`DirectoryRemoved Removed the directory "shared-dir" in pool "default" on nodes "node-a", "node-b", "node-c"`},
		},
		{
			name:  "one node failing: retried, the event names it, finalizer kept",
			pv:    multihostPV("shared", "node-a,node-b,node-c", ""),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, otherNode, thirdNode},
			deleteErrs:     map[string]error{otherNode: managertest.Answer(managerapi.ReasonInternal, "test answer")},
			wantErr:        true,
			wantCalls:      map[string][]string{selfNode: deleteCall, otherNode: deleteCall, thirdNode: deleteCall},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "shared-dir" in pool "default" is not removed yet: node "node-b": PUT`},
		},
		{
			name:  "listed node without a reachable manager: retried, named",
			pv:    multihostPV("shared", "node-a", otherNode),
			nodes: []string{selfNode, otherNode}, managers: []string{selfNode},
			wantErr:        true,
			wantCalls:      map[string][]string{selfNode: deleteCall},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "shared-dir" in pool "default" is not removed yet: node "node-b": no manager serves`},
		},
		{
			name:  "node gone for good is skipped",
			pv:    multihostPV("shared", "node-a,node-gone", ""),
			nodes: []string{selfNode}, managers: []string{selfNode},
			wantCalls:      map[string][]string{selfNode: deleteCall},
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRemoved Removed the directory "shared-dir" in pool "default" on node "node-a"; the directory "shared-dir" in pool "default" was not removed on node "node-gone": the node no longer exists`},
		},
		{
			name:  "unlisted node with a manager (given the directory by the host definer, not recorded yet) is cleaned too; one without is skipped",
			pv:    multihostPV("shared", "node-a", ""),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, thirdNode},
			wantCalls:      map[string][]string{selfNode: deleteCall, thirdNode: deleteCall},
			wantFinalizers: released,
			wantLogged:     []string{`DirectoryRemoved Removed the directory "shared-dir" in pool "default" on nodes "node-a", "node-c"`},
		},
		{
			name:  "a directory gone (on an unlisted node), or of another owner, is done",
			pv:    multihostPV("shared", "node-a,node-c", ""),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, otherNode, thirdNode},
			deleteErrs: map[string]error{
				otherNode: managertest.Answer(managerapi.ReasonNotFound, "test answer"),
				thirdNode: managertest.OwnerConflict("pv-other"),
			},
			wantCalls:      map[string][]string{selfNode: deleteCall, otherNode: deleteCall, thirdNode: deleteCall},
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRemoved Removed the directory "shared-dir" in pool "default" on node "node-a"; the directory "shared-dir" in pool "default" was already gone on node "node-b"; the directory "shared-dir" in pool "default" was left in place: node "node-c": it belongs to PersistentVolume "pv-other"`},
		},
		{
			name:  "retain: marked retained on every node, then the finalizer goes",
			pv:    multihostPV("shared", "node-a,node-b", thirdNode, withPolicy(v1.PersistentVolumeReclaimRetain)),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, otherNode, thirdNode},
			wantCalls:      map[string][]string{selfNode: retainCall, otherNode: retainCall, thirdNode: retainCall},
			wantFinalizers: released,
			wantEvents:     []string{`Normal DirectoryRetained The directory "shared-dir" in pool "default" keeps its data on nodes "node-a", "node-b", "node-c", marked retained`},
		},
		{
			name:  "retain: a node failing or without a manager keeps the PV, named",
			pv:    multihostPV("shared", "node-a,node-b", thirdNode, withPolicy(v1.PersistentVolumeReclaimRetain)),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, otherNode},
			setOwnerErrs:   map[string]error{otherNode: managertest.Answer(managerapi.ReasonInternal, "test answer")},
			wantErr:        true,
			wantCalls:      map[string][]string{selfNode: retainCall, otherNode: retainCall},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRetained Waiting before the PersistentVolume can go: the directory "shared-dir" in pool "default" is not marked retained yet: node "node-b": PUT /v1/pools/default/volumes/x: manager answered 500 Internal: test answer; node "node-c": no manager serves`},
		},
		{
			name:  "delete: the pool missing on a listed node keeps the PV; on an unlisted one it is done",
			pv:    multihostPV("shared", "node-a,node-b", ""),
			nodes: []string{selfNode, otherNode, thirdNode}, managers: []string{selfNode, otherNode, thirdNode},
			deleteErrs: map[string]error{
				otherNode: managertest.Answer(managerapi.ReasonPoolNotFound, "test answer"),
				thirdNode: managertest.Answer(managerapi.ReasonPoolNotFound, "test answer"),
			},
			wantErr:        true,
			wantCalls:      map[string][]string{selfNode: deleteCall, otherNode: deleteCall, thirdNode: deleteCall},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "shared-dir" in pool "default" is not removed yet: node "node-b": pool "default" is missing on the node`},
		},
		{
			name:  "bound: nothing happens",
			pv:    multihostPV("shared", "node-a", "", hostpathtest.Phase(v1.VolumeBound)),
			nodes: []string{selfNode}, managers: []string{selfNode},
			wantFinalizers: kept,
		},
		{
			name:  "no directory annotation: finalizer removed with a warning",
			pv:    multihostPV("shared", "node-a", "", hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "")),
			nodes: []string{selfNode}, managers: []string{selfNode},
			wantFinalizers: released,
			wantEvents:     []string{"Warning DirectoryNotRemoved The PersistentVolume names no pool or directory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, logged := logContext(t)
			managers := newManagers([]*v1.PersistentVolume{tt.pv}, tt.managers...)
			for _, n := range tt.managers {
				failOn(managers, n, managertest.DeleteVolume, tt.deleteErrs[n])
				failOn(managers, n, managertest.SetOwner, tt.setOwnerErrs[n])
			}
			f := newMultihostFixture(t, !tt.notElected, managers, tt.pv, tt.nodes...)
			f.ctrl.queue.Add(tt.pv.Name)
			if !f.ctrl.queue.ProcessNextWorkItem(ctx) {
				t.Fatal("ProcessNextWorkItem() = false, want true")
			}
			if got, want := f.ctrl.queue.NumRequeues(tt.pv.Name), map[bool]int{true: 1}[tt.wantErr]; got != want {
				t.Errorf("requeues = %d, want %d", got, want)
			}
			for _, node := range tt.managers {
				if got := described(managers.Node(node).Calls()); !slices.Equal(got, tt.wantCalls[node]) {
					t.Errorf("calls on %s = %q, want %q", node, got, tt.wantCalls[node])
				}
			}
			if got := f.finalizers(t, tt.pv.Name); !slices.Equal(got, tt.wantFinalizers) {
				t.Errorf("finalizers = %q, want %q", got, tt.wantFinalizers)
			}
			if tt.notElected && len(hostpathtest.Writes(f.kube.Actions())) > 0 {
				t.Errorf("API writes = %v, want none", hostpathtest.Writes(f.kube.Actions()))
			}
			hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), tt.wantEvents)
			hostpathtest.CheckOutcomes(t, "logged outcome", logged(), tt.wantLogged)
		})
	}
}

func TestLocationOf(t *testing.T) {
	pv := multihostPV("shared", " node-a, ,node-b", "node-c")
	d, ok := locationOf(pv, testNames)
	if !ok || !d.Multihost || d.Pool != testPool || d.Directory != "shared-dir" ||
		strings.Join(d.Nodes, ",") != "node-a,node-b" || strings.Join(d.PendingNodes, ",") != "node-c" {
		t.Errorf("locationOf(multihost) = %+v, %v", d, ok)
	}
	if !d.Listed("node-c") || d.Listed("node-d") {
		t.Errorf("listed: node-c %t, node-d %t; want true, false", d.Listed("node-c"), d.Listed("node-d"))
	}
	if !d.holds(directory{node: "node-d", pool: testPool, name: "shared-dir"}) {
		t.Error("a multihost PV does not hold its directory on an unlisted node")
	}
	n, ok := locationOf(newPV("pv-1"), testNames)
	if !ok || n.Multihost || n.Node != selfNode || !n.holds(directory{node: selfNode, pool: testPool, name: "pv-1-dir"}) ||
		n.holds(directory{node: otherNode, pool: testPool, name: "pv-1-dir"}) {
		t.Errorf("locationOf(node mode) = %+v, %v", n, ok)
	}
	if _, ok := locationOf(pv, hostpathv1.NewProvisionerNames("example.com/other")); ok {
		t.Error("a PV of another provisioner counts as ours")
	}
	for _, p := range []*v1.PersistentVolume{
		multihostPV("shared", "node-a", "", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, hostpathv1.CapacityProvisionerName)),
		newPV("pv-3", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, hostpathv1.CapacityProvisionerName)),
	} {
		if _, ok := locationOf(p, testNames); !ok {
			t.Errorf("PV %s of the capacity-aware provisioner name does not count as ours", p.Name)
		}
	}
	if _, ok := locationOf(newPV("pv-2", hostpathtest.Annotation(hostpathv1.AnnotationMode, "future")), testNames); ok {
		t.Error("a PV of an unknown mode counts as ours")
	}
}
