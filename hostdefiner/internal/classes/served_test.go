package classes

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/runtime/worker/workertest"
)

// provisioners selects the provisioner pods of the tests, as the
// default of --provisioner-selector.
var provisioners = labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "hostpath-provisioner"})

// pod is a provisioner pod on node ("" for one not scheduled), changed
// by opts.
func pod(name, node string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: hostpathtest.UID(name), ResourceVersion: "1",
			Labels: map[string]string{"app.kubernetes.io/name": "hostpath-provisioner"},
		},
		Spec: v1.PodSpec{NodeName: node},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// deleting marks a pod as being deleted.
func deleting(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{} }

// otherApp gives a pod the labels of a manager pod.
func otherApp(p *v1.Pod) { p.Labels = map[string]string{"app.kubernetes.io/name": "hostpath-manager"} }

// withData is wantData with the served keys of nodes.
func withData(nodes ...string) map[string]string {
	d := maps.Clone(wantData)
	for _, n := range nodes {
		d[hostpathv1.ServedKey(n)] = ""
	}
	return d
}

func TestServedNodes(t *testing.T) {
	long := strings.Repeat("n", 64)
	pods := []*v1.Pod{
		pod("a", "node-a"), pod("a-again", "node-a"), pod("b", "node-b"),
		pod("unscheduled", ""), pod("stopping", "node-c", deleting), pod("manager", "node-d", otherApp),
		pod("long", long),
	}
	got := ServedNodes(provisioners, pods)
	if want := []string{long, "node-a", "node-b"}; !slices.Equal(got, want) {
		t.Errorf("ServedNodes = %v, want %v", got, want)
	}
	// The long name is no label value: Data leaves it out.
	if d := Data(names, testClasses(), got); !maps.Equal(d, withData("node-a", "node-b")) {
		t.Errorf("Data = %v, want %v", d, withData("node-a", "node-b"))
	}
}

func TestPodEvents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(c *Controller)
		want  int
	}{
		{name: "scheduled pod added", event: func(c *Controller) { c.onPod(pod("a", "node-a")) }, want: 1},
		{name: "unscheduled pod added", event: func(c *Controller) { c.onPod(pod("a", "")) }},
		{name: "pod of another app added", event: func(c *Controller) { c.onPod(pod("a", "node-a", otherApp)) }},
		{name: "pod scheduled", event: func(c *Controller) { c.onPodUpdate(pod("a", ""), pod("a", "node-a")) }, want: 1},
		{name: "pod being deleted", event: func(c *Controller) { c.onPodUpdate(pod("a", "node-a"), pod("a", "node-a", deleting)) }, want: 1},
		{name: "pod relabelled out", event: func(c *Controller) { c.onPodUpdate(pod("a", "node-a"), pod("a", "node-a", otherApp)) }, want: 1},
		{name: "pod status changed", event: func(c *Controller) {
			c.onPodUpdate(pod("a", "node-a"), pod("a", "node-a", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }))
		}},
		{name: "pod of another app scheduled", event: func(c *Controller) { c.onPodUpdate(pod("a", "", otherApp), pod("a", "node-a", otherApp)) }},
		{name: "scheduled pod deleted", event: func(c *Controller) { c.onPodDelete(pod("a", "node-a", deleting)) }, want: 1},
		{name: "pod deleted, state unknown", event: func(c *Controller) {
			c.onPodDelete(cache.DeletedFinalStateUnknown{Obj: pod("a", "node-a")})
		}, want: 1},
		{name: "unscheduled pod deleted", event: func(c *Controller) { c.onPodDelete(pod("a", "")) }},
		{name: "pod of another app deleted", event: func(c *Controller) { c.onPodDelete(pod("a", "node-a", otherApp)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, nil, nil)
			tc.event(f.c)
			if got := len(workertest.Queued(f.c.queue)); got != tc.want {
				t.Errorf("queued %d keys, want %d", got, tc.want)
			}
		})
	}
}

// labelled is a claim labelled with node, pending or bound to pv.
func labelled(name, node, pv string) *v1.PersistentVolumeClaim {
	c := hostpathtest.Claim("apps", name, hostpathtest.ClaimAnnotation(hostpathv1.ClaimNodeAnnotations[0], node))
	c.Labels = map[string]string{hostpathv1.LabelNode: node}
	c.Spec.VolumeName = pv
	return c
}

// fakeAPI is the fake clientset's part the reactors below need.
type fakeAPI interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	Tracker() clienttesting.ObjectTracker
}

// answerPatches makes kube answer each claim patch with the claim as
// policy leaves it (the fake clientset runs no admission, and the
// claim-labelling policy decides the label, not the patch).
func answerPatches(kube fakeAPI, policy func(*v1.PersistentVolumeClaim)) {
	kube.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		obj, err := kube.Tracker().Get(a.GetResource(), p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		claim := obj.(*v1.PersistentVolumeClaim).DeepCopy()
		policy(claim)
		return true, claim, kube.Tracker().Update(a.GetResource(), claim, claim.Namespace)
	})
}

