package hostpathtest

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// ManagerPodLabels are the labels of the manager pods in
// manifests/base/manager.
var ManagerPodLabels = map[string]string{"app.kubernetes.io/name": "hostpath-manager"}

// ManagerPod returns a manager pod namespace/name on node with the IP ip,
// labelled ManagerPodLabels, Running and Ready, of UID UID(name), changed
// by opts.
func ManagerPod(namespace, name, node, ip string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: UID(name), Labels: ManagerPodLabels},
		Spec:       v1.PodSpec{NodeName: node},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// ManagerDaemonSet returns the DaemonSet namespace/name of
// manifests/base/manager/daemonset.yaml as far as placement goes: pods
// labelled ManagerPodLabels (copies), the required node affinity
// hostpath.dev/manager NotIn ["false"] (spelled out here, not taken from
// hostpathv1.ManagerNodeSelector, so that a test of it can fail) and no
// toleration (control-plane nodes are opt-in, through
// manifests/components/control-plane).
func ManagerDaemonSet(namespace, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(ManagerPodLabels)},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(ManagerPodLabels)},
				Spec: v1.PodSpec{
					Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
							NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
								{Key: "hostpath.dev/manager", Operator: v1.NodeSelectorOpNotIn, Values: []string{"false"}},
							}}},
						},
					}},
					Tolerations: []v1.Toleration{},
					Containers:  []v1.Container{{Name: "manager", Image: "hostpath.dev/manager:dev"}},
				},
			},
		},
	}
}

// NotReady makes a pod's Ready condition False.
func NotReady(p *v1.Pod) { Readiness(false)(p) }

// Readiness sets a pod's Ready condition: True when ready, else False.
func Readiness(ready bool) func(*v1.Pod) {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	return func(p *v1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodReady {
				p.Status.Conditions[i].Status = status
			}
		}
	}
}

// PodLabels sets a pod's labels.
func PodLabels(labels map[string]string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Labels = labels }
}

// Events takes the events r has recorded so far, each "Type Reason
// message".
func Events(r *record.FakeRecorder) []string {
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

// CheckEvents checks that got, the events Events took, are one per want,
// in order, each starting with its want: "Type Reason" (the whole reason)
// or "Type Reason message" (the start of the message).
func CheckEvents(t testing.TB, got, want []string) {
	t.Helper()
	CheckOutcomes(t, "event", got, want)
}

// CheckOutcomes is CheckEvents for outcomes of another kind, "Reason
// message" lines that a test took from a log, say; kind names one in the
// failures.
func CheckOutcomes(t testing.TB, kind string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%ss = %q, want %d starting with %q", kind, got, len(want), want)
	}
	for i, w := range want {
		if !startsWith(got[i], w) {
			t.Errorf("%s %d = %q, want it to start with %q", kind, i, got[i], w)
		}
	}
}

// CheckEventParts checks that got, the events Events took, are one per
// want, in order, each starting with its want's first part ("Type
// Reason", the whole reason) and containing every other part.
func CheckEventParts(t testing.TB, got []string, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %d: %q", got, len(want), want)
	}
	for i, parts := range want {
		if len(parts) > 0 && !startsWith(got[i], parts[0]) {
			t.Errorf("event %d = %q, want it to start with %q", i, got[i], parts[0])
		}
		for _, part := range parts[min(1, len(parts)):] {
			if !strings.Contains(got[i], part) {
				t.Errorf("event %d = %q, want it to contain %q", i, got[i], part)
			}
		}
	}
}

// startsWith reports whether the event e starts with want, a want of two
// words ("Type Reason") only with the whole reason.
func startsWith(e, want string) bool {
	if strings.Count(want, " ") == 1 {
		return e == want || strings.HasPrefix(e, want+" ")
	}
	return strings.HasPrefix(e, want)
}

// CheckErr checks that err is nil when want is "", else an error whose
// message contains want.
func CheckErr(t testing.TB, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error = %v, want none", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("error = %v, want one containing %q", err, want)
	}
}

// Testdata returns the content of the file testdata/name of the test's
// package.
func Testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Load decodes the JSON file testdata/name of the test's package (an
// object as the API server sends it) into a new T.
func Load[T any](t testing.TB, name string) *T {
	t.Helper()
	obj := new(T)
	Decode(t, Testdata(t, name), obj)
	return obj
}

// Decode decodes the JSON data into obj (a pointer); an error fails the
// test.
func Decode(t testing.TB, data []byte, obj any) {
	t.Helper()
	if err := json.Unmarshal(data, obj); err != nil {
		t.Fatalf("decode %.40q into a %T: %v", data, obj, err)
	}
}
