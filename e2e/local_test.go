package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

// classLocal is the example class of volumeType local (manifests/).
const classLocal = "hostpath-local"

// TestLocalVolumes: a claim of the class hostpath-local gets a PV with
// spec.local (the same directory) and required node affinity to its node;
// the kubelet then manages it as its own (checkLocalPod). Deleting the
// claim removes the directory. A multihost class of volumeType local gives
// a local PV whose affinity is that of the manager DaemonSet (no node
// named, so nodes that join later match), which pods on every node mount
// at once; deleting the claim removes the directory from every node.
func TestLocalVolumes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	pvc := e.claim(ctx, t, "local", classLocal, "8Mi", corev1.ReadWriteOnce, nil)
	node := e.checkLocalPod(ctx, t, pvc.Name, "fsgroup", "")
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if pv.Spec.Local == nil || pv.Spec.HostPath != nil || pv.Spec.Local.Path == "" {
		t.Fatalf("PV %s source = %+v, want spec.local and no hostPath", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	if got := nodeAffinityHosts(pv); len(got) != 1 || got[0] != node {
		t.Errorf("PV %s node affinity names %v, want [%s]", pv.Name, got, node)
	}
	e.deleteAndWaitGone(ctx, t, "fsgroup", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)

	t.Run("multihost", func(t *testing.T) {
		class := e.storageClass(ctx, t, "local-multihost", storagev1.VolumeBindingImmediate, map[string]string{"mode": "multihost", "volumeType": "local"})
		shared := e.claim(ctx, t, "local-shared", class, "8Mi", corev1.ReadWriteMany, nil)
		_, pv := e.waitBound(ctx, t, shared.Name)
		if pv.Spec.Local == nil || pv.Spec.HostPath != nil {
			t.Fatalf("PV %s source = %+v, want spec.local and no hostPath", pv.Name, pv.Spec.PersistentVolumeSource)
		}
		want := &corev1.VolumeNodeAffinity{Required: hostpathv1.ManagerNodeSelector()}
		if !equality.Semantic.DeepEqual(pv.Spec.NodeAffinity, want) {
			t.Errorf("PV %s node affinity = %v, want %v (the nodes that run a manager)", pv.Name, pv.Spec.NodeAffinity, want)
		}
		var pods []string
		for _, node := range e.nodes {
			pod := "fsgroup-" + node
			e.checkLocalPod(ctx, t, shared.Name, pod, node)
			pods = append(pods, pod)
		}
		for _, pod := range pods {
			if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.deleteAndWaitGone(ctx, t, "", shared.Name)
		e.waitGoneEverywhere(ctx, t, pv)
	})
}

// checkLocalPod starts a pod (on node through a node selector, so the
// scheduler checks the PV's affinity; or where the scheduler puts it when
// node is "") that mounts the claim with fsGroup, writes a file and
// 4 MiB, and stays; and checks what the kubelet does for a local volume:
// the pod's new file has the fsGroup, on the node's disk too, and the
// node's kubelet reports kubelet_volume_stats_used_bytes for the claim
// (read through the API server's node proxy). It returns the pod's node.
func (e *provEnv) checkLocalPod(ctx context.Context, t *testing.T, claim, name, node string) string {
	t.Helper()
	const group = 4321
	pod := scheduledPod(e.ns, name, node, claim,
		"echo hello > /data/new-$NODE_NAME && stat -c 'group=%g' /data/new-$NODE_NAME && dd if=/dev/zero of=/data/fill-$NODE_NAME bs=1M count=4 2>/dev/null && sleep 3600")
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
	}})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), FSGroup: ptr.To[int64](group)}
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := e.f.WaitForPodRunning(ctx, t, e.ns, pod.Name, provisionTimeout)
	node = running.Spec.NodeName
	framework.WaitFor(ctx, t, provisionTimeout, "pod "+name+" to print the group of its new file", func(ctx context.Context) (bool, error) {
		logs, err := e.f.PodLogs(ctx, e.ns, pod.Name, "main")
		if err != nil {
			return false, err
		}
		if strings.Contains(logs, "group=") && !strings.Contains(logs, fmt.Sprintf("group=%d", group)) {
			return false, fmt.Errorf("the pod printed %q, want group=%d (fsGroup)", logs, group)
		}
		return strings.Contains(logs, fmt.Sprintf("group=%d", group)), nil
	})
	_, pv := e.waitBound(ctx, t, claim)
	if fi, err := os.Stat(e.nodePath(t, node, pv, "new-"+node)); err != nil {
		t.Errorf("The file on %s: %v", node, err)
	} else if gid := fileGroup(fi); gid != group {
		t.Errorf("The file on %s has group %d, want %d", node, gid, group)
	}
	series := fmt.Sprintf(`kubelet_volume_stats_used_bytes{namespace=%q,persistentvolumeclaim=%q}`, e.ns, claim)
	framework.WaitFor(ctx, t, provisionTimeout, "the kubelet of "+node+" to report "+series, func(ctx context.Context) (bool, error) {
		raw, err := e.f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.Contains(string(raw), series), nil
	})
	return node
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
