package e2e

// Watches by node (docs/scale.md, "Watches by node"): the claims and PVs
// of hostpath carry the watch label hostpath.dev/node, by which each
// provisioner instance asks the API server only for its own node's
// objects and those every instance may act for.
//
//   - TestWatchLabels: a node-mode PV is labelled with its node, a
//     multihost one Multihost; where the API server has the
//     claim-labelling policy (Kubernetes 1.36 and later), a claim without a
//     node, or pinned to a node that runs no instance, is Unsorted, a bound
//     one says its node, or Multihost, and a label set by hand comes
//     back as the policy computes it; on an older
//     API server the claims carry no label and still bind (the instances
//     watch every claim).
//   - TestClaimProvisionerNamed: where the policy runs, it names the
//     class's provisioner in a claim's storage-provisioner annotations
//     where kube-controller-manager would: at the creation of a claim of
//     an Immediate class, in the scheduler's update of a
//     WaitForFirstConsumer claim (no field manager owns the annotation,
//     where kube-controller-manager's own what it writes); never on a
//     claim that names a provisioner already or names its PV, nor in the
//     update by which a pinned claim's instance selects its node (which
//     binds).
//   - TestClaimPolicyBinding: the policy's binding removed, the instances
//     restart and watch every claim (an unlabelled claim binds); put back,
//     they restart, label that claim and watch by label again.
//   - TestUpgrade (upgrade_test.go) checks that the PVs and claims of the
//     last release are labelled after the upgrade.
//   - TestNodeGone (nodegone_test.go) checks the NodeGone label of a
//     marked PV; TestNodeRestrictionBoundPV that another node's token
//     cannot relabel a PV.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

func TestWatchLabels(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	there := e.nodes[len(e.nodes)-1]
	policy := claimPolicyBound(ctx, t, e.f)
	t.Logf("Claim-labelling policy bound: %v", policy)

	pending := e.claim(ctx, t, "pending", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, nil)
	// Pinned to a node that runs no instance (it does not exist): every
	// instance watches it, so the elected one can say why it waits.
	nowhere := e.claim(ctx, t, "nowhere", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: "e2e-no-such-node"})
	pinned := e.claim(ctx, t, "pinned", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	shared := e.claim(ctx, t, "shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pinnedPV := e.waitBound(ctx, t, pinned.Name)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)
	e.waitVolumeLabel(ctx, t, pinnedPV.Name, there)
	e.waitVolumeLabel(ctx, t, sharedPV.Name, hostpathv1.NodeLabelMultihost)
	if policy {
		e.waitClaimLabel(ctx, t, pending.Name, hostpathv1.NodeLabelUnsorted)
		e.waitClaimLabel(ctx, t, nowhere.Name, hostpathv1.NodeLabelUnsorted)
		e.waitEvent(ctx, t, nowhere.Name, corev1.EventTypeWarning, "NodeNotFound", `Node "e2e-no-such-node" named by `+annProvisionOnNode+" does not exist")
		e.waitClaimLabel(ctx, t, pinned.Name, there)
		e.waitClaimLabel(ctx, t, shared.Name, hostpathv1.NodeLabelMultihost)
		// The policy skips the updates of a settled claim that change
		// none of its inputs, but a label set by hand is one of them: the
		// API server puts the right one back in the same update (the host
		// definer's touch sets Unsorted the same way).
		e.labelClaim(ctx, t, pinned.Name, hostpathv1.NodeLabelUnsorted, there)
		e.labelClaim(ctx, t, pinned.Name, "e2e-other-node", there)
		e.labelClaim(ctx, t, shared.Name, there, hostpathv1.NodeLabelMultihost)
		e.labelClaim(ctx, t, nowhere.Name, "e2e-no-such-node", hostpathv1.NodeLabelUnsorted)
	} else {
		for _, name := range []string{pending.Name, nowhere.Name, pinned.Name, shared.Name} {
			c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := c.Labels[hostpathv1.LabelNode]; ok {
				t.Errorf("Claim %s has %s=%q without the claim-labelling policy", name, hostpathv1.LabelNode, v)
			}
		}
	}

	// The pending claim binds once a pod uses it, on its node's instance,
	// which watches it as Unsorted until then.
	pod := writerPod(e.ns, "consumer", "", pending.Name, "echo ok > /data/ok")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: there} // the scheduler selects the claim's node
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
	_, pendingPV := e.waitBound(ctx, t, pending.Name)
	e.waitVolumeLabel(ctx, t, pendingPV.Name, there)
	if policy {
		e.waitClaimLabel(ctx, t, pending.Name, there)
	}
	if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		claim string
		pv    *corev1.PersistentVolume
	}{{pending.Name, pendingPV}, {pinned.Name, pinnedPV}, {shared.Name, sharedPV}} {
		e.deleteAndWaitGone(ctx, t, "", c.claim)
		e.waitGoneEverywhere(ctx, t, c.pv)
	}
}

