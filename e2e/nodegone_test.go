package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

const (
	// annNodeGoneSince marks the PVs of a deleted Node.
	annNodeGoneSince = "hostpath.dev/node-gone-since"
	// nodeGoneGrace is the provisioners' --node-gone-grace-period in the
	// suite's install (e2e/install).
	nodeGoneGrace = 20 * time.Second
)

// TestNodeGone: with --node-gone-grace-period, the node-mode PVs of a
// deleted Node are marked at once (these, made by hand on Nodes that never
// ran an instance, carry no watch label: the periodic scan,
// --node-gone-scan-period, finds them), and labelled NodeGone; after the grace period the one with
// policy Delete that is not Bound is deleted with an event, the Bound one
// once its claim is deleted, and the Retain one stays, marked; the PV of a
// Node deleted and made again is unmarked; the PV of a Node that exists
// but is NotReady and cordoned is never marked.
func TestNodeGone(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	suffix := framework.RandomSuffix()
	gone, back, sick := "e2e-gone-"+suffix, "e2e-back-"+suffix, "e2e-sick-"+suffix
	for _, n := range []string{gone, back, sick} {
		e.apiNode(ctx, t, n, n == sick)
	}
	del := e.staticPV(ctx, t, "del-"+suffix, gone, corev1.PersistentVolumeReclaimDelete)
	ret := e.staticPV(ctx, t, "ret-"+suffix, gone, corev1.PersistentVolumeReclaimRetain)
	bound := e.staticPV(ctx, t, "bound-"+suffix, gone, corev1.PersistentVolumeReclaimDelete, "bound")
	onBack := e.staticPV(ctx, t, "back-"+suffix, back, corev1.PersistentVolumeReclaimDelete)
	onSick := e.staticPV(ctx, t, "sick-"+suffix, sick, corev1.PersistentVolumeReclaimDelete)
	claim := e.claimOf(ctx, t, "bound", bound)
	e.waitBound(ctx, t, claim)

	for _, n := range []string{gone, back} {
		if err := e.f.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range []string{del, ret, bound, onBack} {
		e.waitPV(ctx, t, pv, "marked", func(pv *corev1.PersistentVolume) error {
			if _, ok := pv.Annotations[annNodeGoneSince]; !ok {
				return errors.New("not marked")
			}
			// The mark brings it into every instance's watch.
			if got := pv.Labels[hostpathv1.LabelNode]; got != hostpathv1.NodeLabelNodeGone {
				return fmt.Errorf("marked, with %s=%q", hostpathv1.LabelNode, got)
			}
			return nil
		})
	}
	e.waitPVEvent(ctx, t, del, corev1.EventTypeWarning, "NodeGone", "no longer exists; unless the node comes back, the PersistentVolume is deleted at")
	e.waitPVEvent(ctx, t, ret, corev1.EventTypeWarning, "NodeGone", "reclaim policy Retain: the PersistentVolume stays")

	// The node comes back within the grace period: its PV is unmarked.
	e.apiNode(ctx, t, back, false)
	e.waitPV(ctx, t, onBack, "unmarked", func(pv *corev1.PersistentVolume) error {
		if v, ok := pv.Annotations[annNodeGoneSince]; ok {
			return fmt.Errorf("still marked %s", v)
		}
		if got := pv.Labels[hostpathv1.LabelNode]; got != back {
			return fmt.Errorf("unmarked, with %s=%q, want its node's", hostpathv1.LabelNode, got)
		}
		return nil
	})

	// After the grace period: the Delete PV goes, the others stay.
	framework.WaitFor(ctx, t, nodeGoneGrace+time.Minute, "PV "+del+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, del, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, pv := range []string{ret, bound} {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil || got.Annotations[annNodeGoneSince] == "" {
			t.Errorf("PV %s after the grace period: %v, %v; want kept and marked", pv, got, err)
		}
	}
	// The Bound one goes once its claim is deleted.
	if err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, time.Minute, "PV "+bound+" to be deleted once Released", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, bound, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// A NotReady, cordoned node's PV was never marked, though more than
	// the grace period has passed since the test began.
	got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, onSick, metav1.GetOptions{})
	if err != nil || got.Annotations[annNodeGoneSince] != "" || got.DeletionTimestamp != nil {
		t.Errorf("PV %s of a NotReady, cordoned node: %v; want it untouched", onSick, err)
	}
}

// apiNode creates a Node object without a kubelet (it never becomes Ready),
// cordoned when asked; it is deleted when the test ends.
func (e *provEnv) apiNode(ctx context.Context, t *testing.T, name string, cordoned bool) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "hostpath.dev/e2e": "true"}},
		Spec:       corev1.NodeSpec{Unschedulable: cordoned},
	}
	if _, err := e.f.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create Node %s: %v", name, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.f.Client.CoreV1().Nodes().Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("Delete Node %s: %v", name, err)
		}
	})
}

// staticPV creates a node-mode PV of the provisioner on node, as the
// provisioner would have made it (annotations, hostPath, node affinity),
// without a directory; it is deleted when the test ends if still there.
// It is kept for the claim of the test's namespace named claim[0] (by
// default one that never exists): kube-controller-manager binds an
// Available PV to any pending claim that fits, and other tests' claims
// of the same class are pending at the same time.
func (e *provEnv) staticPV(ctx context.Context, t *testing.T, name, node string, policy corev1.PersistentVolumeReclaimPolicy, claim ...string) string {
	t.Helper()
	keptFor := "no-claim-" + name
	if len(claim) > 0 {
		keptFor = claim[0]
	}
	dir := e.ns + "-" + name
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			annPVProvisionedBy: provisionerName, annPVNode: node, annPVPool: "default",
			annPVDirectory: dir, annPVMode: "node",
		}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: policy,
			StorageClassName:              classImmediate,
			ClaimRef:                      &corev1.ObjectReference{Namespace: e.ns, Name: keptFor},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/var/hpvolumes/" + dir,
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if _, err := e.f.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create PV %s: %v", name, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.f.Client.CoreV1().PersistentVolumes().Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("Delete PV %s: %v", name, err)
		}
	})
	return name
}

// claimOf creates a claim bound to the PV by name and returns its name.
func (e *provEnv) claimOf(ctx context.Context, t *testing.T, name, pv string) string {
	t.Helper()
	pvc := e.claimObject(name, classImmediate, "1Mi", corev1.ReadWriteOnce, nil)
	pvc.Spec.VolumeName = pv
	if _, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create claim %s: %v", name, err)
	}
	return name
}

// waitPV waits until check passes on the PV.
func (e *provEnv) waitPV(ctx context.Context, t *testing.T, name, what string, check func(*corev1.PersistentVolume) error) {
	t.Helper()
	framework.WaitFor(ctx, t, time.Minute, "PV "+name+" to be "+what, func(ctx context.Context) (bool, error) {
		pv, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if err := check(pv); err != nil {
			return false, err
		}
		return true, nil
	})
}
