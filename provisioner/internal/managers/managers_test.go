package managers

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func managerPod(name, node, ip string, ready bool) *v1.Pod {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: name, Labels: map[string]string{"app": "m"}},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{PodIP: ip, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status}}},
	}
}

func TestResolver(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	indexer := factory.Core().V1().Pods().Informer().GetIndexer()
	for _, p := range []*v1.Pod{
		managerPod("m1", "n1", "198.18.1.5", true),
		managerPod("m2", "n2", "198.18.2.5", false),
		managerPod("m3", "n3", "", true),
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	r := NewResolver(factory.Core().V1().Pods().Lister().Pods("sys"), labels.SelectorFromSet(labels.Set{"app": "m"}), 8080)

	c, err := r.ForNode("n1")
	if err != nil || c.BaseURL() != "http://198.18.1.5:8080" {
		t.Fatalf("ForNode(n1) = %v, %v; want http://198.18.1.5:8080", c, err)
	}
	if again, _ := r.ForNode("n1"); again != c {
		t.Errorf("ForNode(n1) made a new client for the same address")
	}
	for _, node := range []string{"n2", "n3", "n4"} {
		var nf *NotFoundError
		if _, err := r.ForNode(node); !errors.As(err, &nf) || nf.Node != node {
			t.Errorf("ForNode(%s) error = %v, want NotFoundError", node, err)
		}
	}
	// A restarted manager pod with a new IP gets a new client.
	if err := indexer.Update(managerPod("m1", "n1", "198.18.1.9", true)); err != nil {
		t.Fatal(err)
	}
	if c, err := r.ForNode("n1"); err != nil || c.BaseURL() != "http://198.18.1.9:8080" {
		t.Errorf("ForNode(n1) after restart = %v, %v; want the new address", c, err)
	}

	static, err := NewStaticResolver("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := static.ForNode("any"); err != nil || c.BaseURL() != "http://127.0.0.1:8080" {
		t.Errorf("static ForNode = %v, %v", c, err)
	}
}
