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

	"hostpath.dev/e2e/framework"
)

// finalizerDirectory is the provisioner's finalizer on every PV it makes: the
// instance of the PV's node removes it once the directory is handled.
const finalizerDirectory = "hostpath.dev/directory-protection"

// annReuseDirectory names a retained directory a claim wants.
const annReuseDirectory = "hostpath.dev/reuse-directory"

// TestProvisionerSharedDirectoryRefused: a class whose pathPattern leaves out
// the PV name maps team-a/data and team-b/data to the same directory. The
// second claim gets a clear ProvisioningFailed event naming the first's PV,
// stays Pending, and deleting it leaves the first claim's data alone.
func TestProvisionerSharedDirectoryRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := setupProvisioner(ctx, t)
	b := *a
	b.ns = a.f.Namespace(ctx, t)
	node := a.nodes[0]
	class := a.storageClass(ctx, t, "byname", storagev1.VolumeBindingImmediate, map[string]string{"pathPattern": "${pvc.metadata.name}"})
	// Unique per run, so that a directory left by an earlier run is not met.
	claim := "data-" + framework.RandomSuffix()
	pinned := map[string]string{annProvisionOnNode: node}

	a.claim(ctx, t, claim, class, "1Mi", corev1.ReadWriteOnce, pinned)
	_, pvA := a.waitBound(ctx, t, claim)
	dir := a.nodePath(t, node, pvA)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if got := pvA.Annotations[annPVDirectory]; got != claim {
		t.Fatalf("PV %s directory = %q, want %q", pvA.Name, got, claim)
	}
	if _, err := a.f.Client.CoreV1().Pods(a.ns).Create(ctx, writerPod(a.ns, "writer", node, claim, "echo mine > /data/a.txt"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.f.WaitForPodSucceeded(ctx, t, a.ns, "writer", provisionTimeout)

	b.claim(ctx, t, claim, class, "1Mi", corev1.ReadWriteOnce, pinned)
	ev := b.waitEvent(ctx, t, claim, corev1.EventTypeWarning, eventProvisioningFail, fmt.Sprintf("belongs to PersistentVolume %q", pvA.Name))
	t.Logf("Event: %s", ev.Message)
	b.checkOneSource(ctx, t, claim, node)
	got, err := b.f.Client.CoreV1().PersistentVolumeClaims(b.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
		t.Errorf("Second claim is %s bound to %q, want Pending and unbound", got.Status.Phase, got.Spec.VolumeName)
	}

	b.deleteAndWaitGone(ctx, t, "", claim)
	// A claim of the second namespace on the same node binds after the
	// deletion was handled by the same instance.
	b.claim(ctx, t, "after", classImmediate, "1Mi", corev1.ReadWriteOnce, pinned)
	b.waitBound(ctx, t, "after")
	if data, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(data) != "mine\n" {
		t.Errorf("The first claim's file after the second claim's deletion = %q, %v; want \"mine\\n\"", data, err)
	}
}

// TestProvisionerPVDeletedByHand: `kubectl delete pv` of a bound PV waits
// for the claim (Kubernetes' pv-protection); once the claim is deleted and
// the PV Released, the provisioner's finalizer makes the PV's reclaim policy
// hold: Delete removes the directory, Retain keeps it with its data. Without
// the finalizer the directory of a Delete PV would stay forever.
func TestProvisionerPVDeletedByHand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[1]
	tests := []struct {
		class    string
		wantKept bool
	}{
		{class: classImmediate, wantKept: false},
		{class: classRetain, wantKept: true},
	}
	for i, tc := range tests {
		name := fmt.Sprintf("by-hand-%d", i)
		t.Run(name, func(t *testing.T) {
			pvc := e.claim(ctx, t, name, tc.class, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
			_, pv := e.waitBound(ctx, t, pvc.Name)
			dir := e.nodePath(t, node, pv)
			t.Cleanup(func() {
				_ = e.f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
				_ = os.RemoveAll(dir)
			})
			if !slices.Contains(pv.Finalizers, finalizerDirectory) {
				t.Errorf("PV %s finalizers = %v, want %s", pv.Name, pv.Finalizers, finalizerDirectory)
			}
			pod := "writer-" + name
			if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, pod, node, pvc.Name, "echo data > /data/f.txt"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.f.WaitForPodSucceeded(ctx, t, e.ns, pod, provisionTimeout)

			if _, err := e.f.Kubectl(ctx, "delete", "pv", pv.Name, "--wait=false"); err != nil {
				t.Fatal(err)
			}
			got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp == nil {
				t.Fatalf("PV %s after kubectl delete: %v, %v; want it kept, marked for deletion, while its claim is bound", pv.Name, got, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "f.txt")); err != nil {
				t.Errorf("The data went while the claim was still bound: %v", err)
			}

			e.deleteAndWaitGone(ctx, t, pod, pvc.Name)
			framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to be gone", func(ctx context.Context) (bool, error) {
				_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("PV still there (%v)", err)
				}
				return true, nil
			})
			_, err = os.Stat(filepath.Join(dir, "f.txt"))
			switch {
			case tc.wantKept && err != nil:
				t.Errorf("Retain: the data is gone with the PV: %v", err)
			case !tc.wantKept && !errors.Is(err, os.ErrNotExist):
				t.Errorf("Delete: %s survived the PV (stat: %v)", dir, err)
			}
		})
	}
}

