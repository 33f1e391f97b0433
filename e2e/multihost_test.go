package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

const (
	// classShared is the example multihost class of manifests/.
	classShared = "hostpath-shared"
	// annPVNodes lists the nodes that hold a multihost directory.
	annPVNodes = "hostpath.dev/nodes"
	// annPVPendingNodes lists the nodes that were being defined (or whose
	// manager was not Ready) when it was made: the host definer gives them
	// the directory later.
	annPVPendingNodes = "hostpath.dev/pending-nodes"
	// managerSelector selects the manager pods.
	managerSelector = "app.kubernetes.io/name=hostpath-manager"
)

// checkMultihostPV checks what a user sees on a multihost PV.
func (e *provEnv) checkMultihostPV(t *testing.T, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	t.Helper()
	if pv.Spec.NodeAffinity != nil {
		t.Errorf("PV %s has node affinity %+v, want none", pv.Name, pv.Spec.NodeAffinity)
	}
	if hp := pv.Spec.HostPath; hp == nil || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("PV %s hostPath = %+v, want type Directory", pv.Name, hp)
	}
	want := map[string]string{
		annPVMode: "multihost", annPVProvisionedBy: provisionerName, annPVPool: "default",
		annPVClaimNamespace: pvc.Namespace, annPVClaimName: pvc.Name,
		annPVNodes: strings.Join(e.nodes, ","),
	}
	for k, v := range want {
		if got := pv.Annotations[k]; got != v {
			t.Errorf("PV %s annotation %s = %q, want %q", pv.Name, k, got, v)
		}
	}
	if got, ok := pv.Annotations[annPVNode]; ok {
		t.Errorf("PV %s has annotation %s = %q, want none in multihost mode", pv.Name, annPVNode, got)
	}
}

// TestMultihostDaemonSet: the pods of a DaemonSet share one multihost claim;
// each writes into its own node's copy of the directory and sees only its
// node's files; deleting the claim removes the directory on every node.
func TestMultihostDaemonSet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	pvc := e.claim(ctx, t, "shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	pvc, pv := e.waitBound(ctx, t, pvc.Name)
	e.checkMultihostPV(t, pvc, pv)

	ds, err := e.f.Client.AppsV1().DaemonSets(e.ns).Create(ctx, framework.SharedDaemonSet(e.ns, "writers", pvc.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := e.f.ReadyPodsByNode(ctx, t, e.ns, "app=writers", e.nodes, provisionTimeout)
	for _, node := range e.nodes {
		dir := e.nodePath(t, node, pv)
		if data, err := os.ReadFile(filepath.Join(dir, node)); err != nil || strings.TrimSpace(string(data)) != node {
			t.Errorf("Node %s's copy: file %s = %q, %v; want its own name", node, node, data, err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("Node %s's copy holds %d entries, want only its own file", node, len(entries))
		}
		out, err := e.f.Kubectl(ctx, "-n", e.ns, "exec", pods[node].Name, "--", "ls", "/data")
		if err != nil || strings.TrimSpace(out) != node {
			t.Errorf("ls /data in the pod on %s = %q, %v; want only %s", node, out, err, node)
		}
	}

	if err := e.f.Client.AppsV1().DaemonSets(e.ns).Delete(ctx, ds.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the DaemonSet's pods to be gone", func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writers"})
		if err != nil {
			return false, err
		}
		if len(list.Items) != 0 {
			return false, fmt.Errorf("%d pods left", len(list.Items))
		}
		return true, nil
	})
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// waitGoneEverywhere waits until the PV is gone and no node holds its
// directory.
func (e *provEnv) waitGoneEverywhere(ctx context.Context, t *testing.T, pv *corev1.PersistentVolume) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" and its directory on every node to be gone", func(ctx context.Context) (bool, error) {
		if _, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("PV still there (%v)", err)
		}
		for _, node := range e.nodes {
			if _, err := os.Stat(e.nodePath(t, node, pv)); !errors.Is(err, os.ErrNotExist) {
				return false, fmt.Errorf("directory still on %s (stat: %v)", node, err)
			}
		}
		return true, nil
	})
}

