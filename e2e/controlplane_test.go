package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// The names of control-plane nodes and of the component that adds the node
// agents to them (docs/operations.md, "Node agents").
const (
	// controlPlaneRole is kubeadm's label and taint key of control-plane
	// nodes.
	controlPlaneRole = "node-role.kubernetes.io/control-plane"
	// controlPlaneComponent lets the node agents run on control-plane
	// nodes; the e2e install leaves it out.
	controlPlaneComponent = "manifests/components/control-plane"
)

// TestProvisionerControlPlaneNodeOptIn: the node agents stay off
// control-plane nodes unless the component adds them, so a claim cannot put
// a volume on one. A Node labelled and tainted
// node-role.kubernetes.io/control-plane:NoSchedule, as kubeadm makes them
// (no kubelet runs it, and no taint of the fake nodes keeps the agents off
// it: only the control-plane one), gets neither a manager nor a
// provisioner pod; a claim pinned to it gets, from the one elected
// instance, a Warning NoProvisionerOnNode saying that control-plane nodes
// are opt-in and naming the component, and no volume: it stays Pending,
// and no real node's pool gets a directory for it.
func TestProvisionerControlPlaneNodeOptIn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	name := "e2e-control-plane-" + framework.RandomSuffix()
	e.f.APINode(ctx, t, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			localcluster.FakeNodeLabel: "true", // not a real node to the other tests
			corev1.LabelHostname:       name,
			controlPlaneRole:           "",
		}},
		// Unschedulable: no pod of the tests running alongside lands on it
		// (the host definer tolerates the control-plane taint); the
		// DaemonSets ignore it, so it changes nothing for them.
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: controlPlaneRole, Effect: corev1.TaintEffectNoSchedule}}},
	})

	pvc := e.claim(ctx, t, "pinned", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: name})
	ev := e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, "NoProvisionerOnNode", fmt.Sprintf("No hostpath provisioner runs on node %q", name))
	t.Logf("Event: %s", ev.Message)
	for _, want := range []string{"is a control-plane node", "control-plane nodes are opt-in", controlPlaneComponent} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("Event %q does not say %q", ev.Message, want)
		}
	}
	if n := e.eventNode(ev); n == "" {
		t.Errorf("Event %+v comes from no provisioner instance", ev.Source)
	}

	e.checkNoVolume(ctx, t, pvc)
	if pods := e.podsOnNode(ctx, t, name); len(pods) != 0 {
		t.Errorf("Pods of %s on control-plane node %s: %v, want none", framework.SystemNamespace, name, pods)
	}
}

// podsOnNode returns the names of the product's pods bound to node.
func (e *provEnv) podsOnNode(ctx context.Context, t *testing.T, node string) []string {
	t.Helper()
	pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}