// TestProvisionerReuseRetainedDirectory: the directory of a deleted Retain
// volume goes to a new claim only on purpose (hostpath.dev/reuse-directory),
// and only once its old PV is gone; the new claim then sees the old data.
func TestProvisionerReuseRetainedDirectory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	oldPV := e.retainedVolume(ctx, t, node, "old", "before")
	dir := oldPV.Annotations[annPVDirectory]

	reuse := map[string]string{annProvisionOnNode: node, annReuseDirectory: dir}
	// While the Released PV still names the directory, it is refused.
	e.claim(ctx, t, "early", classImmediate, "1Mi", corev1.ReadWriteOnce, reuse)
	e.waitEvent(ctx, t, "early", corev1.EventTypeWarning, eventProvisioningFail, oldPV.Name)
	e.deleteAndWaitGone(ctx, t, "", "early")

	e.deletePV(ctx, t, oldPV.Name)
	e.reuseAndRead(ctx, t, node, "new", dir, "before")
}

// retainedVolume makes a claim of class hostpath-retain pinned to node in
// e's namespace, writes data to its file f, deletes the claim and waits
// until its PV is Released; it returns the PV. The directory is removed
// from the node when the test ends.
func (e *provEnv) retainedVolume(ctx context.Context, t *testing.T, node, claim, data string) *corev1.PersistentVolume {
	t.Helper()
	e.claim(ctx, t, claim, classRetain, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, claim)
	t.Cleanup(func() { _ = os.RemoveAll(e.nodePath(t, node, pv)) })
	writer := claim + "-writer"
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, writer, node, claim, "echo "+data+" > /data/f"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, writer, provisionTimeout)
	e.deleteAndWaitGone(ctx, t, writer, claim)
	e.waitReleased(ctx, t, pv)
	return pv
}

// deletePV deletes the PV name, as an administrator does to free a
// retained directory, and waits until it is gone.
func (e *provEnv) deletePV(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := e.f.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("PV still there (%v)", err)
		}
		return true, nil
	})
}

// reuseAndRead makes a claim in e's namespace that reuses the directory
// dir on node, waits until it is Bound to a PV of that directory, and
// checks that a pod reads data from its file f.
func (e *provEnv) reuseAndRead(ctx context.Context, t *testing.T, node, claim, dir, data string) {
	t.Helper()
	e.claim(ctx, t, claim, classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node, annReuseDirectory: dir})
	_, pv := e.waitBound(ctx, t, claim)
	if got := pv.Annotations[annPVDirectory]; got != dir {
		t.Errorf("New PV %s directory = %q, want the reused %q", pv.Name, got, dir)
	}
	reader := claim + "-reader"
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, reader, node, claim, "cat /data/f"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, reader, provisionTimeout)
	if logs, err := e.f.PodLogs(ctx, e.ns, reader, ""); err != nil || strings.TrimSpace(logs) != data {
		t.Errorf("Claim %s/%s reads %q, %v; want the old data %q", e.ns, claim, logs, err, data)
	}
}
