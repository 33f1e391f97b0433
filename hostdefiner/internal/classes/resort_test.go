package classes

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
)

// unsorted is a claim of class, labelled Unsorted, pinned to node ("":
// none), pending or bound to pv.
func unsorted(name, class, node, pv string) *v1.PersistentVolumeClaim {
	c := hostpathtest.Claim("apps", name, hostpathtest.ClaimOfClass(class))
	if node != "" {
		c.Annotations = map[string]string{hostpathv1.ClaimNodeAnnotations[0]: node}
	}
	c.Labels = map[string]string{hostpathv1.LabelNode: hostpathv1.NodeLabelUnsorted}
	c.Spec.VolumeName = pv
	return c
}

// TestSortUnsorted: once a sync adds keys to the ConfigMap (here: made
// anew, as at an install or an upgrade), the claims labelled Unsorted that
// it now sorts are touched, so that the policy labels them again: a bound
// one with its node, a pending one whose node runs a provisioner pod, a
// multihost one; not a pending one of a node without one, nor one without
// a node, nor one of a class not listed. A sync that adds nothing touches
// nothing.
func TestSortUnsorted(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	claims := []*v1.PersistentVolumeClaim{
		unsorted("bound-old", "hostpath", "node-z", "pvc-1"),
		unsorted("pending-served", "hostpath", "node-a", ""),
		unsorted("pending-unserved", "hostpath", "node-z", ""),
		unsorted("no-node", "hostpath", "", ""),
		unsorted("shared", "shared", "", ""),
		unsorted("foreign", "gp3", "node-a", "pvc-2"),
	}
	f := newFixture(t, testClasses(), nil, []*v1.Pod{pod("a", "node-a")}, claims...)
	// The policy, on the API server the fake clientset is not: the label
	// from the ConfigMap the sync writes.
	data := withData("node-a")
	f.kube.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		obj, err := f.kube.Tracker().Get(a.GetResource(), p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		claim := obj.(*v1.PersistentVolumeClaim).DeepCopy()
		mode := data[hostpathv1.ClassKey(*claim.Spec.StorageClassName)]
		claim.Labels[hostpathv1.LabelNode] = hostpathv1.ClaimNodeLabel(claim, mode == hostpathv1.ModeMultihost, func(n string) bool {
			_, ok := data[hostpathv1.ServedKey(n)]
			return ok
		})
		return true, claim, f.kube.Tracker().Update(a.GetResource(), claim, claim.Namespace)
	})
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	want := []string{"bound-old", "pending-served", "shared"}
	if got := patched(f.kube.Actions()); !slices.Equal(got, want) {
		t.Errorf("touched %v, want %v", got, want)
	}
	f.updateCache(t)
	f.kube.ClearActions()
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync again: %v", err)
	}
	if got := patched(f.kube.Actions()); len(got) > 0 {
		t.Errorf("a sync that added nothing touched %v", got)
	}
}