// relabel makes the fake API server do what the claim-labelling policy
// does on the update of a pending claim whose node is not served.
func relabel(kube fakeAPI) {
	answerPatches(kube, func(c *v1.PersistentVolumeClaim) { c.Labels[hostpathv1.LabelNode] = hostpathv1.NodeLabelUnsorted })
}

// stalePolicy makes kube answer each claim patch as an API server whose
// claim-labelling policy has not seen the new ConfigMap: the claim stays
// as it is, labelled with its node.
func stalePolicy(kube fakeAPI) {
	answerPatches(kube, func(*v1.PersistentVolumeClaim) {})
}

// patched is the names of the claims patched among actions; each patch
// must set the watch label Unsorted, on which the policy runs again.
func patched(actions []clienttesting.Action) []string {
	var out []string
	for _, p := range hostpathtest.Patches(actions, "persistentvolumeclaims") {
		if string(p.GetPatch()) != `{"metadata":{"labels":{"hostpath.dev/node":"Unsorted"}}}` || p.GetPatchType() != "application/merge-patch+json" {
			out = append(out, "unexpected patch "+string(p.GetPatchType())+" "+string(p.GetPatch()))
			continue
		}
		out = append(out, p.GetName())
	}
	slices.Sort(out)
	return out
}

func TestSyncServedNodes(t *testing.T) {
	partOf := map[string]string{"app.kubernetes.io/part-of": "hostpath"}
	claims := []*v1.PersistentVolumeClaim{
		labelled("pending-b", "node-b", ""), labelled("bound-b", "node-b", "pvc-1"),
		labelled("pending-a", "node-a", ""), labelled("pending-c", "node-c", ""),
	}
	for _, tc := range []struct {
		name string
		cm   *v1.ConfigMap
		pods []*v1.Pod
		// want is the data written, nil for no write.
		want map[string]string
		// wantPatched are the claims touched.
		wantPatched []string
	}{
		{name: "nodes added", cm: configMap(wantData, partOf), pods: []*v1.Pod{pod("a", "node-a"), pod("b", "node-b")},
			want: withData("node-a", "node-b")},
		{name: "unchanged", cm: configMap(withData("node-a", "node-b"), partOf), pods: []*v1.Pod{pod("a", "node-a"), pod("b", "node-b")}},
		{name: "a pod stopping: its node's pending claims touched", cm: configMap(withData("node-a", "node-b"), partOf),
			pods: []*v1.Pod{pod("a", "node-a"), pod("b", "node-b", deleting)}, want: withData("node-a"), wantPatched: []string{"pending-b"}},
		{name: "every pod gone", cm: configMap(withData("node-a", "node-b"), partOf),
			want: wantData, wantPatched: []string{"pending-a", "pending-b"}},
		{name: "created: nothing to touch", pods: []*v1.Pod{pod("a", "node-a")}, want: withData("node-a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, testClasses(), tc.cm, tc.pods, claims...)
			relabel(f.kube)
			if err := f.c.sync(ctx, key{}); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var data map[string]string
			for _, a := range hostpathtest.Writes(f.kube.Actions()) {
				if a.GetResource().Resource == "configmaps" {
					data = a.(interface{ GetObject() runtime.Object }).GetObject().(*v1.ConfigMap).Data
				}
			}
			if (data == nil) != (tc.want == nil) || !maps.Equal(data, tc.want) {
				t.Errorf("wrote data %v, want %v", data, tc.want)
			}
			if got := patched(f.kube.Actions()); !slices.Equal(got, tc.wantPatched) {
				t.Errorf("patched claims %v, want %v", got, tc.wantPatched)
			}
			if len(f.c.unserved) != 0 {
				t.Errorf("nodes left to touch: %v", f.c.unserved)
			}
		})
	}
}

// TestTouchRetried: a claim still labelled with its node after the touch
// (the API server's policy has not seen the new ConfigMap yet) is an
// error, and the next sync, which writes nothing, touches it again; a
// node served again is not touched; after touchTries syncs the node is
// given up.
func TestTouchRetried(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	partOf := map[string]string{"app.kubernetes.io/part-of": "hostpath"}
	f := newFixture(t, testClasses(), configMap(withData("node-a", "node-b"), partOf), nil,
		labelled("pending-a", "node-a", ""), labelled("pending-b", "node-b", ""))
	stalePolicy(f.kube)
	if err := f.c.sync(ctx, key{}); err == nil {
		t.Fatal("sync: no error, want the claims still labelled")
	}
	if got := patched(f.kube.Actions()); !slices.Equal(got, []string{"pending-a", "pending-b"}) {
		t.Errorf("patched %v, want both", got)
	}
	// The informer sees the update; node-a runs a provisioner pod again.
	f.updateCache(t)
	if err := f.inf.Pods.GetIndexer().Add(pod("a", "node-a")); err != nil {
		t.Fatal(err)
	}
	f.kube.ClearActions()
	relabel(f.kube)
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if got := patched(f.kube.Actions()); !slices.Equal(got, []string{"pending-b"}) {
		t.Errorf("second sync patched %v, want pending-b", got)
	}
	if len(f.c.unserved) != 0 {
		t.Errorf("nodes left to touch: %v", f.c.unserved)
	}
}

