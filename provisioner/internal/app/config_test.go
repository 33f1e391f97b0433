package app

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	hdfake "hostpath.dev/hostdefiner/pkg/generated/clientset/versioned/fake"
	"hostpath.dev/provisioner/internal/managers"
)

// TestInformersFeedTheResolver checks the wiring of Complete without an
// API server: the HostDefinition informer starts and syncs with the others,
// and the Resolver reads the targets of a pool from it and from the manager
// pod informer.
func TestInformersFeedTheResolver(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const ns = "hostpath-system"
	o := NewOptions()
	o.NodeName, o.Namespace, o.ManagerNamespace = "n1", ns, ns
	pod := func(name, node string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "hostpath-manager"}},
			Spec:       v1.PodSpec{NodeName: node},
			Status:     v1.PodStatus{PodIP: "198.18.0.1", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
		}
	}
	def := func(node, pool string, phase hostpathv1.Phase) *hostpathv1.HostDefinition {
		return &hostpathv1.HostDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.Name(node, pool)},
			Spec:       hostpathv1.HostDefinitionSpec{NodeName: node, Pool: pool},
			Status:     hostpathv1.HostDefinitionStatus{Phase: phase},
		}
	}
	kube := fake.NewClientset(pod("m1", "n1"), pod("m3", "n3"))
	definer := hdfake.NewSimpleClientset(
		def("n1", "default", hostpathv1.PhaseReady),
		def("n2", "default", hostpathv1.PhasePendingForCreation),
		def("n3", "default", hostpathv1.PhaseError),
	)
	inf := o.newInformers(kube, definer)
	r, err := o.newResolver(inf)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := inf.start(ctx)
	defer stop()
	if err != nil {
		t.Fatal(err)
	}
	ready, pending, err := r.Targets("default")
	if err != nil || !slices.Equal(ready, []string{"n1"}) || !slices.Equal(pending, []string{"n2"}) {
		t.Errorf("Targets(default) = %q, %q, %v; want [n1], [n2]", ready, pending, err)
	}

	// A fixed manager URL watches neither manager pods nor HostDefinitions.
	o.ManagerURL = "http://127.0.0.1:8080"
	inf = o.newInformers(kube, definer)
	if inf.ManagerPods != nil || inf.Definitions != nil {
		t.Errorf("informers with --%s: manager pods %v, definitions %v; want none", FlagManagerURL, inf.ManagerPods, inf.Definitions)
	}
	if r, err = o.newResolver(inf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Targets("default"); !errors.Is(err, managers.ErrNoTargets) {
		t.Errorf("Targets with --%s: %v, want ErrNoTargets", FlagManagerURL, err)
	}
}
