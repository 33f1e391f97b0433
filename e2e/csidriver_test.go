package e2e

import (
	"fmt"
	"os"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// TestCSIDriverChangesNothing: the CSIDriver hostpath.dev, which the
// install ships so that the scheduler reads the provisioner's
// CSIStorageCapacity objects, changes nothing for the volumes themselves.
// A hostPath and a local PV of classes of provisioner hostpath.dev, each
// in use by a pod: the attach/detach controller makes no VolumeAttachment
// for them (attachRequired is false, and neither is a CSI volume); the
// kubelet mounts them with its own plugins (the local one at a mount point
// in the pod's kubernetes.io~local-volume folder, the hostPath one not at
// all; nothing in a kubernetes.io~csi one), counts them under those plugins in
// volume_manager_total_volumes, and registers no driver hostpath.dev in
// the node's CSINode.
func TestCSIDriverChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	driver, err := e.f.Client.StorageV1().CSIDrivers().Get(ctx, hostpathv1.CapacityProvisionerName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("The install's CSIDriver: %v", err)
	}
	if driver.Spec.StorageCapacity == nil || !*driver.Spec.StorageCapacity || driver.Spec.AttachRequired == nil || *driver.Spec.AttachRequired {
		t.Errorf("CSIDriver %s: storageCapacity %v, attachRequired %v; want true, false", driver.Name, driver.Spec.StorageCapacity, driver.Spec.AttachRequired)
	}
	tests := []struct {
		volumeType string
		// plugin is the kubelet's plugin for the PV; podDir, the folder
		// it mounts the volume in under the pod's volumes ("" for none).
		plugin, podDir string
	}{
		{volumeType: "hostPath", plugin: "kubernetes.io/host-path"},
		{volumeType: "local", plugin: "kubernetes.io/local-volume", podDir: "kubernetes.io~local-volume"},
	}
	for _, tc := range tests {
		t.Run(tc.volumeType, func(t *testing.T) {
			binding := storagev1.VolumeBindingWaitForFirstConsumer
			class := e.createStorageClass(ctx, t, &storagev1.StorageClass{
				ObjectMeta:        metav1.ObjectMeta{Name: "e2e-csidriver-" + strings.ToLower(tc.volumeType) + "-" + framework.RandomSuffix()},
				Provisioner:       hostpathv1.CapacityProvisionerName,
				Parameters:        map[string]string{"volumeType": tc.volumeType},
				VolumeBindingMode: &binding,
			})
			pvc := e.claim(ctx, t, "csi-"+strings.ToLower(tc.volumeType), class, "1Mi", corev1.ReadWriteOnce, nil)
			pod, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, scheduledPod(e.ns, pvc.Name, "", pvc.Name, "echo hi > /data/f && sleep 3600"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			running := e.f.WaitForPodRunning(ctx, t, e.ns, pod.Name, provisionTimeout)
			node := running.Spec.NodeName
			_, pv := e.waitBound(ctx, t, pvc.Name)

			attachments, err := e.f.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range attachments.Items {
				if a.Spec.Source.PersistentVolumeName != nil && *a.Spec.Source.PersistentVolumeName == pv.Name {
					t.Errorf("VolumeAttachment %s for PV %s (attacher %s)", a.Name, pv.Name, a.Spec.Attacher)
				}
			}

			volumes := e.f.MustNodeDir(t, node, path.Join(localcluster.KubeletPath, "pods", string(running.UID), "volumes"))
			entries, err := os.ReadDir(volumes)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			var dirs []string
			for _, d := range entries {
				dirs = append(dirs, d.Name())
			}
			if strings.Contains(strings.Join(dirs, " "), "csi") {
				t.Errorf("The kubelet's volumes of pod %s on %s: %v, want no CSI one", pod.Name, node, dirs)
			}
			// The mount itself is in the node's mount namespace; this
			// machine sees the mount point the kubelet made.
			if tc.podDir != "" {
				if fi, err := os.Stat(path.Join(volumes, tc.podDir, pv.Name)); err != nil || !fi.IsDir() {
					t.Errorf("The kubelet's %s mount point of PV %s: %v (volumes: %v)", tc.podDir, pv.Name, err, dirs)
				}
			}

			series := fmt.Sprintf(`volume_manager_total_volumes{plugin_name=%q,state="actual_state_of_world"}`, tc.plugin)
			raw, err := e.f.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), series) {
				t.Errorf("The kubelet of %s does not report %s", node, series)
			}
			for _, line := range strings.Split(string(raw), "\n") {
				if strings.HasPrefix(line, "volume_manager_total_volumes{") && strings.Contains(line, "csi") {
					t.Errorf("The kubelet of %s counts a CSI volume: %s", node, line)
				}
			}
			csiNode, err := e.f.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
			if err == nil {
				for _, d := range csiNode.Spec.Drivers {
					if d.Name == hostpathv1.CapacityProvisionerName {
						t.Errorf("CSINode %s registers driver %s", node, d.Name)
					}
				}
			}
			events, err := e.f.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events.Items {
				if ev.Type == corev1.EventTypeWarning && (strings.Contains(ev.Reason, "Attach") || strings.Contains(ev.Reason, "Mount")) {
					t.Errorf("Pod %s: Warning %s: %s", pod.Name, ev.Reason, ev.Message)
				}
			}
			e.deleteAndWaitGone(ctx, t, pod.Name, pvc.Name)
			e.waitGoneEverywhere(ctx, t, pv)
		})
	}
}
