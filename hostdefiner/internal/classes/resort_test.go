package classes

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// policyWith is the claim-labelling policy, on the API server the fake
// clientset is not, with the parameters data: Unsorted for a class not
// listed, else hostpathv1.ClaimNodeLabel.
func policyWith(data map[string]string) func(*v1.PersistentVolumeClaim) {
	return func(claim *v1.PersistentVolumeClaim) {
		mode, listed := data[hostpathv1.ClassKey(*claim.Spec.StorageClassName)]
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		if !listed {
			claim.Labels[hostpathv1.LabelNode] = hostpathv1.NodeLabelUnsorted
			return
		}
		claim.Labels[hostpathv1.LabelNode] = hostpathv1.ClaimNodeLabel(claim, mode == hostpathv1.ModeMultihost, func(n string) bool {
			_, ok := data[hostpathv1.ServedKey(n)]
			return ok
		})
	}
}

// TestSortUnlabelled: a sync that creates the ConfigMap (it was missing,
// and the API server skipped the policy meanwhile) touches the claims of
// hostpath without a label, by class or by storage-provisioner
// annotation, and no other; the next sync lists nothing.
func TestSortUnlabelled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	unlabelled := func(name, class string) *v1.PersistentVolumeClaim {
		c := unsorted(name, class, "node-a", "")
		c.Labels = nil
		return c
	}
	byAnnotation := unlabelled("by-annotation", "not-listed-yet")
	byAnnotation.Annotations["volume.kubernetes.io/storage-provisioner"] = hostpathv1.DefaultProvisionerName
	claims := []*v1.PersistentVolumeClaim{
		unlabelled("pinned", "hostpath"), byAnnotation, unlabelled("foreign", "gp3"),
		unsorted("labelled", "hostpath", "node-z", ""),
	}
	f := newFixture(t, testClasses(), nil, []*v1.Pod{pod("a", "node-a")}, claims...)
	answerPatches(f.kube, policyWith(withData("node-a")))
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got, want := patched(f.kube.Actions()), []string{"by-annotation", "pinned"}; !slices.Equal(got, want) {
		t.Errorf("touched %v, want %v", got, want)
	}
	for name, want := range map[string]string{"pinned": "node-a", "by-annotation": hostpathv1.NodeLabelUnsorted} {
		got, err := f.kube.CoreV1().PersistentVolumeClaims("apps").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Labels[hostpathv1.LabelNode]; v != want {
			t.Errorf("claim %s labelled %q after the sync, want %q", name, v, want)
		}
	}
	f.updateCache(t)
	f.kube.ClearActions()
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync again: %v", err)
	}
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "persistentvolumeclaims" {
			t.Errorf("the next sync listed claims: %v", a)
		}
	}
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
	answerPatches(f.kube, policyWith(withData("node-a")))
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