// TestMultihostRetain: with reclaim policy Retain every node's copy stays,
// with its data, and the PV is Released.
func TestMultihostRetain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	class := e.storageClassWithPolicy(ctx, t, "shared-retain", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain, map[string]string{"mode": "multihost"})

	pvc := e.claim(ctx, t, "kept", class, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	t.Cleanup(func() {
		_ = e.f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		for _, node := range e.nodes {
			_ = os.RemoveAll(e.nodePath(t, node, pv))
		}
	})
	e.writeOnEveryNode(ctx, t, pvc.Name, "echo kept > /data/f")
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitReleased(ctx, t, pv)
	for _, node := range e.nodes {
		if data, err := os.ReadFile(e.nodePath(t, node, pv, "f")); err != nil || string(data) != "kept\n" {
			t.Errorf("Retained copy on %s = %q, %v; want \"kept\\n\"", node, data, err)
		}
	}
}

// writeOnEveryNode runs command in a pod with the claim at /data on every
// real node, one after the other, each to completion.
func (e *provEnv) writeOnEveryNode(ctx context.Context, t *testing.T, claim, command string) {
	t.Helper()
	for _, node := range e.nodes {
		pod := "writer-" + node
		if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, pod, node, claim, command), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.f.WaitForPodSucceeded(ctx, t, e.ns, pod, provisionTimeout)
		if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// labelNoManager is the node label that keeps the manager DaemonSet off a
// node (manifests/base/manager/daemonset.yaml).
const labelNoManager = hostpathv1.LabelManager

// setNoManager labels node so that its manager pod goes (on) or lets it come
// back (off), and waits until it is gone or Ready again.
func (e *provEnv) setNoManager(ctx context.Context, t *testing.T, node string, on bool) {
	t.Helper()
	value := "null"
	if on {
		value = `"false"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, labelNoManager, value))
	if _, err := e.f.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("Label node %s: %v", node, err)
	}
	if !on {
		e.f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, []string{node}, provisionTimeout)
		return
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the manager pod on "+node+" to be gone", func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: managerSelector, FieldSelector: "spec.nodeName=" + node,
		})
		if err != nil {
			return false, err
		}
		if len(list.Items) != 0 {
			return false, fmt.Errorf("%d manager pods on %s", len(list.Items), node)
		}
		return true, nil
	})
}

// setupMultihost is setupHostDefiner once every real node has a Ready
// definition of the default pool: the nodes a multihost claim goes to.
func setupMultihost(ctx context.Context, t *testing.T) *hdEnv {
	t.Helper()
	e := setupHostDefiner(ctx, t)
	for _, node := range e.nodes {
		e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
	}
	return e
}

// TestMultihostNodeWithoutManager: a node whose manager is kept off leaves
// the pool (its HostDefinition is deleted), so a multihost claim made
// meanwhile gets directories on the other nodes only, with no pending node;
// once the node's manager is back the host definer defines it again, gives
// it the directory (backfill) and records it in the PV; deleting the claim
// removes every copy.
func TestMultihostNodeWithoutManager(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	here, away := e.nodes[0], e.nodes[1]
	e.setNoManager(ctx, t, away, true)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
		defer cancel()
		e.setNoManager(cctx, t, away, false)
	})
	e.waitGone(ctx, t, away, "default")

	pvc := e.claim(ctx, t, "while-away", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	others := slices.DeleteFunc(slices.Clone(e.nodes), func(n string) bool { return n == away })
	if got, want := pv.Annotations[annPVNodes], strings.Join(others, ","); got != want {
		t.Errorf("PV %s annotation %s = %q, want %q", pv.Name, annPVNodes, got, want)
	}
	if got, ok := pv.Annotations[annPVPendingNodes]; ok {
		t.Errorf("PV %s annotation %s = %q, want none (the node left)", pv.Name, annPVPendingNodes, got)
	}
	if _, err := os.Stat(e.nodePath(t, here, pv)); err != nil {
		t.Errorf("Directory on %s: %v", here, err)
	}
	if _, err := os.Stat(e.nodePath(t, away, pv)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Directory on %s, whose manager is away: %v, want none yet", away, err)
	}

	e.setNoManager(ctx, t, away, false)
	e.waitPhase(ctx, t, away, "default", hostpathv1.PhaseReady)
	if info, err := os.Stat(e.nodePath(t, away, pv)); err != nil || !info.IsDir() {
		t.Errorf("Directory on %s once its manager is back: %v", away, err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to list "+away, func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if want := strings.Join(e.nodes, ","); got.Annotations[annPVNodes] != want {
			return false, fmt.Errorf("%s = %q, want %q", annPVNodes, got.Annotations[annPVNodes], want)
		}
		return true, nil
	})
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}