func TestClaimProvisionerNamed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	if !claimPolicyBound(ctx, t, e.f) {
		t.Skip("The API server does not serve MutatingAdmissionPolicyBindings: kube-controller-manager names the provisioner, as before (TestWatchLabels checks that claims bind)")
	}
	there := e.nodes[len(e.nodes)-1]
	named := map[string]string{annStorageProvisioner: hostpathv1.DefaultProvisionerName, annBetaStorageProvisioner: hostpathv1.DefaultProvisionerName}
	// The API server takes the policy and the host definer's keys from
	// its caches: right after an install they may lag. A claim created
	// as a dry run says when they are there.
	framework.WaitFor(ctx, t, provisionTimeout, "the claim policy to name the provisioner of a claim created as a dry run", func(ctx context.Context) (bool, error) {
		probe := e.claimObject("probe", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
		got, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return got.Annotations[annStorageProvisioner] == hostpathv1.DefaultProvisionerName, nil
	})

	// Immediate: named in the creation's answer, before any controller
	// saw the claim.
	pinned := e.claim(ctx, t, "pinned", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	checkProvisionerNamed(t, pinned, named)
	// A claim that names a provisioner already keeps it (kube-controller-
	// manager puts the class's there, and the claim binds); one that names
	// its PV is not provisioned, and gets no name.
	other := e.claim(ctx, t, "named-other", classImmediate, "1Mi", corev1.ReadWriteOnce,
		map[string]string{annProvisionOnNode: there, annStorageProvisioner: "example.com/other"})
	checkProvisionerNamed(t, other, map[string]string{annStorageProvisioner: "example.com/other", annBetaStorageProvisioner: ""})
	static := e.claimObject("static", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	static.Spec.VolumeName = "e2e-no-such-pv"
	static, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, static, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkProvisionerNamed(t, static, map[string]string{annStorageProvisioner: "", annBetaStorageProvisioner: ""})
	// WaitForFirstConsumer: no name until the scheduler selects a node;
	// then in the scheduler's own update, not in a later one of
	// kube-controller-manager (what admission sets has no field manager;
	// what kube-controller-manager writes is its own, as on the claim
	// that named another provisioner).
	pending := e.claim(ctx, t, "pending", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, nil)
	checkProvisionerNamed(t, pending, map[string]string{annStorageProvisioner: "", annBetaStorageProvisioner: ""})
	// A pinned WaitForFirstConsumer claim gets its selected node from its
	// node's instance, whose update may change no other annotation: the
	// policy adds none there (it did, and the update was refused), and
	// kube-controller-manager names the provisioner, as before.
	pinnedLater := e.claim(ctx, t, "pinned-later", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	pod := writerPod(e.ns, "consumer", "", pending.Name, "echo ok > /data/ok")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: there}
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)

	for _, c := range []struct{ name, writer string }{
		{pinned.Name, ""}, {other.Name, "kube-controller-manager"}, {pending.Name, ""}, {pinnedLater.Name, "kube-controller-manager"},
	} {
		claim, _ := e.waitBound(ctx, t, c.name)
		checkProvisionerNamed(t, claim, named)
		if got := fieldManager(claim, annStorageProvisioner); got != c.writer {
			t.Errorf("Claim %s: %s owned by the field manager %q, want %q", c.name, annStorageProvisioner, got, c.writer)
		}
	}
	if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pinned.Name, other.Name, pending.Name, pinnedLater.Name, static.Name} {
		e.deleteAndWaitGone(ctx, t, "", name)
	}
}

// checkProvisionerNamed checks claim's storage-provisioner annotations
// against want ("" for absent).
func checkProvisionerNamed(t *testing.T, claim *corev1.PersistentVolumeClaim, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := claim.Annotations[k]; got != v {
			t.Errorf("Claim %s (resourceVersion %s): %s=%q, want %q", claim.Name, claim.ResourceVersion, k, got, v)
		}
	}
}

// fieldManager returns the manager of claim's managed fields whose entry
// owns the annotation key, "" for none.
func fieldManager(claim *corev1.PersistentVolumeClaim, key string) string {
	for _, m := range claim.ManagedFields {
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if m.FieldsV1 == nil || json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields.Metadata.Annotations["f:"+key]; ok {
			return m.Manager
		}
	}
	return ""
}

// claimPolicyBound reports whether the API server serves
// MutatingAdmissionPolicyBindings and has the claim-labelling policy's
// binding: what each provisioner instance asks at start.
func claimPolicyBound(ctx context.Context, t *testing.T, f *framework.Framework) bool {
	t.Helper()
	resources, err := f.Client.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatalf("Discover admissionregistration.k8s.io/v1: %v", err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicybindings" }) {
		return false
	}
	_, err = f.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, hostpathv1.ClaimLabelsPolicy, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Fatalf("The API server serves MutatingAdmissionPolicyBindings but the install has no binding %s", hostpathv1.ClaimLabelsPolicy)
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// waitVolumeLabel waits until PV name carries the watch label want.
func (e *provEnv) waitVolumeLabel(ctx context.Context, t *testing.T, name, want string) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+name+" to carry "+hostpathv1.LabelNode+"="+want, func(ctx context.Context) (bool, error) {
		pv, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := pv.Labels[hostpathv1.LabelNode]; got != want {
			return false, fmt.Errorf("%s=%q", hostpathv1.LabelNode, got)
		}
		return true, nil
	})
}

