package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/e2e/framework"
)

// TestProvisionerSelectedNodeGone: a WaitForFirstConsumer claim whose
// scheduler-selected node was deleted, or runs no provisioner, goes back to
// the scheduler (selected-node removed, a Rescheduling event saying why)
// instead of staying Pending; a pod using it then runs on a real node with
// the volume there. A claim pinned by annotation to such a node keeps its
// node and its event.
func TestProvisionerSelectedNodeGone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	idle := e.nodeWithoutProvisioner(ctx, t)
	ghost := "e2e-deleted-" + framework.RandomSuffix()
	tests := []struct{ name, node, why string }{
		{"deleted-node", ghost, "does not exist any more"},
		{"no-provisioner", idle, "runs no hostpath provisioner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pvc := e.claim(ctx, t, tc.name, classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, map[string]string{annSelectedNode: tc.node})
			e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, "Rescheduling",
				fmt.Sprintf("Node %q, which the scheduler selected, %s: removing %s", tc.node, tc.why, annSelectedNode))
			framework.WaitFor(ctx, t, provisionTimeout, "claim "+pvc.Name+" to lose "+annSelectedNode, func(ctx context.Context) (bool, error) {
				c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, pvc.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if v, ok := c.Annotations[annSelectedNode]; ok {
					return false, fmt.Errorf("%s is %q", annSelectedNode, v)
				}
				return true, nil
			})
			pod, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, tc.name, "", pvc.Name, "echo moved > /data/f"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pod = e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
			_, pv := e.waitBound(ctx, t, pvc.Name)
			if got := pv.Annotations[annPVNode]; got != pod.Spec.NodeName {
				t.Errorf("PV %s is on node %q, want the pod's node %q", pv.Name, got, pod.Spec.NodeName)
			}
			if data, err := os.ReadFile(e.nodePath(t, pod.Spec.NodeName, pv, "f")); err != nil || string(data) != "moved\n" {
				t.Errorf("File on %s = %q, %v; want \"moved\\n\"", pod.Spec.NodeName, data, err)
			}
			e.deleteAndWaitGone(ctx, t, pod.Name, pvc.Name)
		})
	}

	// Pinned by annotation: the node is the user's choice, never replaced.
	pinned := e.claim(ctx, t, "pinned", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce,
		map[string]string{annProvisionOnNode: ghost, annSelectedNode: ghost})
	e.waitEvent(ctx, t, pinned.Name, corev1.EventTypeWarning, "NodeNotFound", fmt.Sprintf("Node %q named by %s does not exist", ghost, annProvisionOnNode))
	got, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, pinned.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[annSelectedNode] != ghost || got.Status.Phase != corev1.ClaimPending {
		t.Errorf("Pinned claim: %s=%q, phase %s; want %q kept and Pending", annSelectedNode, got.Annotations[annSelectedNode], got.Status.Phase, ghost)
	}
	evs, err := e.events(ctx, pinned.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Reason == "Rescheduling" {
			t.Errorf("Pinned claim got event %s: %s, want none", ev.Reason, ev.Message)
		}
	}
}
