package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/generated/clientset/versioned/fake"
	hdinformers "hostpath.dev/api/generated/informers/externalversions"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

// The names of the manager's deployment, as in manifests/base/manager.
const (
	testNamespace = "hostpath-system"
	testDaemonSet = "hostpath-manager"
	managerLabel  = "hostpath.dev/manager"
	otherProvider = "example.com/other"

	gib = int64(1) << 30
)

var (
	// t0 is the fake clock's start.
	t0               = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	managerPodLabels = hostpathtest.ManagerPodLabels

	definitionsGVR = hostpathv1.SchemeGroupVersion.WithResource("hostdefinitions")
	definitionGVK  = hostpathv1.SchemeGroupVersion.WithKind("HostDefinition")
	nodesGVR       = v1.SchemeGroupVersion.WithResource("nodes")
	podsGVR        = v1.SchemeGroupVersion.WithResource("pods")
	volumesGVR     = v1.SchemeGroupVersion.WithResource("persistentvolumes")
	volumeGVK      = v1.SchemeGroupVersion.WithKind("PersistentVolume")
	classesGVR     = storagev1.SchemeGroupVersion.WithResource("storageclasses")
)

// testConfig is the controller's configuration in the tests: backoff
// 10s, 20s, 40s, 40s, then Error at the fifth try.
func testConfig() Config {
	return Config{
		ProvisionerNames: hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName),
		ManagerDaemonSet: testDaemonSet,
		ManagerSelector:  labels.SelectorFromSet(managerPodLabels),
		MinFreeBytes:     gib,
		MaxTries:         5,
		InitialBackoff:   10 * time.Second,
		MaxBackoff:       40 * time.Second,
		AllowDelete:      true,
		ReverifyPeriod:   10 * time.Minute,
		BackfillWorkers:  4,
	}
}

// fixture holds the objects of a test, in the style of sample-controller:
// they go into the informer indexers (the informers are never started) and
// into the fake clientsets; after each sync the objects the controller
// writes (HostDefinitions, PersistentVolumes) are copied back from the fake
// clientsets into the indexers, as the informers would.
type fixture struct {
	t   *testing.T
	ctx context.Context
	cfg Config

	// Objects preloaded into the indexers and the fake clientsets.
	nodes       []*v1.Node
	pods        []*v1.Pod
	daemonSets  []*appsv1.DaemonSet
	classes     []*storagev1.StorageClass
	definitions []*hostpathv1.HostDefinition
	volumes     []*v1.PersistentVolume

	// managers are the fake managers.
	managers *managertest.Fake

	kube      *k8sfake.Clientset
	client    *fake.Clientset
	kubeInf   kubeinformers.SharedInformerFactory
	hdInf     hdinformers.SharedInformerFactory
	informers Informers
	recorder  *record.FakeRecorder
	clock     *clocktesting.FakeClock
	metrics   *Metrics
	c         *Controller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	return &fixture{
		t: t, ctx: ctx, cfg: testConfig(),
		managers: managertest.New(),
		clock:    clocktesting.NewFakeClock(t0),
	}
}

// newStandardFixture has the manager DaemonSet, the class "standard" of
// the default pool, and node-1 with a Ready manager pod and a healthy
// manager.
func newStandardFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.daemonSets = append(f.daemonSets, hostpathtest.ManagerDaemonSet(testNamespace, testDaemonSet))
	f.classes = append(f.classes, newClass("standard", hostpathv1.DefaultProvisionerName, nil))
	f.addNode(newNode("node-1"))
	return f
}

// addNode adds a node with a Ready manager pod and a healthy fake manager.
func (f *fixture) addNode(n *v1.Node) *managertest.Manager {
	f.nodes = append(f.nodes, n)
	f.pods = append(f.pods, managerPod(n.Name))
	return f.addManager(n.Name)
}

// addManager gives node a healthy fake manager: the host of node, whose
// pool default, and any other prepared, is healthyPool.
func (f *fixture) addManager(node string) *managertest.Manager {
	m := f.managers.Node(node)
	m.UpdateHost(func(h *managerapi.Host) {
		h.HostID, h.MachineID, h.BootID = "host-"+node, "machine-"+node, "boot-1"
	})
	p := healthyPool()
	m.PoolRoot(p)
	p.Name = "default"
	m.AddPool(p)
	return m
}

// healthyPool is the state of a healthy pool: 50 GiB free of 100, sizes
// enforced.
func healthyPool() managerapi.Pool {
	return managerapi.Pool{CapacityBytes: 100 * gib, FreeBytes: 50 * gib, Enforcement: managerapi.EnforcementXFS}
}

