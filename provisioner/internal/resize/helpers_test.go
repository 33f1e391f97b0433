package resize

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

const (
	testProvisioner  = "hostpath.dev/provisioner"
	testFieldManager = "hostpath-provisioner"
	selfNode         = "node-a"
	otherNode        = "node-b"
	thirdNode        = "node-c"
	testPool         = "default"
	testNamespace    = "team-a"
	expandableClass  = "hostpath"
	fixedClass       = "hostpath-fixed"
	gi               = int64(1) << 30
)

// testNames are the provisioner names of the tests' instance.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// testNow is the time of the conditions the controller writes.
var testNow = metav1.NewTime(time.Date(2026, 11, 23, 5, 41, 3, 0, time.UTC))

// fakeInstances are the instances of the tests: this one wins every
// election or none.
type fakeInstances = responsibilitytest.Instances

// fakeManagers are the managers of every node: they record the calls and
// answer with the error configured for the node, else with the volume at
// its new size.
type fakeManagers struct {
	mu    sync.Mutex
	calls []string
	// errs answers SetSize per node.
	errs map[string]error
	// missing nodes have no manager.
	missing map[string]bool
	// enforcement is the Enforcement of the volumes answered.
	enforcement string
}

func (f *fakeManagers) forNode(node string) (Manager, error) {
	if f.missing[node] {
		return nil, fmt.Errorf("no Ready manager pod on node %q", node)
	}
	return nodeManager{f, node}, nil
}

func (f *fakeManagers) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.calls)
	slices.Sort(out) // the nodes of a multihost volume are called in parallel
	return out
}

// nodeManager is the manager of one node.
type nodeManager struct {
	f    *fakeManagers
	node string
}

func (m nodeManager) SetSize(_ context.Context, pool, name string, req managerapi.SetSizeRequest) (*managerapi.Volume, error) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	m.f.calls = append(m.f.calls, fmt.Sprintf("%s setSize %s/%s owner=%s bytes=%d", m.node, pool, name, req.Owner, req.SizeBytes))
	if err := m.f.errs[m.node]; err != nil {
		return nil, err
	}
	return &managerapi.Volume{Name: name, Pool: pool, Owner: req.Owner, SizeBytes: req.SizeBytes, Enforcement: m.f.enforcement}, nil
}

// managerError is an answer of the manager, wrapped like the client does.
func managerError(reason managerapi.Reason, format string, args ...any) error {
	return fmt.Errorf("PUT /v1/pools/default/volumes/x/size: %w", managerapi.Errorf(reason, format, args...))
}

// newPV returns a node-mode PV of this provisioner on selfNode, of 1Gi,
// Bound to the claim of newClaim(claim), changed by mods.
func newPV(name, claim string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			UID:             types.UID("uid-" + name),
			ResourceVersion: "5",
			Annotations: map[string]string{
				storagehelpers.AnnDynamicallyProvisioned: testProvisioner,
				hostpathv1.AnnotationNode:                selfNode,
				hostpathv1.AnnotationPool:                testPool,
				hostpathv1.AnnotationDirectory:           name + "-dir",
				hostpathv1.AnnotationMode:                hostpathv1.ModeNode,
			},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:               &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: testNamespace, Name: claim, UID: types.UID("uid-" + claim)},
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/hpvolumes/" + name + "-dir"}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeBound},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

func onNode(node string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Annotations[hostpathv1.AnnotationNode] = node }
}

// multihost makes the PV a multihost one of nodes.
func multihost(nodes ...string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		delete(pv.Annotations, hostpathv1.AnnotationNode)
		pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
		pv.Annotations[hostpathv1.AnnotationNodes] = hostpathv1.JoinNodes(nodes)
	}
}

func pvCapacity(size string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse(size) }
}

func provisionedBy(name string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] = name }
}

// newClaim returns a claim of class expandableClass bound to pv, with
// status.capacity 1Gi, requesting request, changed by mods.
func newClaim(name, pv, request string, mods ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	class := expandableClass
	claim := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       testNamespace,
			Name:            name,
			UID:             types.UID("uid-" + name),
			ResourceVersion: "9",
		},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			VolumeName:       pv,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(request)}},
		},
		Status: v1.PersistentVolumeClaimStatus{
			Phase:       v1.ClaimBound,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
		},
	}
	for _, m := range mods {
		m(claim)
	}
	return claim
}

func ofClass(name string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = &name }
}

func pending(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimPending }

// resizing marks the claim as growing to size, as step 3 does.
func resizing(size string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) {
		c.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue}}
		c.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
		c.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimControllerResizeInProgress}
	}
}

// infeasibleAt marks the claim as infeasible at size.
func infeasibleAt(size string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) {
		c.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimControllerResizeError, Status: v1.ConditionTrue, Message: "no room"}}
		c.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
		c.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimControllerResizeInfeasible}
	}
}

func statusCapacity(size string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) { c.Status.Capacity[v1.ResourceStorage] = resource.MustParse(size) }
}

