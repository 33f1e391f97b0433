package release

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

// claimTimeout bounds the waits for a claim to be Bound and its pods.
const claimTimeout = 2 * time.Minute

// TestInstall installs the release as docs/releasing.md says,
// `kubectl apply -f hostpath.yaml`, on the running local cluster (a fresh
// one in make test-release, whose nodes imported the release's archives:
// images.sh --release), and checks that every pod of the product runs its
// image by the release's digest (status.containerStatuses[].imageID), and
// that a claim of each mode is Bound and used: a node-mode claim by a pod
// that writes and reads it, a multihost claim by a DaemonSet on every node.
// The release stays installed: make test-release takes the cluster down.
func TestInstall(t *testing.T) {
	d := release(t)
	ctx := t.Context()
	f, err := framework.New(ctx)
	if errors.Is(err, framework.ErrNoCluster) && os.Getenv(framework.RequiredEnv) != "true" {
		t.Skipf("no local cluster: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Kubectl(ctx, "apply", "-f", filepath.Join(d.dir, "hostpath.yaml"))
	if err != nil {
		t.Fatalf("kubectl apply -f hostpath.yaml: %v", err)
	}
	t.Logf("kubectl apply -f hostpath.yaml:\n%s", out)
	if err := f.WaitForWorkloads(ctx, framework.SystemNamespace, framework.WorkloadTimeout); err != nil {
		t.Fatal(err)
	}
	checkRunningImages(ctx, t, f, d.pinned(t))

	nodes := f.TwoRealNodes(ctx, t)
	ns := f.Namespace(ctx, t)
	t.Run("node mode", func(t *testing.T) { nodeModeClaim(ctx, t, f, ns) })
	t.Run("multihost", func(t *testing.T) { multihostClaim(ctx, t, f, ns, nodes) })
}

// checkRunningImages checks that every container of the product's pods
// runs one of want (its spec's image) and that its node reports that very
// name and digest as the image it runs (status imageID; the status's image
// may be a tag of it).
func checkRunningImages(ctx context.Context, t *testing.T, f *framework.Framework, want []string) {
	t.Helper()
	pods, err := f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int{}
	for _, p := range pods.Items {
		spec := map[string]string{}
		for _, c := range p.Spec.Containers {
			spec[c.Name] = c.Image
		}
		for _, s := range p.Status.ContainerStatuses {
			image := spec[s.Name]
			if !slices.Contains(want, image) || s.ImageID != image {
				t.Errorf("Pod %s container %s: image %q, imageID %q; want the same one of %q", p.Name, s.Name, image, s.ImageID, want)
			}
			used[image]++
			t.Logf("Pod %s on %s, container %s: imageID %s", p.Name, p.Spec.NodeName, s.Name, s.ImageID)
		}
	}
	for _, image := range want {
		if used[image] == 0 {
			t.Errorf("No pod of %s runs %s", framework.SystemNamespace, image)
		}
	}
}

// nodeModeClaim checks a claim of the node-mode class hostpath: Bound
// once a pod uses it, the PV on that pod's node, and what the pod writes
// it reads back.
func nodeModeClaim(ctx context.Context, t *testing.T, f *framework.Framework, ns string) {
	if _, err := f.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.Claim(ns, "notes", "hostpath", "1Mi", corev1.ReadWriteOnce), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := framework.TestToolsPod(ns, "writer", "", `date > /data/hello.txt && cat /data/hello.txt`)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "notes"}}}}
	if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := f.WaitForPodSucceeded(ctx, t, ns, "writer", claimTimeout)
	_, pv := f.WaitForClaimBound(ctx, t, ns, "notes", claimTimeout)
	if node := pv.Annotations[hostpathv1.AnnotationNode]; node != done.Spec.NodeName || pv.Spec.NodeAffinity == nil {
		t.Errorf("PV %s is on node %q (affinity %v), want the writer's node %s", pv.Name, node, pv.Spec.NodeAffinity, done.Spec.NodeName)
	}
	logs, err := f.PodLogs(ctx, ns, "writer", "")
	if err != nil || strings.TrimSpace(logs) == "" {
		t.Errorf("The writer read back %q (%v), want the date it wrote", logs, err)
	}
}

// multihostClaim checks a claim of the multihost class hostpath-shared:
// Bound, and a DaemonSet using it runs a Ready pod on every node, each of
// which sees only what it wrote in its node's copy.
func multihostClaim(ctx context.Context, t *testing.T, f *framework.Framework, ns string, nodes []string) {
	if _, err := f.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.Claim(ns, "shared", "hostpath-shared", "1Mi", corev1.ReadWriteMany), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitForClaimBound(ctx, t, ns, "shared", claimTimeout)
	if _, err := f.Client.AppsV1().DaemonSets(ns).Create(ctx, framework.SharedDaemonSet(ns, "everywhere", "shared"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := f.ReadyPodsByNode(ctx, t, ns, "app=everywhere", nodes, claimTimeout)
	for _, node := range nodes {
		out, err := f.Kubectl(ctx, "-n", ns, "exec", pods[node].Name, "--", "ls", "/data")
		if err != nil || strings.TrimSpace(out) != node {
			t.Errorf("ls /data in the pod on %s = %q, %v; want only %s", node, out, err, node)
		}
	}
}
