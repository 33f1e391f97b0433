package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"hostpath.dev/e2e/framework"
)

// classLocal is the example class of volumeType local (manifests/).
const classLocal = "hostpath-local"

// TestLocalVolumes: a claim of the class hostpath-local gets a PV with
// spec.local (the same directory) and required node affinity; the kubelet
// then manages it as its own: a pod with fsGroup sees its group on the
// files it makes, and the kubelet's metrics (through the API server's node
// proxy) report kubelet_volume_stats_used_bytes for the claim. Deleting the
// claim removes the directory. A multihost class of volumeType local is
// refused with an event naming the parameter.
func TestLocalVolumes(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	pvc := e.claim(ctx, t, "local", classLocal, "8Mi", corev1.ReadWriteOnce, nil)
	const group = 4321
	pod := writerPod(e.ns, "fsgroup", "", pvc.Name,
		"echo hello > /data/new && stat -c 'group=%g' /data/new && dd if=/dev/zero of=/data/fill bs=1M count=4 2>/dev/null && sleep 3600")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), FSGroup: ptr.To[int64](group)}
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := e.f.WaitForPodRunning(ctx, t, e.ns, pod.Name, provisionTimeout)
	node := running.Spec.NodeName
	_, pv := e.waitBound(ctx, t, pvc.Name)

	if pv.Spec.Local == nil || pv.Spec.HostPath != nil || pv.Spec.Local.Path == "" {
		t.Fatalf("PV %s source = %+v, want spec.local and no hostPath", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	if got := nodeAffinityHosts(pv); len(got) != 1 || got[0] != node {
		t.Errorf("PV %s node affinity names %v, want [%s]", pv.Name, got, node)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the pod to print the group of its new file", func(ctx context.Context) (bool, error) {
		logs, err := e.f.PodLogs(ctx, e.ns, pod.Name, "main")
		if err != nil {
			return false, err
		}
		if strings.Contains(logs, "group=") && !strings.Contains(logs, fmt.Sprintf("group=%d", group)) {
			return false, fmt.Errorf("the pod printed %q, want group=%d (fsGroup)", logs, group)
		}
		return strings.Contains(logs, fmt.Sprintf("group=%d", group)), nil
	})
	if fi, err := os.Stat(e.nodePath(t, node, pv, "new")); err != nil {
		t.Errorf("The file on %s: %v", node, err)
	} else if gid := fileGroup(fi); gid != group {
		t.Errorf("The file on %s has group %d, want %d", node, gid, group)
	}

	series := fmt.Sprintf(`kubelet_volume_stats_used_bytes{namespace=%q,persistentvolumeclaim=%q}`, e.ns, pvc.Name)
	framework.WaitFor(ctx, t, provisionTimeout, "the kubelet of "+node+" to report "+series, func(ctx context.Context) (bool, error) {
		raw, err := e.f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.Contains(string(raw), series), nil
	})

	e.deleteAndWaitGone(ctx, t, pod.Name, pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)

	t.Run("multihost is refused", func(t *testing.T) {
		class := e.storageClass(ctx, t, "local-multihost", storagev1.VolumeBindingImmediate, map[string]string{"mode": "multihost", "volumeType": "local"})
		shared := e.claim(ctx, t, "local-shared", class, "1Mi", corev1.ReadWriteMany, nil)
		e.waitEvent(ctx, t, shared.Name, corev1.EventTypeWarning, eventProvisioningFail, `"volumeType": "local" is not supported in mode "multihost"`)
	})
}

// nodeAffinityHosts lists the values of the PV's required node affinity.
func nodeAffinityHosts(pv *corev1.PersistentVolume) []string {
	var hosts []string
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, expr := range term.MatchExpressions {
			hosts = append(hosts, expr.Values...)
		}
	}
	return hosts
}