// TestTouchGivenUp: a claim that the policy keeps labelling with its node
// (an API server that never sees the new ConfigMap) is tried touchTries
// times, then left to the next update that changes its node.
func TestTouchGivenUp(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	partOf := map[string]string{"app.kubernetes.io/part-of": "hostpath"}
	f := newFixture(t, testClasses(), configMap(withData("node-b"), partOf), nil, labelled("pending-b", "node-b", ""))
	stalePolicy(f.kube)
	for i := 1; i < touchTries; i++ {
		if err := f.c.sync(ctx, key{}); err == nil {
			t.Fatalf("sync %d: no error", i)
		}
		f.updateCache(t)
	}
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync %d: %v, want the node given up", touchTries, err)
	}
	if got := len(patched(f.kube.Actions())); got != touchTries {
		t.Errorf("patched %d times, want %d", got, touchTries)
	}
	if len(f.c.unserved) != 0 {
		t.Errorf("nodes left to touch: %v", f.c.unserved)
	}
}

// TestTouchClaimGone: a claim deleted between the list and the patch is
// done.
func TestTouchClaimGone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, nil, nil, nil, labelled("pending-b", "node-b", ""))
	f.kube.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(v1.Resource("persistentvolumeclaims"), a.(clienttesting.PatchAction).GetName())
	})
	if err := f.c.touch(ctx, "node-b", []v1.PersistentVolumeClaim{*labelled("pending-b", "node-b", "")}); err != nil {
		t.Errorf("touch: %v, want none", err)
	}
}

// TestTouchManyNodes: the claims of more than perNodeLists nodes are
// listed at once, by every claim labelled with a node.
func TestTouchManyNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	partOf := map[string]string{"app.kubernetes.io/part-of": "hostpath"}
	var nodes []string
	for i := range perNodeLists + 2 {
		nodes = append(nodes, fmt.Sprintf("node-%d", i))
	}
	unsorted := labelled("unsorted", "x", "")
	unsorted.Labels[hostpathv1.LabelNode] = hostpathv1.NodeLabelUnsorted
	f := newFixture(t, testClasses(), configMap(withData(nodes...), partOf), []*v1.Pod{pod("p0", "node-0")},
		labelled("pending-0", "node-0", ""), labelled("pending-1", "node-1", ""), labelled("bound-2", "node-2", "pvc-2"),
		labelled("pending-8", "node-8", ""), labelled("pending-other", "other", ""), unsorted)
	relabel(f.kube)
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	var lists []string
	for _, a := range f.kube.Actions() {
		if l, ok := a.(clienttesting.ListAction); ok && a.GetResource().Resource == "persistentvolumeclaims" {
			lists = append(lists, l.GetListRestrictions().Labels.String())
		}
	}
	if want := []string{"hostpath.dev/node,hostpath.dev/node notin (Multihost,NodeGone,Unsorted)"}; !slices.Equal(lists, want) {
		t.Errorf("claim lists %q, want %q", lists, want)
	}
	if got, want := patched(f.kube.Actions()), []string{"pending-1", "pending-8"}; !slices.Equal(got, want) {
		t.Errorf("patched %v, want %v", got, want)
	}
}

// updateCache puts the ConfigMap of the API server in the cache, as the
// informer would.
func (f *fixture) updateCache(t *testing.T) {
	t.Helper()
	cm, err := f.kube.CoreV1().ConfigMaps(testNamespace).Get(t.Context(), hostpathv1.ClassesConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.inf.ConfigMaps.GetIndexer().Update(cm); err != nil {
		t.Fatal(err)
	}
}

// TestTouchWithoutPolicy: where the claim-labelling policy does not run
// (its binding removed; the fake clientset runs no admission), the touch
// itself leaves the claim Unsorted, which every instance watches: done.
func TestTouchWithoutPolicy(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, nil, nil, nil, labelled("pending-b", "node-b", ""))
	if err := f.c.touch(ctx, "node-b", []v1.PersistentVolumeClaim{*labelled("pending-b", "node-b", "")}); err != nil {
		t.Fatalf("touch: %v, want none", err)
	}
	got, err := f.kube.CoreV1().PersistentVolumeClaims("apps").Get(ctx, "pending-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Labels[hostpathv1.LabelNode]; v != hostpathv1.NodeLabelUnsorted {
		t.Errorf("%s=%q after the touch, want %s", hostpathv1.LabelNode, v, hostpathv1.NodeLabelUnsorted)
	}
}