// setPool changes what m says of its pools, those it has and those it
// will prepare.
func setPool(m *managertest.Manager, change func(p *managerapi.Pool)) {
	p := healthyPool()
	change(&p)
	m.PoolRoot(p)
	for _, p := range m.Pools() {
		m.UpdatePool(p.Name, change)
	}
}

// newController builds the clientsets, the informers (never started) and
// the controller.
func (f *fixture) newController() *Controller {
	f.t.Helper()
	var kubeObjects, hdObjects []runtime.Object
	for _, o := range f.nodes {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.pods {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.daemonSets {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.classes {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.volumes {
		kubeObjects = append(kubeObjects, o)
	}
	for _, o := range f.definitions {
		hdObjects = append(hdObjects, o)
	}
	f.kube = k8sfake.NewClientset(kubeObjects...)
	f.client = fake.NewSimpleClientset(hdObjects...)
	f.kubeInf = kubeinformers.NewSharedInformerFactory(f.kube, 0)
	f.hdInf = hdinformers.NewSharedInformerFactory(f.client, 0)
	f.informers = Informers{
		Nodes:       f.kubeInf.Core().V1().Nodes().Informer(),
		Pods:        f.kubeInf.Core().V1().Pods().Informer(),
		DaemonSets:  f.kubeInf.Apps().V1().DaemonSets().Informer(),
		Classes:     f.kubeInf.Storage().V1().StorageClasses().Informer(),
		Definitions: f.hdInf.Hostpath().V1().HostDefinitions().Informer(),
		Volumes:     f.kubeInf.Core().V1().PersistentVolumes().Informer(),
		Namespace:   testNamespace,
	}
	add := func(inf cache.SharedIndexInformer, obj runtime.Object) {
		if err := inf.GetIndexer().Add(obj.DeepCopyObject()); err != nil {
			f.t.Fatalf("add to the indexer: %v", err)
		}
	}
	for _, o := range f.nodes {
		add(f.informers.Nodes, o)
	}
	for _, o := range f.pods {
		add(f.informers.Pods, o)
	}
	for _, o := range f.daemonSets {
		add(f.informers.DaemonSets, o)
	}
	for _, o := range f.classes {
		add(f.informers.Classes, o)
	}
	for _, o := range f.volumes {
		add(f.informers.Volumes, o)
	}
	for _, o := range f.definitions {
		add(f.informers.Definitions, o)
	}
	f.recorder = record.NewFakeRecorder(100)
	f.metrics = NewMetrics()
	c, err := New(f.cfg, f.kube, f.client, f.informers, f.managerFor, f.recorder, f.clock, f.metrics)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.t.Cleanup(c.queue.ShutDown)
	f.c = c
	return c
}

// managerFor is the controller's ManagerFor: the fake manager of the pod's
// node.
func (f *fixture) managerFor(pod *v1.Pod) (Manager, error) {
	return managertest.For[Manager](f.managers)(pod.Spec.NodeName)
}

// result is what one sync did.
type result struct {
	err error
	// actions are the writes to both clientsets, as "verb resource[/subresource] name".
	actions []string
	// events are the recorded events, as "Type Reason message".
	events []string
	// calls are the manager calls, by node, as describeCalls has them;
	// made are all of them.
	calls map[string][]string
	made  []managertest.Call
}

// run syncs key once, as a worker would, and fails the test on an error.
func (f *fixture) run(key Key) result {
	f.t.Helper()
	r := f.runErr(key)
	if r.err != nil {
		f.t.Fatalf("Sync(%s): %v", key, r.err)
	}
	return r
}

// runErr syncs key once and returns what it did.
func (f *fixture) runErr(key Key) result {
	f.t.Helper()
	if f.c == nil {
		f.newController()
	}
	f.kube.ClearActions()
	f.client.ClearActions()
	hostpathtest.Events(f.recorder)
	f.managers.Take()
	err := f.c.Sync(f.ctx, key)
	made := f.managers.Take()
	r := result{err: err, actions: hostpathtest.DescribeWrites(append(f.client.Actions(), f.kube.Actions()...)), events: hostpathtest.Events(f.recorder),
		calls: describeCalls(made), made: made}
	f.refresh()
	return r
}

// refresh copies the HostDefinitions and PersistentVolumes of the fake
// clientsets into the indexers, as their informers would.
func (f *fixture) refresh() {
	f.t.Helper()
	defs, err := f.client.Tracker().List(definitionsGVR, definitionGVK, "")
	if err != nil {
		f.t.Fatalf("list HostDefinitions: %v", err)
	}
	hostpathtest.Replace(f.t, f.informers.Definitions.GetIndexer(), defs)
	pvs, err := f.kube.Tracker().List(volumesGVR, volumeGVK, "")
	if err != nil {
		f.t.Fatalf("list PersistentVolumes: %v", err)
	}
	hostpathtest.Replace(f.t, f.informers.Volumes.GetIndexer(), pvs)
}

// definition returns the HostDefinition in the fake clientset, or nil.
func (f *fixture) definition(name string) *hostpathv1.HostDefinition {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(definitionsGVR, "", name)
	if err != nil {
		return nil
	}
	return obj.(*hostpathv1.HostDefinition)
}

// mustDefinition returns the HostDefinition in the fake clientset.
func (f *fixture) mustDefinition(name string) *hostpathv1.HostDefinition {
	f.t.Helper()
	def := f.definition(name)
	if def == nil {
		f.t.Fatalf("HostDefinition %s does not exist", name)
	}
	return def
}

// volume returns the PersistentVolume in the fake clientset.
func (f *fixture) volume(name string) *v1.PersistentVolume {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(volumesGVR, "", name)
	if err != nil {
		f.t.Fatalf("get PersistentVolume %s: %v", name, err)
	}
	return obj.(*v1.PersistentVolume)
}

// updateDefinition changes a HostDefinition as a user would.
func (f *fixture) updateDefinition(name string, change func(*hostpathv1.HostDefinition)) {
	f.t.Helper()
	def := f.mustDefinition(name).DeepCopy()
	change(def)
	if err := f.client.Tracker().Update(definitionsGVR, def, ""); err != nil {
		f.t.Fatalf("update HostDefinition %s: %v", name, err)
	}
	f.refresh()
}

// setObject puts obj into the fake clientset and the indexer of inf
// (creating or replacing it).
func (f *fixture) setObject(gvr schema.GroupVersionResource, inf cache.SharedIndexInformer, obj runtime.Object) {
	f.t.Helper()
	m, _ := meta.Accessor(obj)
	if _, err := f.kube.Tracker().Get(gvr, m.GetNamespace(), m.GetName()); err == nil {
		err = f.kube.Tracker().Update(gvr, obj, m.GetNamespace())
		if err != nil {
			f.t.Fatalf("update %s %s: %v", gvr.Resource, m.GetName(), err)
		}
	} else if err := f.kube.Tracker().Add(obj); err != nil {
		f.t.Fatalf("add %s %s: %v", gvr.Resource, m.GetName(), err)
	}
	if err := inf.GetIndexer().Update(obj.DeepCopyObject()); err != nil {
		f.t.Fatalf("update the indexer: %v", err)
	}
}

// deleteObject removes obj from the fake clientset and the indexer of inf.
func (f *fixture) deleteObject(gvr schema.GroupVersionResource, inf cache.SharedIndexInformer, obj runtime.Object) {
	f.t.Helper()
	m, _ := meta.Accessor(obj)
	if err := f.kube.Tracker().Delete(gvr, m.GetNamespace(), m.GetName()); err != nil {
		f.t.Fatalf("delete %s %s: %v", gvr.Resource, m.GetName(), err)
	}
	if err := inf.GetIndexer().Delete(obj); err != nil {
		f.t.Fatalf("delete from the indexer: %v", err)
	}
}

// indexed returns a copy of the object key of inf's indexer.
func (f *fixture) indexed(inf cache.SharedIndexInformer, key string) runtime.Object {
	f.t.Helper()
	obj, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		f.t.Fatalf("%s is not in the indexer (%v)", key, err)
	}
	return obj.(runtime.Object).DeepCopyObject()
}

// updateNode changes a node.
func (f *fixture) updateNode(name string, change func(*v1.Node)) {
	f.t.Helper()
	n := f.indexed(f.informers.Nodes, name).(*v1.Node)
	change(n)
	f.setObject(nodesGVR, f.informers.Nodes, n)
}

// deleteNode deletes a node.
func (f *fixture) deleteNode(name string) {
	f.t.Helper()
	f.deleteObject(nodesGVR, f.informers.Nodes, f.indexed(f.informers.Nodes, name))
}

// podKey is the indexer key of the manager pod of node.
func podKey(node string) string { return testNamespace + "/" + managerPodName(node) }

// updatePod changes the manager pod of node.
func (f *fixture) updatePod(node string, change func(*v1.Pod)) {
	f.t.Helper()
	p := f.indexed(f.informers.Pods, podKey(node)).(*v1.Pod)
	change(p)
	f.setObject(podsGVR, f.informers.Pods, p)
}

// deletePod deletes the manager pod of node.
func (f *fixture) deletePod(node string) {
	f.t.Helper()
	f.deleteObject(podsGVR, f.informers.Pods, f.indexed(f.informers.Pods, podKey(node)))
}

// deleteClass deletes a StorageClass.
func (f *fixture) deleteClass(name string) {
	f.t.Helper()
	f.deleteObject(classesGVR, f.informers.Classes, f.indexed(f.informers.Classes, name))
}

// expectActions compares the write actions of a sync.
func expectActions(t *testing.T, r result, want ...string) {
	t.Helper()
	got, want := concurrentSorted(r.actions), concurrentSorted(want)
	if !slices.Equal(got, want) {
		t.Errorf("actions:\n  got  %q\n  want %q", got, want)
	}
}

// concurrentSorted returns actions with each run of PV patches sorted:
// recordNode sends them BackfillWorkers at a time, in no set order.
func concurrentSorted(actions []string) []string {
	out := slices.Clone(actions)
	const patch = "patch persistentvolumes "
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && strings.HasPrefix(out[j], patch) {
			j++
		}
		if j > i {
			slices.Sort(out[i:j])
			i = j
		} else {
			i++
		}
	}
	return out
}

// expectEvents compares the events of a sync by type and reason
// ("Normal Defined").
func expectEvents(t *testing.T, r result, want ...string) {
	t.Helper()
	var got []string
	for _, e := range r.events {
		f := strings.SplitN(e, " ", 3)
		got = append(got, strings.Join(f[:min(len(f), 2)], " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n  got  %q\n  want %q", r.events, want)
	}
}

// event returns the event of reason, failing the test when there is none.
func event(t *testing.T, r result, reason string) string {
	t.Helper()
	for _, e := range r.events {
		if f := strings.SplitN(e, " ", 3); len(f) == 3 && f[1] == reason {
			return f[2]
		}
	}
	t.Fatalf("no %s event in %q", reason, r.events)
	return ""
}

// expectCalls compares the manager calls of a sync on node.
func expectCalls(t *testing.T, r result, node string, want ...string) {
	t.Helper()
	if got := r.calls[node]; !slices.Equal(got, want) {
		t.Errorf("calls to the manager of %s:\n  got  %q\n  want %q", node, got, want)
	}
}

// expectNoCalls checks that a sync asked no manager anything.
func expectNoCalls(t *testing.T, r result) {
	t.Helper()
	if len(r.calls) > 0 {
		t.Errorf("manager calls: got %q, want none", r.calls)
	}
}

// condition returns a definition's condition of type typ, or nil.
func condition(def *hostpathv1.HostDefinition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(def.Status.Conditions, typ)
}

// expectCondition checks a definition's condition.
func expectCondition(t *testing.T, def *hostpathv1.HostDefinition, typ string, status metav1.ConditionStatus, reason string, message ...string) {
	t.Helper()
	c := condition(def, typ)
	if c == nil {
		t.Errorf("%s: no condition %s in %+v", def.Name, typ, def.Status.Conditions)
		return
	}
	if c.Status != status || c.Reason != reason {
		t.Errorf("%s: condition %s = %s/%s (%s), want %s/%s", def.Name, typ, c.Status, c.Reason, c.Message, status, reason)
	}
	for _, m := range message {
		if !strings.Contains(c.Message, m) {
			t.Errorf("%s: condition %s message %q does not contain %q", def.Name, typ, c.Message, m)
		}
	}
}

// expectTime compares an optional time.
func expectTime(t *testing.T, what string, got *metav1.Time, want time.Time) {
	t.Helper()
	switch {
	case want.IsZero() && got != nil:
		t.Errorf("%s = %v, want none", what, got.Time)
	case !want.IsZero() && got == nil:
		t.Errorf("%s = none, want %v", what, want)
	case !want.IsZero() && !got.Time.Equal(want):
		t.Errorf("%s = %v, want %v", what, got.Time, want)
	}
}

// expectPhase checks a definition's phase and tries.
func expectPhase(t *testing.T, def *hostpathv1.HostDefinition, phase hostpathv1.Phase, tries int32) {
	t.Helper()
	if def.Status.Phase != phase || def.Status.Tries != tries {
		t.Errorf("%s: phase %q, tries %d; want %q, %d (conditions %+v)", def.Name, def.Status.Phase, def.Status.Tries, phase, tries, def.Status.Conditions)
	}
}

// newNode is a Ready, schedulable worker node.
func newNode(name string) *v1.Node {
	return hostpathtest.Node(name, hostpathtest.NodeLabel(v1.LabelOSStable, "linux"), hostpathtest.Ready)
}

func managerPodName(node string) string { return "hostpath-manager-" + node }

// managerPodUID is the UID of the manager pod managerPod makes.
func managerPodUID(node string) types.UID { return hostpathtest.UID(managerPodName(node)) }

// managerPod is a Ready manager pod on node.
func managerPod(node string) *v1.Pod {
	return hostpathtest.ManagerPod(testNamespace, managerPodName(node), node, "10.0.0.1", hostpathtest.PodLabels(managerPodLabels))
}

// newClass is a StorageClass.
func newClass(name, provisioner string, params map[string]string) *storagev1.StorageClass {
	return hostpathtest.Class(name, provisioner, hostpathtest.Parameters(params))
}

// readyDefinition is the Ready definition of (node, pool) a healthy
// manager of node gives, last tried at t0.
func readyDefinition(node, pool string, created time.Time) *hostpathv1.HostDefinition {
	tried := metav1.NewTime(t0)
	return &hostpathv1.HostDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name: hostpathv1.Name(node, pool), UID: types.UID("uid-" + hostpathv1.Name(node, pool)),
			CreationTimestamp: metav1.NewTime(created),
		},
		Spec: hostpathv1.HostDefinitionSpec{NodeName: node, Pool: pool},
		Status: hostpathv1.HostDefinitionStatus{
			Phase:       hostpathv1.PhaseReady,
			LastTryTime: &tried, DefinedTime: &tried,
			Conditions: []metav1.Condition{{
				Type: hostpathv1.ConditionDefined, Status: metav1.ConditionTrue, Reason: ReasonDefined,
				Message: "defined", LastTransitionTime: tried,
			}},
			ManagerPod: managerPodName(node), ManagerPodUID: managerPodUID(node),
			HostID: "host-" + node, MachineID: "machine-" + node, BootID: "boot-1",
			PoolPath: "/var/hostpath/" + pool, CapacityBytes: 100 * gib, FreeBytes: 50 * gib, MinFreeBytes: gib,
		},
	}
}

// multihostPV is a multihost PV of pool, with its directory on nodes and
// to be given to pending.
func multihostPV(name, class, pool string, nodes, pending []string, reclaim v1.PersistentVolumeReclaimPolicy) *v1.PersistentVolume {
	dir := "dir-" + name
	return hostpathtest.MultihostPV(name, nodes, hostpathtest.ResourceVersion("7"), hostpathtest.InPool(pool), hostpathtest.InDirectory(dir),
		hostpathtest.PendingOn(pending...), hostpathtest.OfClass(class), hostpathtest.ReclaimPolicy(reclaim),
		hostpathtest.HostPath("/var/hostpath/"+pool+"/"+dir), hostpathtest.Phase(v1.VolumeBound))
}

// describeCalls returns the calls by node, as "Host", "PreparePool pool",
// "ListVolumes pool", "CreateVolume pool/name", "SetOwner pool/name
// owner[ multihost]", with the CreateVolume calls (made in parallel, and
// always last in a try) sorted at the end.
func describeCalls(calls []managertest.Call) map[string][]string {
	out, creates := map[string][]string{}, map[string][]string{}
	for _, c := range calls {
		s := strings.TrimPrefix(c.String(), c.Node+" ")
		switch r := c.Request.(type) {
		case managerapi.CreateVolumeRequest:
			creates[c.Node] = append(creates[c.Node], s)
			continue
		case managerapi.SetOwnerRequest:
			s += " " + r.Owner
			if r.Multihost {
				s += " multihost"
			}
		}
		out[c.Node] = append(out[c.Node], s)
	}
	for node, cs := range creates {
		slices.Sort(cs)
		out[node] = append(out[node], cs...)
	}
	return out
}

// createCall is one CreateVolume call.
type createCall struct {
	pool, name string
	req        managerapi.CreateVolumeRequest
}

// creates returns the CreateVolume calls a sync made on node, sorted by
// name.
func creates(r result, node string) []createCall {
	var out []createCall
	for _, c := range r.made {
		if req, ok := c.Request.(managerapi.CreateVolumeRequest); ok && c.Node == node {
			out = append(out, createCall{pool: c.Pool, name: c.Name, req: req})
		}
	}
	slices.SortFunc(out, func(a, b createCall) int { return strings.Compare(a.name, b.name) })
	return out
}

// setOwners returns the SetOwner requests a sync made on node, in order.
func setOwners(r result, node string) []managerapi.SetOwnerRequest {
	var out []managerapi.SetOwnerRequest
	for _, c := range r.made {
		if req, ok := c.Request.(managerapi.SetOwnerRequest); ok && c.Node == node {
			out = append(out, req)
		}
	}
	return out
}
