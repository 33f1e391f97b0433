package e2e

// Root on one node stays on that node (issue 40; docs/security.md, "Node
// restriction"). Each test holds what an attacker with root on one real
// node holds: the projected tokens of that node's provisioner pod, for the
// API server and for the managers, and the host definer's when its pod is
// there. Each asserts what the API server or the manager answers (the
// policy's or the manager's message) and that the data aimed at is still
// there.
//
//   - TestNodeRestrictionPVCreate: the provisioner's Kubernetes API token
//     creates no hostPath PV outside a pool (node-2's /etc), none for the
//     other node, none of another provisioner, no multihost PV naming a
//     directory that is not its claim's; a PV of its own node inside a
//     pool is created.
//   - TestNodeRestrictionBoundPV: the same token cannot strip the finalizer
//     of the other node's Bound PV, delete it (or a retained Released
//     one), or change its spec or the
//     annotations that say where its directory is, or give it a watch
//     label that hides it from its node's instance; nor change a claim
//     beyond selected-node, nor the status of another provisioner's claim;
//     the host definer's token changes only the node annotations of
//     multihost PVs.
//   - TestNodeRestrictionPlantedRecord: node-1's manager token cannot plant a
//     multihost record on node-2 under the directory name a pending claim
//     is going to get; the claim binds with its own record, and node-1's
//     DELETE of it is refused, the data kept.
//   - TestNodeRestrictionMultihostCopy: node-1's DELETE of node-2's copy of
//     a Bound multihost volume, and the host definer's re-own of it, are
//     refused and the copy kept; deleting the claim still removes every
//     copy.
//   - TestNodeRestrictionCapacity: node-1's token cannot publish, change or
//     delete node-2's CSIStorageCapacities.
//   - TestNodeRestrictionMultihostGrow: a multihost expansion still grows
//     every copy; node-1's token cannot grow node-2's copy past it.
//   - TestNodeRestrictionSweeperKeepsNamed: a live volume's record
//     rewritten to name a PV that does not exist is kept by the sweeper,
//     with a Warning DirectoryOwnerMismatch on the PV.
//   - TestNodeRestrictionKubelet: node-1's kubelet credentials create no PV
//     and neither read nor delete node-2's (Kubernetes's Node authorizer).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

const (
	// policyVolumes and policyClaims are the admission policies of the
	// provisioner's account, policyHostDefiner the host definer's.
	policyVolumes     = "hostpath-provisioner-volumes"
	policyClaims      = "hostpath-provisioner-claims"
	policyHostDefiner = "hostpath-hostdefiner-volumes"
	// finalizerProtection is the product's finalizer on its PVs.
	finalizerProtection = "hostpath.dev/directory-protection"
)

// apiClientAs returns a clientset that authenticates with the Kubernetes
// API token of pod (bound to it, no audience), as root on its node can
// read it from the pod's projected volume.
func (e *provEnv) apiClientAs(ctx context.Context, t *testing.T, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	token, err := e.f.PodBoundToken(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(e.f.Config)
	cfg.BearerToken = token
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// provisionerAPI is the Kubernetes API client of node's provisioner pod.
func (e *provEnv) provisionerAPI(ctx context.Context, t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	pod := e.f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, []string{node}, provisionTimeout)[node]
	return e.apiClientAs(ctx, t, pod)
}

// wantPolicyDenied fails unless err is the API server's refusal by the
// admission policy named policy, with a message containing each of texts.
func wantPolicyDenied(t *testing.T, what string, err error, policy string, texts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want it refused by ValidatingAdmissionPolicy %s", what, policy)
		return
	}
	msg := err.Error()
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want a refusal by ValidatingAdmissionPolicy %s", what, err, policy)
		return
	}
	for _, want := range append([]string{policy}, texts...) {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: refused with %q, want it to contain %q", what, msg, want)
		}
	}
}

// attackPV is a PV as the product makes them, named name, for node (none
// for multihost), with the directory dir of the default pool at path.
func attackPV(name, node, dir, path string, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			annPVProvisionedBy: provisionerName,
			annPVPool:          "default",
			annPVDirectory:     dir,
			annPVMode:          "node",
		}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              classWaitForConsumer,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: path, Type: ptr.To(corev1.HostPathDirectory)}},
		},
	}
	if claim != nil {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
	}
	if node == "" {
		pv.Annotations[annPVMode] = "multihost"
		return pv
	}
	pv.Annotations[annPVNode] = node
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	return pv
}

