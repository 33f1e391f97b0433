package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

// TestAllowedTopologies: a class whose allowedTopologies name one node (a
// pool on some nodes only: docs/volumes.md, "Classes of some nodes", the
// chart's storageClasses[].nodeSelector) gets volumes there only. The
// scheduler puts a WaitForFirstConsumer claim's pod on that node although
// the pod prefers the other; a claim pinned to the other node by
// annotation fails with an event naming the topologies, and is Bound once
// pinned to the allowed one; a multihost class with allowedTopologies is
// refused with an event.
func TestAllowedTopologies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	allowed, other := e.nodes[1], e.nodes[0]
	node, err := e.f.Client.CoreV1().Nodes().Get(ctx, allowed, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := node.Labels[corev1.LabelHostname]
	topologyClass := func(what string, binding storagev1.VolumeBindingMode, mode string) string {
		return e.createStorageClass(ctx, t, &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: "e2e-" + what + "-" + framework.RandomSuffix()},
			Provisioner:       provisionerName,
			Parameters:        map[string]string{hostpathv1.ParamMode: mode},
			VolumeBindingMode: &binding,
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
				{Key: corev1.LabelHostname, Values: []string{host}},
			}}},
		})
	}

	// The scheduler keeps the pod off the node it prefers.
	wffc := topologyClass("topology-wffc", storagev1.VolumeBindingWaitForFirstConsumer, hostpathv1.ModeNode)
	scheduled := e.claim(ctx, t, "scheduled", wffc, "1Mi", corev1.ReadWriteOnce, nil)
	pod := writerPod(e.ns, "prefers-other", "", scheduled.Name, "echo here > /data/here")
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight:     100,
		Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{other}}}},
	}}}}
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout); got.Spec.NodeName != allowed {
		t.Errorf("Pod %s ran on %s, want %s, the only node in its class's allowedTopologies", pod.Name, got.Spec.NodeName, allowed)
	}
	_, pv := e.waitBound(ctx, t, scheduled.Name)
	if pv.Annotations[hostpathv1.AnnotationNode] != allowed {
		t.Errorf("PV %s is on node %q, want %s", pv.Name, pv.Annotations[hostpathv1.AnnotationNode], allowed)
	}

	// Pinned by annotation: refused on the other node, Bound on the
	// allowed one.
	immediate := topologyClass("topology-immediate", storagev1.VolumeBindingImmediate, hostpathv1.ModeNode)
	refused := e.claim(ctx, t, "pinned-other", immediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: other})
	e.waitEvent(ctx, t, refused.Name, corev1.EventTypeWarning, "ProvisioningFailed", "is not in the allowedTopologies of StorageClass "+immediate)
	e.checkNoVolume(ctx, t, refused)
	pinned := e.claim(ctx, t, "pinned-allowed", immediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: allowed})
	_, pinnedPV := e.waitBound(ctx, t, pinned.Name)

	shared := topologyClass("topology-shared", storagev1.VolumeBindingImmediate, hostpathv1.ModeMultihost)
	multihost := e.claim(ctx, t, "shared", shared, "1Mi", corev1.ReadWriteMany, nil)
	e.waitEvent(ctx, t, multihost.Name, corev1.EventTypeWarning, "ProvisioningFailed", `are not supported in mode "multihost"`)
	e.checkNoVolume(ctx, t, multihost)

	e.deleteAndWaitGone(ctx, t, pod.Name, scheduled.Name)
	e.waitGoneEverywhere(ctx, t, pv)
	e.deleteAndWaitGone(ctx, t, "", pinned.Name)
	e.waitGoneEverywhere(ctx, t, pinnedPV)
}
