package hostpathtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

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

// NotReady makes a pod's Ready condition False.
func NotReady(p *v1.Pod) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			p.Status.Conditions[i].Status = v1.ConditionFalse
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

// Load decodes the JSON file testdata/name of the test's package (an
// object as the API server sends it) into a new T.
func Load[T any](t testing.TB, name string) *T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := new(T)
	if err := json.Unmarshal(b, obj); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return obj
}