// withCondition adds a condition unrelated to resizing.
func withOtherCondition(c *v1.PersistentVolumeClaim) {
	c.Status.Conditions = append(c.Status.Conditions, v1.PersistentVolumeClaimCondition{Type: "ModifyingVolume", Status: v1.ConditionTrue})
}

func newClass(name string, allow bool) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          testProvisioner,
		AllowVolumeExpansion: &allow,
	}
}

// fixture is a Controller on selfNode over fake caches and a fake API
// server holding the same objects.
type fixture struct {
	ctrl     *Controller
	kube     *fake.Clientset
	factory  informers.SharedInformerFactory
	managers *fakeManagers
	recorder *record.FakeRecorder
}

// newFixture puts claims, pvs and the two classes in the clientset and in
// the informer caches.
func newFixture(t *testing.T, inst fakeInstances, mgrs *fakeManagers, claims []*v1.PersistentVolumeClaim, pvs []*v1.PersistentVolume) *fixture {
	t.Helper()
	classes := []*storagev1.StorageClass{newClass(expandableClass, true), newClass(fixedClass, false)}
	var objects []runtime.Object
	for _, c := range claims {
		objects = append(objects, c)
	}
	for _, pv := range pvs {
		objects = append(objects, pv)
	}
	for _, sc := range classes {
		objects = append(objects, sc)
	}
	kube := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	for _, c := range claims {
		mustAdd(t, factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer(), c)
	}
	for _, pv := range pvs {
		mustAdd(t, factory.Core().V1().PersistentVolumes().Informer().GetIndexer(), pv)
	}
	for _, sc := range classes {
		mustAdd(t, factory.Storage().V1().StorageClasses().Informer().GetIndexer(), sc)
	}
	f := &fixture{kube: kube, factory: factory, managers: mgrs, recorder: record.NewFakeRecorder(20)}
	f.ctrl = NewController(Config{
		ProvisionerNames: testNames,
		Node:             selfNode,
		FieldManager:     testFieldManager,
		Client:           kube,
		Claims:           factory.Core().V1().PersistentVolumeClaims(),
		Volumes:          factory.Core().V1().PersistentVolumes(),
		Classes:          factory.Storage().V1().StorageClasses(),
		Instances:        inst,
		Managers:         mgrs.forNode,
		Fanout:           fanout.Options{Attempts: 1},
		Recorder:         f.recorder,
	})
	f.ctrl.now = func() metav1.Time { return testNow }
	t.Cleanup(f.ctrl.queue.ShutDown)
	return f
}

func mustAdd(t *testing.T, store interface{ Add(any) error }, obj any) {
	t.Helper()
	if err := store.Add(obj); err != nil {
		t.Fatal(err)
	}
}

// refresh copies the claims and PVs of the API server into the caches, as
// the informers would.
func (f *fixture) refresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	claims, err := f.kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		if err := f.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Update(&claims.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	pvs, err := f.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pvs.Items {
		if err := f.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Update(&pvs.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	f.kube.ClearActions()
}

// claim returns the claim name as the API server has it.
func (f *fixture) claim(t *testing.T, name string) *v1.PersistentVolumeClaim {
	t.Helper()
	c, err := f.kube.CoreV1().PersistentVolumeClaims(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pvCapacity returns the capacity of the PV name as the API server has it.
func (f *fixture) pvCapacity(t *testing.T, name string) string {
	t.Helper()
	pv, err := f.kube.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := pv.Spec.Capacity[v1.ResourceStorage]
	return q.String()
}

// writes returns the writes made to the API server, as
// "verb resource[/subresource] name".
func writes(kube *fake.Clientset) []string {
	var out []string
	for _, a := range kube.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		what := a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			what += "/" + sub
		}
		name := ""
		if p, ok := a.(k8stesting.PatchAction); ok {
			name = p.GetName()
		}
		out = append(out, fmt.Sprintf("%s %s %s", a.GetVerb(), what, name))
	}
	return out
}

// patches returns the bodies of the patches of the claim status, in order.
func patches(kube *fake.Clientset) []string {
	var out []string
	for _, a := range kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "persistentvolumeclaims" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

// events drains the recorder.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// checkEvents checks that got has one event per want, each containing
// every part of it.
func checkEvents(t *testing.T, got []string, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %d: %q", got, len(want), want)
	}
	for i := range want {
		for _, part := range want[i] {
			if !strings.Contains(got[i], part) {
				t.Errorf("event %d = %q, want it to contain %q", i, got[i], part)
			}
		}
	}
}

// conditionTypes returns the types of the claim's conditions, in order.
func conditionTypes(c *v1.PersistentVolumeClaim) []string {
	var out []string
	for _, cond := range c.Status.Conditions {
		out = append(out, string(cond.Type))
	}
	return out
}

// conditionMessage returns the message of the claim's condition t, "" when
// none.
func conditionMessage(c *v1.PersistentVolumeClaim, t v1.PersistentVolumeClaimConditionType) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t {
			return cond.Message
		}
	}
	return ""
}