// waitClaimLabel waits until claim name of the test's namespace carries
// the watch label want.
func (e *provEnv) waitClaimLabel(ctx context.Context, t *testing.T, name, want string) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "claim "+name+" to carry "+hostpathv1.LabelNode+"="+want, func(ctx context.Context) (bool, error) {
		c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := c.Labels[hostpathv1.LabelNode]; got != want {
			return false, fmt.Errorf("%s=%q", hostpathv1.LabelNode, got)
		}
		return true, nil
	})
}

// labelClaim sets the watch label of claim name to value, as a user or
// the host definer would, and checks that the claim-labelling policy
// answered the update with the label want.
func (e *provEnv) labelClaim(ctx context.Context, t *testing.T, name, value, want string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, hostpathv1.LabelNode, value)
	c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("Label claim %s %s=%s: %v", name, hostpathv1.LabelNode, value, err)
	}
	if got := c.Labels[hostpathv1.LabelNode]; got != want {
		t.Errorf("Claim %s labelled %s=%s by hand: the API server stored %q, want %q", name, hostpathv1.LabelNode, value, got, want)
	}
}

// TestClaimPolicyBinding: the claim-labelling policy's binding removed
// and put back, as an administrator would to get claims through a refusing
// policy. Every provisioner instance restarts when it goes and watches
// every claim: a claim made meanwhile, without the label, binds. When it
// is back they restart again, watch by label, and the upgrade step labels
// that claim (its node's instance, at start), which still binds new ones.
// A lifecycle test (LIFECYCLE_TESTS): it restarts every provisioner.
func TestClaimPolicyBinding(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	if !claimPolicyBound(ctx, t, e.f) {
		t.Skip("The API server does not serve MutatingAdmissionPolicyBindings (Kubernetes 1.35): the instances watch every claim, TestWatchLabels checks it")
	}
	bindings := e.f.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	binding, err := bindings.Get(ctx, hostpathv1.ClaimLabelsPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restore := binding.DeepCopy()
	restore.ObjectMeta = metav1.ObjectMeta{Name: binding.Name, Labels: binding.Labels}
	t.Cleanup(func() {
		if _, err := bindings.Create(context.Background(), restore, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("Put the binding %s back: %v", restore.Name, err)
		}
	})
	node := e.nodes[0]

	restarted := e.provisionerRestarts(ctx, t)
	if err := bindings.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitProvisionersRestarted(ctx, t, restarted)
	meanwhile := e.claim(ctx, t, "meanwhile", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, meanwhilePV := e.waitBound(ctx, t, meanwhile.Name)
	c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, meanwhile.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Labels[hostpathv1.LabelNode]; ok {
		t.Errorf("Claim %s made without the binding has %s=%q", c.Name, hostpathv1.LabelNode, v)
	}

	restarted = e.provisionerRestarts(ctx, t)
	if _, err := bindings.Create(ctx, restore, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitProvisionersRestarted(ctx, t, restarted)
	e.waitClaimLabel(ctx, t, meanwhile.Name, node)
	after := e.claim(ctx, t, "after", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, afterPV := e.waitBound(ctx, t, after.Name)
	e.waitClaimLabel(ctx, t, after.Name, node)
	for _, c := range []struct {
		claim string
		pv    *corev1.PersistentVolume
	}{{meanwhile.Name, meanwhilePV}, {after.Name, afterPV}} {
		e.deleteAndWaitGone(ctx, t, "", c.claim)
		e.waitGoneEverywhere(ctx, t, c.pv)
	}
}

// provisionerRestarts returns the restart count of each provisioner pod,
// by node.
func (e *provEnv) provisionerRestarts(ctx context.Context, t *testing.T) map[string]int32 {
	t.Helper()
	pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: provisionerSelector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		if len(p.Status.ContainerStatuses) == 1 {
			out[p.Spec.NodeName] = p.Status.ContainerStatuses[0].RestartCount
		}
	}
	if len(out) != len(e.nodes) {
		t.Fatalf("Provisioner pods on %v, want one on each of %v", out, e.nodes)
	}
	return out
}

// waitProvisionersRestarted waits until the provisioner of every node in
// before has restarted since and is Ready again.
func (e *provEnv) waitProvisionersRestarted(ctx context.Context, t *testing.T, before map[string]int32) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "every provisioner to restart and be Ready", func(ctx context.Context) (bool, error) {
		pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: provisionerSelector})
		if err != nil {
			return false, err
		}
		done := 0
		for _, p := range pods.Items {
			if len(p.Status.ContainerStatuses) != 1 {
				continue
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount > before[p.Spec.NodeName] && cs.Ready {
				done++
			}
		}
		if done < len(before) {
			return false, fmt.Errorf("%d of %d restarted and Ready", done, len(before))
		}
		return true, nil
	})
}
