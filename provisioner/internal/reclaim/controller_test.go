package reclaim

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// controllerFixture is a Controller on selfNode over fake caches.
type controllerFixture struct {
	ctrl     *Controller
	kube     *fake.Clientset
	managers *managertest.Fake
	asked    []string // nodes whose manager was asked for
	recorder *record.FakeRecorder
	// pvCache is the PV informer's cache, which the Controller reads.
	pvCache cache.Indexer
}

// newControllerFixture puts pvs and nodes in the clientset and in the
// informer caches.
func newControllerFixture(t *testing.T, inst responsibilitytest.Instances, managersErr error, pvs []*v1.PersistentVolume, nodes ...string) *controllerFixture {
	t.Helper()
	var objects []runtime.Object
	for _, pv := range pvs {
		objects = append(objects, pv)
	}
	for _, n := range nodes {
		objects = append(objects, hostpathtest.Node(n))
	}
	kube := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	for _, pv := range pvs {
		if err := factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(pv); err != nil {
			t.Fatal(err)
		}
	}
	f := &controllerFixture{kube: kube, managers: newManagers(pvs, nodes...), recorder: record.NewFakeRecorder(10),
		pvCache: factory.Core().V1().PersistentVolumes().Informer().GetIndexer()}
	f.ctrl = NewController(Config{
		ProvisionerNames: testNames,
		Node:             selfNode,
		FieldManager:     testFieldManager,
		Client:           kube,
		Volumes:          factory.Core().V1().PersistentVolumes(),
		Nodes:            newFakeNodes(kube, nodes...),
		Instances:        inst,
		Managers: func(node string) (Manager, error) {
			f.asked = append(f.asked, node)
			if managersErr != nil {
				return nil, managersErr
			}
			return managertest.For[Manager](f.managers)(node)
		},
		Recorder: f.recorder,
		Fanout:   fanout.Options{Attempts: 1},
	})
	t.Cleanup(f.ctrl.queue.ShutDown)
	return f
}

// finalizers returns the finalizers of the PV name on the fake API server.
func (f *controllerFixture) finalizers(t *testing.T, name string) []string {
	t.Helper()
	pv, err := f.kube.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv.Finalizers
}

