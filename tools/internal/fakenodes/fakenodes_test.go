package fakenodes

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/e2e/framework/localcluster"
)

func TestRunAndDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-node-1"}}
	client := fake.NewClientset(real)
	o := Options{Prefix: "fake-", Count: 3, RenewInterval: 30 * time.Second, Workers: 2}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := false
	if err := Run(ctx, client, o, func() { ready = true; cancel() }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !ready {
		t.Fatal("Run returned without calling ready")
	}
	bg := context.Background()
	for _, name := range []string{"fake-1", "fake-2", "fake-3"} {
		n, err := client.CoreV1().Nodes().Get(bg, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
		if n.Labels[localcluster.FakeNodeLabel] != "true" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != localcluster.FakeNodeLabel {
			t.Errorf("node %s: labels %v taints %v", name, n.Labels, n.Spec.Taints)
		}
		if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != corev1.NodeReady ||
			n.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("node %s: conditions %v, want Ready=True", name, n.Status.Conditions)
		}
		l, err := client.CoordinationV1().Leases(LeaseNamespace).Get(bg, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease %s: %v", name, err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name || l.Spec.RenewTime == nil {
			t.Errorf("lease %s: spec %+v", name, l.Spec)
		}
	}

	deleted, err := Delete(bg, client, 2)
	if err != nil || deleted != 3 {
		t.Fatalf("Delete = %d, %v; want 3, nil", deleted, err)
	}
	nodes, err := client.CoreV1().Nodes().List(bg, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "hostpath-node-1" {
		t.Errorf("after Delete the nodes are %v, want only the real one", nodes.Items)
	}
}

func TestRunRefusesRealNode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fake-1"}})
	o := Options{Prefix: "fake-", Count: 1, RenewInterval: 30 * time.Second, Workers: 1}
	if err := Run(ctx, client, o, nil); err == nil {
		t.Fatal("Run adopted a node that is not a fake node")
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []Options{
		{Prefix: "", Count: 1, RenewInterval: time.Second, Workers: 1},
		{Prefix: "f-", Count: 0, RenewInterval: time.Second, Workers: 1},
		{Prefix: "f-", Count: 1, RenewInterval: time.Minute, Workers: 1},
		{Prefix: "f-", Count: 1, RenewInterval: time.Second, Workers: 0},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", o)
		}
	}
}
