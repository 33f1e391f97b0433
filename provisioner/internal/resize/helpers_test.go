package resize

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
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

// newManagers returns the managers of the tests: selfNode, otherNode and
// thirdNode have testPool, enforcing sizes as enforcement says; errs
// answers SetSize per node; missing nodes have no manager. newFixture
// gives them the directories of its PVs.
func newManagers(enforcement string, errs map[string]error, missing map[string]bool) *managertest.Fake {
	f := managertest.New()
	for _, n := range []string{selfNode, otherNode, thirdNode} {
		f.Node(n).AddPool(managerapi.Pool{Name: testPool, Enforcement: enforcement})
	}
	for n, err := range errs {
		f.Fail(managertest.Failure{Node: n, Method: managertest.SetSize, Err: err})
	}
	for n := range missing {
		f.FailForNode(n, nil)
	}
	return f
}

// holdPV gives the nodes that hold pv's directory the directory, owned by
// pv, of pv's capacity.
func holdPV(f *managertest.Fake, pv *v1.PersistentVolume) {
	d, ok := hostpathv1.VolumeDirectoryOf(pv, testNames)
	if !ok {
		return
	}
	size := pv.Spec.Capacity[v1.ResourceStorage]
	for _, n := range d.Holders() {
		f.Node(n).AddVolume(managerapi.Volume{Name: d.Directory, Pool: d.Pool, Owner: pv.Name, SizeBytes: size.Value()})
	}
}

// setSizes returns the SetSize calls, sorted (the nodes of a multihost
// volume are called in parallel), as "node setSize pool/name owner=...
// bytes=...".
func setSizes(f *managertest.Fake) []string {
	var out []string
	for _, c := range f.Calls() {
		req := c.Request.(managerapi.SetSizeRequest)
		out = append(out, fmt.Sprintf("%s setSize %s/%s owner=%s bytes=%d", c.Node, c.Pool, c.Name, req.Owner, req.SizeBytes))
	}
	slices.Sort(out)
	return out
}

// newPV returns a Bound node-mode PV of this provisioner on selfNode, of
// 1Gi, bound to the claim of newClaim(claim), changed by mods.
func newPV(name, claim string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	return hostpathtest.NodePV(name, selfNode, append([]func(*v1.PersistentVolume){hostpathtest.ResourceVersion("5"), hostpathtest.Capacity("1Gi"),
		hostpathtest.ClaimRef(testNamespace, claim), hostpathtest.HostPath("/var/hpvolumes/" + name + "-dir"), hostpathtest.Phase(v1.VolumeBound)}, mods...)...)
}

// newClaim returns a claim of class expandableClass bound to pv, with
// status.capacity 1Gi, requesting request, changed by mods.
func newClaim(name, pv, request string, mods ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	claim := hostpathtest.Claim(testNamespace, name, append([]func(*v1.PersistentVolumeClaim){hostpathtest.ClaimOfClass(expandableClass),
		hostpathtest.Requesting(request), hostpathtest.BoundToPV(pv, "1Gi")}, mods...)...)
	claim.ResourceVersion = "9"
	return claim
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
	return hostpathtest.Class(name, testProvisioner, hostpathtest.AllowExpansion(allow))
}

// fixture is a Controller on selfNode over fake caches and a fake API
// server holding the same objects.
type fixture struct {
	ctrl     *Controller
	kube     *fake.Clientset
	factory  informers.SharedInformerFactory
	managers *managertest.Fake
	recorder *record.FakeRecorder
}

// newFixture puts claims, pvs and the two classes in the clientset and in
// the informer caches.
func newFixture(t *testing.T, inst responsibilitytest.Instances, mgrs *managertest.Fake, claims []*v1.PersistentVolumeClaim, pvs []*v1.PersistentVolume) *fixture {
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
	for _, pv := range pvs {
		holdPV(mgrs, pv)
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
		Managers:         managertest.For[Manager](mgrs),
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
	hostpathtest.Replace(t, f.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer(), claims)
	pvs, err := f.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostpathtest.Replace(t, f.factory.Core().V1().PersistentVolumes().Informer().GetIndexer(), pvs)
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

// patches returns the bodies of the patches of the claim status, in order.
func patches(kube *fake.Clientset) []string {
	var out []string
	for _, p := range hostpathtest.Patches(kube.Actions(), "persistentvolumeclaims") {
		out = append(out, string(p.GetPatch()))
	}
	return out
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
