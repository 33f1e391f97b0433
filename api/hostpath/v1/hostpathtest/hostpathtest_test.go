package hostpathtest

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// TestPVsReadAsTheProgramsRead checks that the PVs built here are read by
// hostpathv1's own functions as what their builders say they are.
func TestPVsReadAsTheProgramsRead(t *testing.T) {
	names := hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName)
	for _, tc := range []struct {
		name        string
		pv          *v1.PersistentVolume
		wantOK      bool
		wantHolders []string
		wantPending []string
		wantPool    string
		wantDir     string
		wantPath    string
	}{
		{name: "node mode", pv: NodePV("pv-a", "node-a"), wantOK: true, wantHolders: []string{"node-a"}, wantPool: "default", wantDir: "pv-a-dir"},
		{name: "pool and directory", pv: NodePV("pv-a", "node-a", InPool("fast"), InDirectory("d"), OnNode("node-b")), wantOK: true,
			wantHolders: []string{"node-b"}, wantPool: "fast", wantDir: "d"},
		{name: "multihost", pv: MultihostPV("pv-m", []string{"node-b", "node-a"}, PendingOn("node-c")), wantOK: true,
			wantHolders: []string{"node-a", "node-b"}, wantPending: []string{"node-c"}, wantPool: "default", wantDir: "pv-m-dir"},
		{name: "another provisioner's", pv: NodePV("pv-o", "node-a", ProvisionedBy("example.com/other"))},
		{name: "no directory", pv: NodePV("pv-x", "node-a", WithoutAnnotation(hostpathv1.AnnotationDirectory)), wantOK: true,
			wantHolders: []string{"node-a"}, wantPool: "default"},
		{name: "host path", pv: NodePV("pv-a", "node-a", HostPath("/var/hp/pv-a-dir")), wantOK: true, wantHolders: []string{"node-a"},
			wantPool: "default", wantDir: "pv-a-dir", wantPath: "/var/hp/pv-a-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := hostpathv1.VolumeDirectoryOf(tc.pv, names)
			if ok != tc.wantOK {
				t.Fatalf("VolumeDirectoryOf ok = %t, want %t", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			holders := d.Holders()
			slices.Sort(holders)
			if !slices.Equal(holders, tc.wantHolders) || !slices.Equal(d.PendingNodes, tc.wantPending) || d.Pool != tc.wantPool || d.Directory != tc.wantDir {
				t.Errorf("directory = %+v (holders %q), want %s/%s on %q", d, holders, tc.wantPool, tc.wantDir, tc.wantHolders)
			}
			if got := hostpathv1.VolumePath(tc.pv); got != tc.wantPath {
				t.Errorf("VolumePath = %q, want %q", got, tc.wantPath)
			}
		})
	}
}

// TestOptions checks the options that are more than one assignment.
func TestOptions(t *testing.T) {
	pv := NodePV("pv-a", "node-a", MadeFor("ns", "data"), ClaimRef("ns", "data"), Capacity("2Gi"), Phase(v1.VolumeBound), Deleting)
	if pv.Annotations[hostpathv1.AnnotationClaimNamespace] != "ns" || pv.Annotations[hostpathv1.AnnotationClaimName] != "data" ||
		pv.Spec.ClaimRef.UID != UID("data") || pv.Spec.Capacity.Storage().String() != "2Gi" || pv.Status.Phase != v1.VolumeBound ||
		pv.DeletionTimestamp == nil || !slices.Equal(pv.Finalizers, []string{hostpathv1.FinalizerDirectoryProtection}) {
		t.Errorf("pv = %+v", pv)
	}
	if kept := NodePV("pv-a", "node-a", Finalizers("x"), Deleting); !slices.Equal(kept.Finalizers, []string{"x"}) {
		t.Errorf("Deleting replaced the finalizers: %q", kept.Finalizers)
	}
	c := Claim("ns", "data", ClaimOfClass("fast"), Requesting("3Gi"), BoundToPV("pv-a", "2Gi"), ClaimAnnotation("k", "v"))
	if *c.Spec.StorageClassName != "fast" || c.Spec.Resources.Requests.Storage().String() != "3Gi" || c.Spec.VolumeName != "pv-a" ||
		c.Status.Phase != v1.ClaimBound || c.Status.Capacity.Storage().String() != "2Gi" || c.Annotations["k"] != "v" {
		t.Errorf("claim = %+v", c)
	}
	sc := Class("fast", hostpathv1.DefaultProvisionerName, Binding(storagev1.VolumeBindingWaitForFirstConsumer), Parameters(map[string]string{hostpathv1.ParamPool: "fast"}), AllowExpansion(true))
	if *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || hostpathv1.ClassPool(sc.Parameters) != "fast" || !*sc.AllowVolumeExpansion {
		t.Errorf("class = %+v", sc)
	}
	n := Node("node-a", Hostname("host-a"), NodeLabel("kind", "worker"), Ready)
	if n.Labels[v1.LabelHostname] != "host-a" || n.Labels["kind"] != "worker" || len(n.Status.Conditions) != 1 {
		t.Errorf("node = %+v", n)
	}
	if n := Node("node-b", Hostname("")); len(n.Labels) != 0 {
		t.Errorf("node without hostname = %+v", n.Labels)
	}
}