// TestNodeRestrictionPVCreate: the PV of node-2's /etc, made with
// node-1's provisioner token, and its variants, are refused by the API
// server with the policy's message; a PV of node-1's own pool is not.
func TestNodeRestrictionPVCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	kube := e.provisionerAPI(ctx, t, here)
	// The attacker's own claim, pending (no consumer), for the PVs to bind.
	claim := e.claim(ctx, t, "mine", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, nil)
	suffix := framework.RandomSuffix()
	poolDir := func(dir string) string { return path.Join(localcluster.PoolPath, dir) }

	notOurs := attackPV("e2e-nr-foreign-"+suffix, here, "x-"+suffix, poolDir("x-"+suffix), claim)
	delete(notOurs.Annotations, annPVProvisionedBy)
	nfs := attackPV("e2e-nr-nfs-"+suffix, here, "x-"+suffix, poolDir("x-"+suffix), claim)
	nfs.Spec.HostPath, nfs.Spec.NFS = nil, &corev1.NFSVolumeSource{Server: "198.18.0.1", Path: "/"}
	bareAffinity := attackPV("e2e-nr-bare-"+suffix, here, "x-"+suffix, poolDir("x-"+suffix), claim)
	bareAffinity.Spec.NodeAffinity = nil
	for _, tc := range []struct {
		name  string
		pv    *corev1.PersistentVolume
		texts []string
	}{
		{"the other node's /etc", attackPV("e2e-nr-etc-"+suffix, there, "etc", "/etc", claim), []string{"PersistentVolume path /etc must lie exactly one level below the root of its pool default (" + localcluster.PoolPath + ")"}},
		{"a path below a volume", attackPV("e2e-nr-deep-"+suffix, here, "x-"+suffix, poolDir("x-"+suffix+"/link"), claim), []string{"must lie exactly one level below"}},
		{"a pool that is not configured", func() *corev1.PersistentVolume {
			pv := attackPV("e2e-nr-nopool-"+suffix, here, "etc", "/etc", claim)
			pv.Annotations[annPVPool] = "../etc"
			return pv
		}(), []string{"is not configured in ConfigMap hostpath-system/hostpath-pools"}},
		{"a pool directory of the other node", attackPV("e2e-nr-there-"+suffix, there, "x-"+suffix, poolDir("x-"+suffix), claim), []string{"node " + here + " may only create PersistentVolumes for itself"}},
		{"no node affinity", bareAffinity, []string{"may only create PersistentVolumes for itself"}},
		{"another provisioner's", notOurs, []string{"may create only PersistentVolumes of hostpath"}},
		{"an NFS volume", nfs, []string{"only PersistentVolumes of type hostPath"}},
		{"a multihost directory of another claim", attackPV("e2e-nr-mh-"+suffix, "", "victim-"+suffix, poolDir("victim-"+suffix), claim), []string{"must contain the claim's UID"}},
	} {
		_, err := kube.CoreV1().PersistentVolumes().Create(ctx, tc.pv, metav1.CreateOptions{})
		if err == nil {
			_ = e.f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), tc.pv.Name, metav1.DeleteOptions{})
		}
		wantPolicyDenied(t, "create "+tc.name, err, policyVolumes, tc.texts...)
	}

	// What the provisioner makes itself: its node, its pool, one level
	// down. Made, then removed by the admin (the account may not delete a
	// PV that is not Released).
	own := attackPV("e2e-nr-own-"+suffix, here, "e2e-nr-own-"+suffix, poolDir("e2e-nr-own-"+suffix), nil)
	own.Spec.ClaimRef = &corev1.ObjectReference{Namespace: e.ns, Name: "nobody"}
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create a PV of %s's own pool with its provisioner's token: %v", here, err)
	}
	err := kube.CoreV1().PersistentVolumes().Delete(ctx, own.Name, metav1.DeleteOptions{})
	wantPolicyDenied(t, "delete an Available PV", err, policyVolumes, "may delete only Released or Failed")
	removePV(ctx, t, e.f, own.Name)
}