func TestSync(t *testing.T) {
	kept := []string{otherFinalizer, hostpathv1.FinalizerDirectoryProtection}
	released := []string{otherFinalizer}
	tests := []struct {
		name        string
		pv          *v1.PersistentVolume
		nodes       []string // existing nodes, default selfNode and otherNode
		elected     bool
		deleteErr   error
		setOwnerErr error
		managersErr error

		wantErr        bool
		wantCalls      []string
		wantFinalizers []string
		wantEvents     []string
		// wantLogged are the outcomes logged instead of an event, each
		// "reason message" (a prefix of it).
		wantLogged []string
		// wantRecorded, when set, is hostpathv1.AnnotationRecordedPolicy on the
		// API server after the sync.
		wantRecorded string
	}{
		{
			name:           "delete policy: directory deleted as the PV's owner, finalizer removed",
			pv:             newPV("pv-1"),
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: released,
			wantLogged:     []string{`DirectoryRemoved Removed the directory "pv-1-dir" in pool "default" on node "node-a"`},
		},
		{
			name:           "delete policy: a 404 NotFound to the DELETE is not taken for a removal: retried",
			pv:             newPV("pv-1"),
			deleteErr:      managertest.Answer(managerapi.ReasonNotFound, "test answer"),
			wantErr:        true,
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not removed yet: the manager answered 404 NotFound`},
		},
		{
			name:           "delete policy: the pool missing on the node is not a removal: retried, named",
			pv:             newPV("pv-1"),
			deleteErr:      managertest.Answer(managerapi.ReasonPoolNotFound, "test answer"),
			wantErr:        true,
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not removed yet: pool "default" is missing on the node`},
		},
		{
			name:           "retain policy: the pool missing on the node keeps the PV",
			pv:             newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRetain)),
			setOwnerErr:    managertest.Answer(managerapi.ReasonPoolNotFound, "test answer"),
			wantErr:        true,
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRetained Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not marked retained yet: pool "default" is missing on the node`},
		},
		{
			name:           "delete policy: directory of another PV is left, warning, finalizer removed",
			pv:             newPV("pv-1"),
			deleteErr:      managertest.OwnerConflict("pv-other"),
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRemoved The directory "pv-1-dir" in pool "default" on node "node-a" was left in place: it belongs to PersistentVolume "pv-other"`},
		},
		{
			name:           "delete policy: directory without owner record is left, warning, finalizer removed",
			pv:             newPV("pv-1"),
			deleteErr:      managertest.OwnerConflict(""),
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRemoved The directory "pv-1-dir" in pool "default" on node "node-a" was left in place: it has no owner record`},
		},
		{
			name:           "delete policy: manager error is retried, finalizer kept",
			pv:             newPV("pv-1"),
			deleteErr:      managertest.Answer(managerapi.ReasonInternal, "test answer"),
			wantErr:        true,
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not removed yet: PUT`},
		},
		{
			name:           "no manager on the node: retried, finalizer kept",
			pv:             newPV("pv-1"),
			managersErr:    errors.New("no Ready manager pod"),
			wantErr:        true,
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRemoved Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not removed yet: no manager serves: no Ready manager pod`},
		},
		{
			name:           "retain policy: directory marked retained, finalizer removed",
			pv:             newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRetain)),
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantFinalizers: released,
			wantEvents:     []string{`Normal DirectoryRetained The directory "pv-1-dir" in pool "default" on node "node-a" keeps its data`},
		},
		{
			name:           "recycle policy counts as retain",
			pv:             newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRecycle)),
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantFinalizers: released,
			wantEvents:     []string{"Normal DirectoryRetained"},
		},
		{
			name:           "retain policy: missing directory is not an error",
			pv:             newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRetain)),
			setOwnerErr:    managertest.Answer(managerapi.ReasonNotFound, "test answer"),
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantFinalizers: released,
		},
		{
			name:           "retain policy: directory handed to another PV is not an error",
			pv:             newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRetain)),
			setOwnerErr:    managertest.OwnerConflict("pv-new"),
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRetained The directory "pv-1-dir" in pool "default" on node "node-a" was left in place: it belongs to PersistentVolume "pv-new"`},
		},
		{
			name:           "retain policy: manager error is retried, finalizer kept",
			pv:             newPV("pv-1", withPolicy(v1.PersistentVolumeReclaimRetain)),
			setOwnerErr:    managertest.Answer(managerapi.ReasonInternal, "test answer"),
			wantErr:        true,
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=true policy=Retain"},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning DirectoryNotRetained Waiting before the PersistentVolume can go: the directory "pv-1-dir" in pool "default" on node "node-a" is not marked retained yet: PUT`},
		},
		{
			name:           "bound PV under deletion waits",
			pv:             newPV("pv-1", hostpathtest.Phase(v1.VolumeBound)),
			wantFinalizers: kept,
		},
		{
			name:           "PV of another node: its instance acts, this one writes nothing",
			pv:             newPV("pv-1", hostpathtest.OnNode(otherNode)),
			elected:        true,
			wantFinalizers: kept,
		},
		{
			name:           "node gone: the elected instance removes the finalizer with a warning",
			pv:             newPV("pv-1", hostpathtest.OnNode(goneNode)),
			elected:        true,
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRemoved The directory "pv-1-dir" in pool "default" on node "node-gone" was not removed on node "node-gone": the node no longer exists`},
		},
		{
			name:           "node gone, retain policy: the elected instance removes the finalizer with a warning",
			pv:             newPV("pv-1", hostpathtest.OnNode(goneNode), withPolicy(v1.PersistentVolumeReclaimRetain)),
			elected:        true,
			wantFinalizers: released,
			wantEvents:     []string{`Warning DirectoryNotRetained The directory "pv-1-dir" in pool "default" on node "node-gone" was not marked retained`},
		},
		{
			name:           "node gone: an instance not elected writes nothing",
			pv:             newPV("pv-1", hostpathtest.OnNode(goneNode)),
			wantFinalizers: kept,
		},
		{
			name:           "no node annotation: the elected instance removes the finalizer with a warning",
			pv:             newPV("pv-1", hostpathtest.OnNode("")),
			elected:        true,
			wantFinalizers: released,
			wantEvents:     []string{"Warning DirectoryNotRemoved The PersistentVolume names no node"},
		},
		{
			name:           "no directory annotation: finalizer removed with a warning",
			pv:             newPV("pv-1", hostpathtest.Annotation(hostpathv1.AnnotationDirectory, "")),
			wantFinalizers: released,
			wantEvents:     []string{"Warning DirectoryNotRemoved The PersistentVolume names no pool or directory"},
		},
		{
			name:           "PV of another provisioner is ignored",
			pv:             newPV("pv-1", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other")),
			wantFinalizers: kept,
		},
		{
			name:           "multihost PV on an instance not elected: nothing written",
			pv:             newPV("pv-1", hostpathtest.Annotation(hostpathv1.AnnotationMode, "multihost")),
			wantFinalizers: kept,
		},
		{
			name:           "PV without the mode annotation counts as node mode",
			pv:             newPV("pv-1", hostpathtest.Annotation(hostpathv1.AnnotationMode, "")),
			wantCalls:      []string{"delete default/pv-1-dir owner=pv-1 ifEmpty=false"},
			wantFinalizers: released,
			wantLogged:     []string{"DirectoryRemoved"},
		},
		{
			name:           "PV under deletion without the finalizer is left alone",
			pv:             newPV("pv-1", hostpathtest.Finalizers(otherFinalizer)),
			wantFinalizers: released,
		},
		{
			name:           "PV of this node made without the finalizer gets it",
			pv:             newPV("pv-1", notDeleting, hostpathtest.Phase(v1.VolumeBound), hostpathtest.Finalizers(otherFinalizer)),
			wantFinalizers: []string{otherFinalizer, hostpathv1.FinalizerDirectoryProtection},
		},
		{
			name:           "Released PV released by Delete does not get the finalizer back",
			pv:             newPV("pv-1", notDeleting, hostpathtest.Finalizers(otherFinalizer)),
			wantFinalizers: []string{otherFinalizer},
		},
		{
			name:           "Failed PV without the finalizer does not get it",
			pv:             newPV("pv-1", notDeleting, hostpathtest.Phase(v1.VolumeFailed), hostpathtest.Finalizers(otherFinalizer)),
			wantFinalizers: []string{otherFinalizer},
		},
		{
			name:           "PV of another node made without the finalizer is left to its instance",
			pv:             newPV("pv-1", notDeleting, hostpathtest.OnNode(otherNode), hostpathtest.Finalizers(otherFinalizer)),
			wantFinalizers: released,
		},
		{
			name:           "PV not being deleted is left alone",
			pv:             newPV("pv-1", notDeleting),
			wantFinalizers: kept,
		},
		{
			name:           "policy changed to Retain: recorded with the directory, then on the PV",
			pv:             newPV("pv-1", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")),
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=false policy=Retain"},
			wantFinalizers: kept,
			wantRecorded:   "Retain",
		},
		{
			name:           "PV made before the annotation: its policy is recorded once",
			pv:             newPV("pv-1", notDeleting, hostpathtest.Phase(v1.VolumeBound), func(pv *v1.PersistentVolume) { delete(pv.Annotations, hostpathv1.AnnotationRecordedPolicy) }),
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=false policy=Delete"},
			wantFinalizers: kept,
			wantRecorded:   "Delete",
		},
		{
			name:           "policy changed, the manager fails: retried with a warning, the PV keeps the old value",
			pv:             newPV("pv-1", notDeleting, withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")),
			setOwnerErr:    managertest.Answer(managerapi.ReasonInternal, "test answer"),
			wantErr:        true,
			wantCalls:      []string{"setOwner default/pv-1-dir owner=pv-1 previous=pv-1 retained=false policy=Retain"},
			wantFinalizers: kept,
			wantEvents:     []string{`Warning ReclaimPolicyPending Reclaim policy Retain is not recorded yet with the directory "pv-1-dir" in pool "default" on node "node-a": PUT`},
			wantRecorded:   "Delete",
		},
		{
			name:           "policy changed on a PV of another node: left to its instance",
			pv:             newPV("pv-1", notDeleting, hostpathtest.OnNode(otherNode), withPolicy(v1.PersistentVolumeReclaimRetain), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Delete")),
			wantFinalizers: kept,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, logged := logContext(t)
			nodes := tt.nodes
			if nodes == nil {
				nodes = []string{selfNode, otherNode}
			}
			f := newControllerFixture(t, responsibilitytest.Instances{Wins: tt.elected}, tt.managersErr, []*v1.PersistentVolume{tt.pv}, nodes...)
			failOn(f.managers, "", managertest.DeleteVolume, tt.deleteErr)
			failOn(f.managers, "", managertest.SetOwner, tt.setOwnerErr)

			err := f.ctrl.sync(ctx, tt.pv.Name)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("sync() error = %v, want error %t", err, tt.wantErr)
			}
			if got := described(f.managers.Calls()); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("manager calls = %q, want %q", got, tt.wantCalls)
			}
			if tt.wantCalls == nil && tt.managersErr == nil && len(f.asked) > 0 {
				t.Errorf("asked for the managers of %q, want no manager", f.asked)
			}
			if got := f.finalizers(t, tt.pv.Name); !slices.Equal(got, tt.wantFinalizers) {
				t.Errorf("finalizers = %q, want %q", got, tt.wantFinalizers)
			}
			if tt.wantRecorded != "" {
				pv, err := f.kube.CoreV1().PersistentVolumes().Get(context.Background(), tt.pv.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := pv.Annotations[hostpathv1.AnnotationRecordedPolicy]; got != tt.wantRecorded {
					t.Errorf("annotation %s = %q, want %q", hostpathv1.AnnotationRecordedPolicy, got, tt.wantRecorded)
				}
			} else if slices.Equal(tt.wantFinalizers, tt.pv.Finalizers) {
				if w := hostpathtest.Writes(f.kube.Actions()); len(w) > 0 {
					t.Errorf("API writes = %v, want none", w)
				}
			}
			hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), tt.wantEvents)
			hostpathtest.CheckOutcomes(t, "logged outcome", logged(), tt.wantLogged)
		})
	}
}

func TestRemoveFinalizerPatch(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pv := newPV("pv-1", hostpathtest.Finalizers("example.com/a", hostpathv1.FinalizerDirectoryProtection, "example.com/b"))
	f := newControllerFixture(t, responsibilitytest.Instances{}, nil, []*v1.PersistentVolume{pv}, selfNode)

	if err := f.ctrl.sync(ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	w := hostpathtest.Writes(f.kube.Actions())
	if len(w) != 1 {
		t.Fatalf("API writes = %v, want one patch", w)
	}
	patch, ok := w[0].(k8stesting.PatchActionImpl)
	if !ok || patch.GetPatchType() != types.JSONPatchType {
		t.Fatalf("write = %#v, want a JSON patch", w[0])
	}
	want := `[{"op":"test","path":"/metadata/finalizers/1","value":"hostpath.dev/directory-protection"},{"op":"remove","path":"/metadata/finalizers/1"}]`
	if got := string(patch.GetPatch()); got != want {
		t.Errorf("patch = %s, want %s", got, want)
	}
	if got := patch.PatchOptions.FieldManager; got != testFieldManager {
		t.Errorf("field manager = %q, want %q", got, testFieldManager)
	}
	if got, want := f.finalizers(t, pv.Name), []string{"example.com/a", "example.com/b"}; !slices.Equal(got, want) {
		t.Errorf("finalizers = %q, want %q", got, want)
	}
}

func TestRemoveFinalizerConflict(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cached := newPV("pv-1")
	f := newControllerFixture(t, responsibilitytest.Instances{}, nil, []*v1.PersistentVolume{cached}, selfNode)
	// The API server's PV changed since the cache saw it: the finalizer
	// moved to another index.
	live := newPV("pv-1", hostpathtest.Finalizers(hostpathv1.FinalizerDirectoryProtection, otherFinalizer, "example.com/new"))
	if err := f.kube.Tracker().Update(v1.SchemeGroupVersion.WithResource("persistentvolumes"), live, ""); err != nil {
		t.Fatal(err)
	}

	if err := f.ctrl.sync(ctx, cached.Name); err == nil {
		t.Fatal("sync() succeeded, want the patch's test to fail")
	}
	if got, want := f.finalizers(t, cached.Name), live.Finalizers; !slices.Equal(got, want) {
		t.Errorf("finalizers = %q, want %q", got, want)
	}
	if got := hostpathtest.Events(f.recorder); len(got) != 0 {
		t.Errorf("events = %q, want none before the finalizer is removed", got)
	}
}

func TestProcessNextWorkItem(t *testing.T) {
	tests := []struct {
		name         string
		deleteErr    error
		wantRequeues int
	}{
		{name: "success is forgotten", wantRequeues: 0},
		{name: "manager error is requeued with backoff", deleteErr: managertest.Answer(managerapi.ReasonInternal, "test answer"), wantRequeues: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pv := newPV("pv-1")
			f := newControllerFixture(t, responsibilitytest.Instances{}, nil, []*v1.PersistentVolume{pv}, selfNode)
			failOn(f.managers, "", managertest.DeleteVolume, tt.deleteErr)
			f.ctrl.queue.Add(pv.Name)
			if !f.ctrl.queue.ProcessNextWorkItem(ctx) {
				t.Fatal("ProcessNextWorkItem() = false, want true")
			}
			if got := f.ctrl.queue.NumRequeues(pv.Name); got != tt.wantRequeues {
				t.Errorf("requeues = %d, want %d", got, tt.wantRequeues)
			}
		})
	}
}

func TestEventHandlers(t *testing.T) {
	pvs := []*v1.PersistentVolume{
		newPV("deleting-here"),
		newPV("deleting-there", hostpathtest.OnNode(otherNode)),
		newPV("deleting-gone", hostpathtest.OnNode(goneNode)),
		newPV("legacy-here", notDeleting, hostpathtest.Finalizers()),
		newPV("legacy-there", notDeleting, hostpathtest.OnNode(otherNode), hostpathtest.Finalizers()),
		newPV("live-here", notDeleting),
		newPV("released-by-us", hostpathtest.Finalizers(otherFinalizer)),
		newPV("other-provisioner", hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other")),
		newPV("multihost", hostpathtest.Annotation(hostpathv1.AnnotationMode, "multihost")),
		newPV("multihost-live", notDeleting, hostpathtest.Finalizers(), hostpathtest.Annotation(hostpathv1.AnnotationMode, "multihost")),
		newPV("multihost-released", hostpathtest.Finalizers(otherFinalizer), hostpathtest.Annotation(hostpathv1.AnnotationMode, "multihost")),
		newPV("policy-changed", notDeleting, hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Retain")),
	}
	f := newControllerFixture(t, responsibilitytest.Instances{}, nil, pvs, selfNode, otherNode)

	for _, pv := range pvs {
		f.ctrl.volumeChanged(pv)
	}
	f.ctrl.NodeLeft(goneNode)
	got := f.queued()
	want := []string{"deleting-gone", "deleting-here", "deleting-there", "legacy-here", "multihost", "policy-changed"}
	if !slices.Equal(got, want) {
		t.Errorf("queued %q, want %q", got, want)
	}
}

func TestEnsureFinalizer(t *testing.T) {
	tests := []struct {
		name      string
		pv        *v1.PersistentVolume
		wantPatch string
	}{
		{
			name:      "missing: one patch guarded by the resourceVersion, other finalizers kept",
			pv:        newPV("pv-1", notDeleting, hostpathtest.Finalizers(otherFinalizer)),
			wantPatch: `{"metadata":{"finalizers":["example.com/keep","hostpath.dev/directory-protection"],"resourceVersion":"7"}}`,
		},
		{
			name:      "no finalizers at all",
			pv:        newPV("pv-1", notDeleting, hostpathtest.Finalizers()),
			wantPatch: `{"metadata":{"finalizers":["hostpath.dev/directory-protection"],"resourceVersion":"7"}}`,
		},
		{name: "present: no write", pv: newPV("pv-1", notDeleting)},
		{name: "being deleted: no write", pv: newPV("pv-1", hostpathtest.Finalizers(otherFinalizer))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := fake.NewClientset(tt.pv)
			if err := EnsureFinalizer(ctx, kube, tt.pv, testFieldManager); err != nil {
				t.Fatal(err)
			}
			w := hostpathtest.Writes(kube.Actions())
			if tt.wantPatch == "" {
				if len(w) > 0 {
					t.Errorf("API writes = %v, want none", w)
				}
				return
			}
			if len(w) != 1 {
				t.Fatalf("API writes = %v, want one patch", w)
			}
			patch := w[0].(k8stesting.PatchActionImpl)
			if patch.GetPatchType() != types.MergePatchType || string(patch.GetPatch()) != tt.wantPatch {
				t.Errorf("patch = %s %s, want %s %s", patch.GetPatchType(), patch.GetPatch(), types.MergePatchType, tt.wantPatch)
			}
			if got := patch.PatchOptions.FieldManager; got != testFieldManager {
				t.Errorf("field manager = %q, want %q", got, testFieldManager)
			}
		})
	}
}

func TestRunStopsBeforeCachesSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	f := newControllerFixture(t, responsibilitytest.Instances{}, nil, nil)
	if err := f.ctrl.Run(ctx, 2); err == nil {
		t.Error("Run() = nil, want an error: the caches never synced")
	}
}

// TestManagerReady: a manager turning Ready queues the PVs that may wait
// for it: its node's under deletion or with a policy not yet recorded, and
// every multihost one in that state; nothing else.
func TestManagerReady(t *testing.T) {
	pvs := []*v1.PersistentVolume{
		newPV("deleting-here"),
		newPV("deleting-there", hostpathtest.OnNode(otherNode)),
		newPV("policy-there", notDeleting, hostpathtest.OnNode(otherNode), hostpathtest.Annotation(hostpathv1.AnnotationRecordedPolicy, "Retain")),
		newPV("settled-there", notDeleting, hostpathtest.OnNode(otherNode)),
		newPV("multihost", hostpathtest.Annotation(hostpathv1.AnnotationMode, "multihost")),
		newPV("other-provisioner", hostpathtest.OnNode(otherNode), hostpathtest.Annotation(storagehelpers.AnnDynamicallyProvisioned, "example.com/other")),
	}
	f := newControllerFixture(t, responsibilitytest.Instances{}, nil, pvs, selfNode, otherNode)
	f.ctrl.ManagerReady(otherNode)
	got := f.queued()
	if want := []string{"deleting-there", "multihost", "policy-there"}; !slices.Equal(got, want) {
		t.Errorf("queued %q, want %q", got, want)
	}
}