// TestPodsEventsAndLoad checks the builders of manager pods and the
// manager DaemonSet, Events and Load.
func TestPodsEventsAndLoad(t *testing.T) {
	p := ManagerPod("ns", "m", "node-a", "10.0.0.1", NotReady, PodLabels(map[string]string{"app": "m"}))
	if p.Spec.NodeName != "node-a" || p.Status.PodIP != "10.0.0.1" || p.Status.Conditions[0].Status != v1.ConditionFalse || p.Labels["app"] != "m" || p.UID != UID("m") {
		t.Errorf("pod = %+v", p)
	}
	if p := ManagerPod("ns", "m", "node-a", "10.0.0.1", NotReady, Readiness(true)); p.Status.Conditions[0].Status != v1.ConditionTrue {
		t.Errorf("Readiness(true) left %+v", p.Status.Conditions)
	}
	r := record.NewFakeRecorder(2)
	r.Event(p, v1.EventTypeNormal, "Reason", "message")
	if got := Events(r); !slices.Equal(got, []string{"Normal Reason message"}) || len(Events(r)) != 0 {
		t.Errorf("Events = %q, then not empty", got)
	}
	ds := ManagerDaemonSet("ns", "ds")
	ds.Spec.Template.Labels["changed"] = "yes"
	if ds.Namespace != "ns" || ds.Name != "ds" || len(ManagerPodLabels) != 1 ||
		!equality.Semantic.DeepEqual(ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, hostpathv1.ManagerNodeSelector()) {
		t.Errorf("ManagerDaemonSet = %+v, want the manager's node affinity and its own labels", ds)
	}
	n := Load[v1.Node](t, "node.json")
	if n.Name != "node-a" {
		t.Errorf("Load = %+v", n)
	}
}

// TestCheckEvents checks the checks (of events and errors) against a test that records failures.
func TestCheckEvents(t *testing.T) {
	got := []string{"Normal Defined node a is ready", "Warning DefinePending try 1 of 5"}
	for _, tc := range []struct {
		name  string
		check func(t testing.TB)
		fails bool
	}{
		{name: "reasons", check: func(t testing.TB) { CheckEvents(t, got, []string{"Normal Defined", "Warning DefinePending"}) }},
		{name: "a start of the message", check: func(t testing.TB) { CheckEvents(t, got, []string{"Normal Defined node", "Warning DefinePending try"}) }},
		{name: "a start of a reason", check: func(t testing.TB) { CheckEvents(t, got, []string{"Normal Def", "Warning DefinePending"}) }, fails: true},
		{name: "another order", check: func(t testing.TB) { CheckEvents(t, got, []string{"Warning DefinePending", "Normal Defined"}) }, fails: true},
		{name: "parts", check: func(t testing.TB) {
			CheckEventParts(t, got, [][]string{{"Normal Defined", "is ready"}, {"Warning DefinePending", "of 5"}})
		}},
		{name: "no error", check: func(t testing.TB) { CheckErr(t, nil, "") }},
		{name: "an error", check: func(t testing.TB) { CheckErr(t, errors.New("a: b"), "b") }},
		{name: "an error, none wanted", check: func(t testing.TB) { CheckErr(t, errors.New("a"), "") }, fails: true},
		{name: "none, one wanted", check: func(t testing.TB) { CheckErr(t, nil, "a") }, fails: true},
		{name: "another error", check: func(t testing.TB) { CheckErr(t, errors.New("a"), "b") }, fails: true},
		{name: "a part missing", check: func(t testing.TB) {
			CheckEventParts(t, got, [][]string{{"Normal Defined", "is not ready"}, {"Warning DefinePending"}})
		}, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			tc.check(r)
			if r.failed != tc.fails {
				t.Errorf("failed = %t, want %t", r.failed, tc.fails)
			}
		})
	}
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		CheckEvents(r, got, []string{"Normal Defined"})
	}()
	if !r.failed {
		t.Error("one event too many did not fail")
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic("Fatalf") }

// TestDescribeWrites checks that the reads of a fake clientset are left
// out and each write is named by its object.
func TestDescribeWrites(t *testing.T) {
	kube := fake.NewClientset(Node("node-a"))
	ctx := t.Context()
	nodes := kube.CoreV1().Nodes()
	_, _ = nodes.Get(ctx, "node-a", metav1.GetOptions{})
	_, _ = nodes.List(ctx, metav1.ListOptions{})
	_, _ = nodes.Create(ctx, Node("node-b"), metav1.CreateOptions{})
	_, _ = nodes.UpdateStatus(ctx, Node("node-a"), metav1.UpdateOptions{})
	_, _ = nodes.Patch(ctx, "node-b", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	_ = nodes.Delete(ctx, "node-b", metav1.DeleteOptions{})
	want := []string{"create nodes node-b", "update nodes/status node-a", "patch nodes node-b", "delete nodes node-b"}
	if got := DescribeWrites(kube.Actions()); !slices.Equal(got, want) {
		t.Errorf("DescribeWrites = %q, want %q", got, want)
	}
	if got := Writes(kube.Actions()); len(got) != len(want) {
		t.Errorf("Writes = %v, want %d", got, len(want))
	}
	if got, none := Patches(kube.Actions(), ""), Patches(kube.Actions(), "pods"); len(got) != 1 || got[0].GetName() != "node-b" || len(none) != 0 {
		t.Errorf("Patches = %v, of pods %v; want the one of node-b, none", got, none)
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(Node("gone"))
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Replace(t, store, list)
	if got := store.ListKeys(); !slices.Equal(got, []string{"node-a"}) {
		t.Errorf("Replace left %q, want [node-a]", got)
	}
}