// removePV deletes a PV as the admin, with its finalizers, and waits until
// it is gone.
func removePV(ctx context.Context, t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	_ = f.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+name+" to be gone", func(ctx context.Context) (bool, error) {
		pv, err := f.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if len(pv.Finalizers) > 0 {
			_, err := f.Client.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			return false, err
		}
		return false, fmt.Errorf("PV %s is still there", name)
	})
}

// TestNodeRestrictionBoundPV: node-1's provisioner token against node-2's
// Bound PV, and against a claim; the host definer's token against a
// node-mode PV. Every write is refused with the policy's message and the
// PV stays Bound with its data.
func TestNodeRestrictionBoundPV(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	pvc := e.claim(ctx, t, "theirs", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	pvc, pv := e.waitBound(ctx, t, pvc.Name)
	if err := os.WriteFile(e.nodePath(t, there, pv, "data"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kube := e.provisionerAPI(ctx, t, here)
	pvs := kube.CoreV1().PersistentVolumes()

	// The finalizer strip and delete.
	i := -1
	for j, f := range pv.Finalizers {
		if f == finalizerProtection {
			i = j
		}
	}
	if i < 0 {
		t.Fatalf("PV %s has no finalizer %s: %v", pv.Name, finalizerProtection, pv.Finalizers)
	}
	strip := fmt.Sprintf(`[{"op":"remove","path":"/metadata/finalizers/%d"}]`, i)
	_, err := pvs.Patch(ctx, pv.Name, types.JSONPatchType, []byte(strip), metav1.PatchOptions{})
	wantPolicyDenied(t, "strip the finalizer of a Bound PV", err, policyVolumes, "may remove a finalizer only from a PersistentVolume that is being deleted")
	err = pvs.Delete(ctx, pv.Name, metav1.DeleteOptions{})
	wantPolicyDenied(t, "delete a Bound PV", err, policyVolumes, "may delete only Released or Failed", "this one is Bound")

	for _, tc := range []struct {
		what, patch string
		texts       []string
	}{
		{"set its reclaim policy", `{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`, []string{"may change no part of a PersistentVolume's spec but its capacity"}},
		{"hand it to another claim", `{"spec":{"claimRef":{"namespace":"evil","name":"thief","uid":"00000000-0000-0000-0000-000000000000"}}}`, []string{"may change no part"}},
		{"point it at another directory", `{"metadata":{"annotations":{"hostpath.dev/directory":"etc"}}}`, []string{"may not change the annotations that say what a PersistentVolume is"}},
		{"grow another node's volume", `{"spec":{"capacity":{"storage":"2Mi"}}}`, []string{"only the instance of node " + there + " may grow"}},
		{"record a policy it does not have", `{"metadata":{"annotations":{"hostpath.dev/recorded-reclaim-policy":"Retain"}}}`, []string{"may only record the PersistentVolume's own reclaim policy"}},
		// The watch label: another node's, or none, would hide the PV from
		// the instance of its node.
		{"take it into its own node's watch", `{"metadata":{"labels":{"hostpath.dev/node":"` + here + `"}}}`, []string{"the label hostpath.dev/node of a PersistentVolume must say what its annotations say (" + there + ")"}},
		{"mark it gone by the label alone", `{"metadata":{"labels":{"hostpath.dev/node":"NodeGone"}}}`, []string{"must say what its annotations say (" + there + ")"}},
		{"remove its watch label", `{"metadata":{"labels":{"hostpath.dev/node":null}}}`, []string{"cannot be removed"}},
	} {
		_, err := pvs.Patch(ctx, pv.Name, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
		wantPolicyDenied(t, tc.what, err, policyVolumes, tc.texts...)
	}

	// A claim gets selected-node and nothing else.
	claims := kube.CoreV1().PersistentVolumeClaims(e.ns)
	for _, tc := range []struct {
		what, patch, text string
	}{
		{"label a claim", `{"metadata":{"labels":{"e2e":"x"}}}`, "may not change a claim's labels"},
		{"annotate a claim", `{"metadata":{"annotations":{"hostpath.dev/reuse-directory":"x"}}}`, "may change only the annotation volume.kubernetes.io/selected-node"},
	} {
		_, err := claims.Patch(ctx, pvc.Name, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
		wantPolicyDenied(t, tc.what, err, policyClaims, tc.text)
	}

	// A retained PV, Released: it stays, the record of its directory.
	kept := e.claim(ctx, t, "kept", classRetain, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	_, keptPV := e.waitBound(ctx, t, kept.Name)
	t.Cleanup(func() {
		_ = e.f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), keptPV.Name, metav1.DeleteOptions{})
		_ = os.RemoveAll(e.nodePath(t, there, keptPV))
	})
	e.deleteAndWaitGone(ctx, t, "", kept.Name)
	e.waitReleased(ctx, t, keptPV)
	err = pvs.Delete(ctx, keptPV.Name, metav1.DeleteOptions{})
	wantPolicyDenied(t, "delete a retained Released PV", err, policyVolumes, "with reclaim policy Delete", "this one is Released, reclaim policy Retain")

	// The status of a claim that is not this product's.
	foreign := e.claim(ctx, t, "foreign", "e2e-no-such-class", "1Mi", corev1.ReadWriteOnce, nil)
	_, err = claims.Patch(ctx, foreign.Name, types.MergePatchType, []byte(`{"status":{"allocatedResources":{"storage":"1Gi"}}}`), metav1.PatchOptions{}, "status")
	wantPolicyDenied(t, "change the status of another provisioner's claim", err, "hostpath-provisioner-claim-status", "may change the status only of claims of hostpath")

	// The host definer's token: the node annotations of multihost PVs
	// only.
	hd := e.apiClientAs(ctx, t, e.hostDefinerPod(ctx, t, false))
	_, err = hd.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"hostpath.dev/nodes":"`+here+`"}}}`), metav1.PatchOptions{})
	wantPolicyDenied(t, "the host definer annotates a node-mode PV", err, policyHostDefiner, "may change only multihost PersistentVolumes")

	got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.VolumeBound || got.DeletionTimestamp != nil || len(got.Finalizers) != len(pv.Finalizers) ||
		got.Spec.PersistentVolumeReclaimPolicy != pv.Spec.PersistentVolumeReclaimPolicy || got.Annotations[annPVDirectory] != pv.Annotations[annPVDirectory] ||
		got.Labels[hostpathv1.LabelNode] != there {
		t.Errorf("PV %s after the refusals: %+v, %v; want it unchanged and Bound", pv.Name, got, err)
	}
	if data, err := os.ReadFile(e.nodePath(t, there, pv, "data")); err != nil || string(data) != "theirs\n" {
		t.Errorf("The data of %s on %s = %q, %v", pv.Name, there, data, err)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// ownerRecordOf reads the owner record of dir on node.
func ownerRecordOf(t *testing.T, f *framework.Framework, node, dir string) (rec ownerRecord, exists bool) {
	t.Helper()
	rec, err := readRecordFile(ownerRecordFile(t, f, node, localcluster.PoolPath, dir))
	if os.IsNotExist(err) {
		return rec, false
	}
	if err != nil {
		t.Fatalf("Owner record of %s on %s: %v", dir, node, err)
	}
	return rec, true
}

// TestNodeRestrictionPlantedRecord: the planted record. Node-1's
// manager token cannot make a multihost record on node-2 for a claim that
// is not multihost; the claim, scheduled to node-2, binds with a node-mode
// record of its own namespace and size; node-1's DELETE of it is refused
// and the data stays.
func TestNodeRestrictionPlantedRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	urls := managerPods(ctx, t, e.f, e.nodes)
	token := provisionerTokenOn(ctx, t, e.f, urls, here, there)

	// A pending claim: the name of its directory is known from the watch.
	pvc := e.claim(ctx, t, "victim", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, nil)
	pvName := "pvc-" + string(pvc.UID)
	dir := e.ns + "-" + pvc.Name + "-" + pvName
	volume := "/v1/pools/default/volumes/" + dir
	authorityCalls(ctx, t, urls[there], token, []authorityCall{
		// The request: no claim named.
		{method: "PUT", path: volume, body: `{"owner":"` + pvName + `","multihost":true,"claimNamespace":"evil","requiredBytes":1}`,
			wantCode: http.StatusBadRequest, wantReason: "BadRequest", wantInMsg: []string{"only for a claim it names"}},
		// The victim's claim named: it is not of a multihost class.
		{method: "PUT", path: volume, body: `{"owner":"` + pvName + `","multihost":true,"claimNamespace":"` + e.ns + `","claimName":"` + pvc.Name + `","requiredBytes":1}`,
			wantCode: http.StatusConflict, wantReason: "Conflict", wantInMsg: []string{`whose parameter mode is "node", not "multihost"`}},
	})
	if rec, ok := ownerRecordOf(t, e.f, there, dir); ok {
		t.Errorf("A record was planted on %s for %s: %+v", there, dir, rec)
	}

	// The claim's pod goes to node-2; the claim binds there with a record
	// of its own.
	pod := writerPod(e.ns, "victim", "", pvc.Name, "echo victim > /data/data && sleep 3600")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: there} // the scheduler selects the claim's node
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodRunning(ctx, t, e.ns, pod.Name, provisionTimeout)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if pv.Annotations[annPVDirectory] != dir {
		t.Fatalf("PV %s directory %q, want %q", pv.Name, pv.Annotations[annPVDirectory], dir)
	}
	rec, ok := ownerRecordOf(t, e.f, there, dir)
	if !ok || rec.Owner != pv.Name || rec.Multihost || rec.ClaimNamespace != e.ns || rec.SizeBytes != 1<<20 {
		t.Errorf("Owner record of %s on %s = %+v (exists %v); want owner %s, node mode, claim namespace %s, 1 MiB", dir, there, rec, ok, pv.Name, e.ns)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the pod to write its data", func(context.Context) (bool, error) {
		data, err := os.ReadFile(e.nodePath(t, there, pv, "data"))
		return err == nil && string(data) == "victim\n", nil
	})
	code, resp := callManager(ctx, t, "DELETE", urls[there], volume+"?owner="+pv.Name, token, "")
	if code != http.StatusForbidden {
		t.Errorf("DELETE %s on %s with %s's token: %d %s, want 403", volume, there, here, code, resp)
	}
	if data, err := os.ReadFile(e.nodePath(t, there, pv, "data")); err != nil || string(data) != "victim\n" {
		t.Errorf("The data of %s on %s = %q, %v; want it kept", dir, there, data, err)
	}
	e.deleteAndWaitGone(ctx, t, pod.Name, pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// TestNodeRestrictionMultihostCopy: node-1's DELETE of node-2's copy of a
// Bound multihost volume, and the host definer's re-own of it, are
// refused (the PV is Bound); the copy and its record stay, and deleting
// the claim still removes every copy.
func TestNodeRestrictionMultihostCopy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	// The attacker holds the host definer's pod too: "here" is its node,
	// and the copy aimed at is the other node's (on its own node the host
	// definer's token is a local caller, whose root owns that disk anyway).
	hdPod := e.hostDefinerPod(ctx, t, false)
	here, there := hdPod.Spec.NodeName, e.other(hdPod.Spec.NodeName)
	urls := managerPods(ctx, t, e.f, e.nodes)
	pvc := e.claim(ctx, t, "shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := pv.Annotations[annPVDirectory]
	for _, node := range e.nodes {
		waitMultihostRecord(ctx, t, e.f, node, dir)
	}
	if err := os.WriteFile(e.nodePath(t, there, pv, "data"), []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	record := readRecord(t, e.f, there, dir)
	volume := "/v1/pools/default/volumes/" + dir

	token := provisionerTokenOn(ctx, t, e.f, urls, here, there)
	authorityCalls(ctx, t, urls[there], token, []authorityCall{
		{method: "DELETE", path: volume + "?owner=" + pv.Name, wantCode: http.StatusConflict, wantReason: "Conflict",
			wantInMsg: []string{`its PersistentVolume "` + pv.Name + `" is Bound`}},
	})

	hd := podToken(ctx, t, e.f, hdPod)
	waitAllowed(ctx, t, urls[there], hd, "the host definer to read on "+there)
	authorityCalls(ctx, t, urls[there], hd, []authorityCall{
		{method: "PUT", path: volume + "/owner", body: `{"owner":"ghost","previous":"` + pv.Name + `","multihost":true}`,
			wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: []string{`over from PersistentVolume "` + pv.Name + `" to "ghost"`}},
	})
	if got := readRecord(t, e.f, there, dir); got != record {
		t.Errorf("The owner record of %s on %s changed:\n%s\nwant\n%s", dir, there, got, record)
	}
	if data, err := os.ReadFile(e.nodePath(t, there, pv, "data")); err != nil || string(data) != "shared\n" {
		t.Errorf("The data of %s on %s = %q, %v; want it kept", dir, there, data, err)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// TestNodeRestrictionCapacity: node-1's provisioner token cannot publish,
// change or delete the storage capacity of node-2 (capacity-aware
// scheduling would send claims to a node without room, or away from one
// with it); the object stays as node-2's instance wrote it.
func TestNodeRestrictionCapacity(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	var theirs *storagev1.CSIStorageCapacity
	framework.WaitFor(ctx, t, provisionTimeout, "a CSIStorageCapacity of "+there, func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.StorageV1().CSIStorageCapacities(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "hostpath.dev/node=" + there + ",hostpath.dev/storage-class=hostpath-capacity"})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		theirs = &list.Items[0]
		return true, nil
	})
	caps := e.provisionerAPI(ctx, t, here).StorageV1().CSIStorageCapacities(framework.SystemNamespace)
	const text = "node %s may only publish or delete the storage capacity of itself"
	emptied := theirs.DeepCopy()
	emptied.Capacity = ptr.To(resource.MustParse("0"))
	_, err := caps.Update(ctx, emptied, metav1.UpdateOptions{})
	wantPolicyDenied(t, "empty the capacity of the other node", err, "hostpath-provisioner-capacities", fmt.Sprintf(text, here))
	err = caps.Delete(ctx, theirs.Name, metav1.DeleteOptions{})
	wantPolicyDenied(t, "delete the capacity of the other node", err, "hostpath-provisioner-capacities", fmt.Sprintf(text, here))
	fake := theirs.DeepCopy()
	fake.ObjectMeta = metav1.ObjectMeta{Name: "e2e-fake-" + framework.RandomSuffix(), Namespace: framework.SystemNamespace, Labels: theirs.Labels}
	fake.Capacity = ptr.To(resource.MustParse("1Ei"))
	_, err = caps.Create(ctx, fake, metav1.CreateOptions{})
	wantPolicyDenied(t, "publish room on the other node", err, "hostpath-provisioner-capacities", fmt.Sprintf(text, here))
	// Its capacity moves with the volumes of the tests running alongside
	// (the instance of there republishes it): it must still exist, not be
	// emptied, and the forged object must not.
	got, err := e.f.Client.StorageV1().CSIStorageCapacities(framework.SystemNamespace).Get(ctx, theirs.Name, metav1.GetOptions{})
	if err != nil || got.Capacity == nil || got.Capacity.IsZero() {
		t.Errorf("CSIStorageCapacity %s of %s after the refusals: %v, %v; want it there, not emptied", theirs.Name, there, got, err)
	}
	if _, err := e.f.Client.StorageV1().CSIStorageCapacities(framework.SystemNamespace).Get(ctx, fake.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get the forged CSIStorageCapacity %s: %v, want NotFound", fake.Name, err)
	}
}

// TestNodeRestrictionKubelet: the third credential root on node-1 holds,
// its kubelet's, is the Kubernetes API server's own concern (the Node
// authorizer and NodeRestriction, both on in the local cluster): it
// creates no PV, and neither deletes nor reads node-2's.
func TestNodeRestrictionKubelet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	pvc := e.claim(ctx, t, "theirs", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	_, pv := e.waitBound(ctx, t, pvc.Name)

	cfg, err := clientcmd.BuildConfigFromFlags("", path.Join(e.f.ClusterDir, "pki", "kubelet-"+here+".kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pvs := kubelet.CoreV1().PersistentVolumes()
	etc := attackPV("e2e-nr-kubelet-"+framework.RandomSuffix(), there, "etc", "/etc", nil)
	if _, err := pvs.Create(ctx, etc, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("Create a PV of %s's /etc with %s's kubelet credentials: %v, want Forbidden", there, here, err)
		_ = e.f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), etc.Name, metav1.DeleteOptions{})
	}
	if err := pvs.Delete(ctx, pv.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("Delete %s's PV %s with %s's kubelet credentials: %v, want Forbidden", there, pv.Name, here, err)
	}
	if _, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("Get %s's PV %s, used by no pod of %s, with its kubelet credentials: %v, want Forbidden", there, pv.Name, here, err)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// TestNodeRestrictionMultihostGrow: expanding a multihost claim grows its
// copy on every node, the remote ones through the elected instance (whose
// calls another node's manager checks against the claim's request); node-1's
// token cannot grow node-2's copy past what the PV and its claim ask
// (409 naming the PV), and the record keeps the expanded size.
func TestNodeRestrictionMultihostGrow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	urls := managerPods(ctx, t, e.f, e.nodes)
	pvc := e.claim(ctx, t, "grown", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := pv.Annotations[annPVDirectory]
	for _, node := range e.nodes {
		waitMultihostRecord(ctx, t, e.f, node, dir)
	}
	resize(ctx, t, e.provEnv, pvc.Name, "2Mi")
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to have 2Mi and every copy's record 2 MiB", func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if c := got.Spec.Capacity[corev1.ResourceStorage]; c.Cmp(resource.MustParse("2Mi")) != 0 {
			return false, fmt.Errorf("capacity %s", c.String())
		}
		for _, node := range e.nodes {
			if rec, ok := ownerRecordOf(t, e.f, node, dir); !ok || rec.SizeBytes != 2<<20 {
				return false, fmt.Errorf("record on %s: %+v (exists %v)", node, rec, ok)
			}
		}
		return true, nil
	})

	token := provisionerTokenOn(ctx, t, e.f, urls, here, there)
	volume := "/v1/pools/default/volumes/" + dir
	code, resp := callManager(ctx, t, "PUT", urls[there], volume+"/size", token, `{"owner":"`+pv.Name+`","sizeBytes":1073741824}`)
	st := wantStatus(t, "PUT "+volume+"/size of 1 GiB with "+here+"'s token", code, resp, http.StatusConflict, "Conflict")
	if !strings.Contains(st.Message, pv.Name) {
		t.Errorf("The refusal %q does not name PV %s", st.Message, pv.Name)
	}
	if rec, _ := ownerRecordOf(t, e.f, there, dir); rec.SizeBytes != 2<<20 {
		t.Errorf("Record of %s on %s after the refused growth: %+v, want 2 MiB", dir, there, rec)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// TestNodeRestrictionSweeperKeepsNamed: the last step of the
// re-own attack, waited for. A live volume's owner record rewritten by
// root on its node to name a PV that does not exist ("ghost", dated long
// ago) is an orphan by the record alone; the sweeper, sweeping every 2 s
// with a grace of 1 s, keeps the directory because the PV names it, and
// says so with a Warning DirectoryOwnerMismatch on the PV. The data stays.
func TestNodeRestrictionSweeperKeepsNamed(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pvc := e.claim(ctx, t, "named", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := pv.Annotations[annPVDirectory]
	if err := os.WriteFile(e.nodePath(t, node, pv, "data"), []byte("live\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := ownerRecordFile(t, e.f, node, localcluster.PoolPath, dir)
	original, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(original, &rec); err != nil {
		t.Fatal(err)
	}
	rec["owner"], rec["ownedSince"] = "ghost", "2026-01-01T00:00:00Z"
	forged, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(file, original, 0o644) })

	e.sweepOften(ctx, t)
	e.waitPVEvent(ctx, t, pv.Name, corev1.EventTypeWarning, "DirectoryOwnerMismatch", fmt.Sprintf("%q", dir), `"ghost"`, "never removed by the sweeper")
	e.waitSweeps(ctx, t, node, 2)
	if data, err := os.ReadFile(e.nodePath(t, node, pv, "data")); err != nil || string(data) != "live\n" {
		t.Errorf("The data of %s on %s after the sweeps = %q, %v; want it kept", dir, node, data, err)
	}
	if err := os.WriteFile(file, original, 0o644); err != nil {
		t.Fatal(err)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}
