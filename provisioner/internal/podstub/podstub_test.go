package podstub

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/tools/cache"

	"hostpath.dev/api/runtime/component"
)

// daemon is the node affinity the DaemonSet controller gives its pod for
// node (a term of the template's expressions, plus the node by name).
func daemon(node string) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "hostpath.dev/provisioner", Operator: v1.NodeSelectorOpNotIn, Values: []string{"false"}}},
			MatchFields:      []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}}
}

// pod returns a pod ns/name on node (scheduled when scheduled), with its
// Ready condition when ready is not "" and changed by opts.
func pod(name, node string, scheduled bool, ready v1.ConditionStatus, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "5", Labels: map[string]string{"app": "p"}},
		Spec:       v1.PodSpec{Affinity: daemon(node)},
	}
	if scheduled {
		p.Spec.NodeName = node
	}
	if ready != "" {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: ready}}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func terminating(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{} }

// TestFrom: a pod as the API server sends it becomes a Pod with its
// metadata but its labels, node, DaemonSet node, IP and readiness, and
// nothing else.
func TestFrom(t *testing.T) {
	gone := metav1.Now()
	full := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"a": "b"}, DeletionTimestamp: &gone, Finalizers: []string{"f"},
			OwnerReferences: []metav1.OwnerReference{{Name: "ds"}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", Affinity: daemon("n1"), Tolerations: []v1.Toleration{{Key: "k"}},
			Containers: []v1.Container{{Name: "c"}}, Volumes: []v1.Volume{{Name: "v"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "198.18.1.9", Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: v1.ConditionTrue, Reason: "r", LastTransitionTime: gone}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true}}},
	}
	want := &Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "7", DeletionTimestamp: &gone},
		NodeName:   "n1", DaemonNode: "n1", PodIP: "198.18.1.9", Ready: true,
	}
	if got := From(full); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("From (-want +got):\n%s", diff.Diff(want, got))
	}

	for _, tc := range []struct {
		name       string
		affinity   *v1.Affinity
		daemonNode string
	}{
		{"the DaemonSet's node", daemon("n2"), "n2"},
		{"no affinity", nil, ""},
		{"an affinity by label only", &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"z"}}}}}}}}, ""},
		{"two nodes by name", &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}}}, ""},
		{"not by name", &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpNotIn, Values: []string{"a"}}}}}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := From(&v1.Pod{Spec: v1.PodSpec{Affinity: tc.affinity}}).DaemonNode; got != tc.daemonNode {
				t.Errorf("DaemonNode = %q, want %q", got, tc.daemonNode)
			}
		})
	}
}

// TestServingAndNode: Serving says what component.PodServing says of the
// pod it was made from, and Node is the scheduled node, else the
// DaemonSet's.
func TestServingAndNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		serving bool
		node    string
	}{
		{"Ready", pod("a", "n1", true, v1.ConditionTrue), true, "n1"},
		{"not Ready", pod("a", "n1", true, v1.ConditionFalse), false, "n1"},
		{"readiness unknown", pod("a", "n1", true, v1.ConditionUnknown), false, "n1"},
		{"no Ready condition", pod("a", "n1", true, ""), false, "n1"},
		{"terminating", pod("a", "n1", true, v1.ConditionTrue, terminating), false, "n1"},
		{"not scheduled", pod("a", "n2", false, v1.ConditionTrue), false, "n2"},
		{"nothing", &v1.Pod{}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := From(tc.pod)
			if got := s.Serving(); got != tc.serving || got != component.PodServing(tc.pod) {
				t.Errorf("Serving = %v, want %v (component.PodServing: %v)", got, tc.serving, component.PodServing(tc.pod))
			}
			if got := s.Node(); got != tc.node {
				t.Errorf("Node = %q, want %q", got, tc.node)
			}
		})
	}
}

// TestOfAndIndex: Of reads a Pod and a tombstone's Pod and nothing else;
// IndexByNodeName indexes a scheduled Pod by its node only.
func TestOfAndIndex(t *testing.T) {
	s := From(pod("a", "n1", true, v1.ConditionTrue))
	for _, tc := range []struct {
		name string
		obj  any
		ok   bool
	}{
		{"a Pod", s, true},
		{"a tombstone", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: s}, true},
		{"a *v1.Pod", pod("a", "n1", true, v1.ConditionTrue), false},
		{"a tombstone of a *v1.Pod", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: pod("a", "n1", true, v1.ConditionTrue)}, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := Of(tc.obj); ok != tc.ok || (ok && got != s) {
				t.Errorf("Of = %v, %v; want the Pod: %v", got, ok, tc.ok)
			}
		})
	}
	for _, tc := range []struct {
		name string
		obj  any
		want []string
	}{
		{"scheduled", s, []string{"n1"}},
		{"not scheduled", From(pod("b", "n2", false, v1.ConditionTrue)), nil},
		{"a *v1.Pod", pod("a", "n1", true, v1.ConditionTrue), nil},
	} {
		t.Run("index "+tc.name, func(t *testing.T) {
			if got, err := IndexByNodeName(tc.obj); err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("IndexByNodeName = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestLister: every Pod of one namespace, from an informer-like cache;
// other namespaces and objects of other types are not listed.
func TestLister(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	elsewhere := pod("elsewhere", "n4", true, v1.ConditionTrue)
	elsewhere.Namespace = "ns2"
	for _, obj := range []any{From(pod("a", "n1", true, v1.ConditionTrue)), From(pod("b", "n2", false, "")), From(elsewhere),
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "typed", Labels: map[string]string{"app": "p"}}}} {
		if err := indexer.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := NewLister(indexer, "ns").List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if want := []string{"a", "b"}; !slices.Equal(names, want) {
		t.Errorf("List = %q, want %q", names, want)
	}
}

// TestDeepCopyObject: a copy shares no pointer with its original.
func TestDeepCopyObject(t *testing.T) {
	s := From(pod("a", "n1", true, v1.ConditionTrue, terminating))
	c, ok := s.DeepCopyObject().(*Pod)
	if !ok || !equality.Semantic.DeepEqual(c, s) {
		t.Fatalf("DeepCopyObject = %#v, want a copy of %#v", c, s)
	}
	c.Name = "changed"
	c.DeletionTimestamp.Time = c.DeletionTimestamp.Add(1)
	if s.Name != "a" || !s.DeletionTimestamp.IsZero() {
		t.Errorf("changing the copy changed the original: %#v", s)
	}
	if s.GetObjectKind().GroupVersionKind().Kind != "" {
		t.Errorf("a Pod carries no kind")
	}
}
