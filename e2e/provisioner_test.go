package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// What users see of the provisioner (docs/provisioner.md): the names are
// repeated here on purpose, so that renaming one breaks a test.
const (
	provisionerName     = "hostpath.dev/provisioner"
	provisionerSelector = "app.kubernetes.io/name=hostpath-provisioner"
	annProvisionOnNode  = "hostpath.dev/provision-on-node"
	annKubevirtOnNode   = "kubevirt.io/provisionOnNode"
	annSelectedNode     = "volume.kubernetes.io/selected-node"
	// The storage-provisioner annotations: the provisioner that is to
	// provision a claim (kube-controller-manager's, or the claim policy's).
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	annPVNode                 = "hostpath.dev/node"
	annPVPool                 = "hostpath.dev/pool"
	annPVDirectory            = "hostpath.dev/directory"
	annPVClaimNamespace       = "hostpath.dev/claim-namespace"
	annPVClaimName            = "hostpath.dev/claim-name"
	annPVMode                 = "hostpath.dev/mode"
	annPVProvisionedBy        = "pv.kubernetes.io/provisioned-by"
	provisionTimeout          = 2 * time.Minute
	classWaitForConsumer      = "hostpath"
	classRetain               = "hostpath-retain"
	classImmediate            = "hostpath-immediate"
	eventProvisioningFail     = "ProvisioningFailed"
	// provisionerMetricsPort serves /healthz, /readyz and /metrics.
	provisionerMetricsPort = "8081"
	// failedMetric counts failed provisioning per class.
	failedMetric = "controller_persistentvolumeclaim_provision_failed_total"
)

// provEnv is what every provisioner test starts from.
type provEnv struct {
	f     *framework.Framework
	ns    string
	nodes []string
	// instances maps each real node to the name of its provisioner pod.
	instances map[string]string
	// addresses maps each real node to its provisioner's metrics address.
	addresses map[string]string
}

// setupProvisioner makes a namespace and waits until a Ready provisioner runs
// on each of (at least two) real nodes.
func setupProvisioner(ctx context.Context, t *testing.T) *provEnv {
	t.Helper()
	f := framework.Cluster()
	nodes := f.TwoRealNodes(ctx, t)
	env := &provEnv{f: f, nodes: nodes, instances: map[string]string{}, addresses: map[string]string{}}
	for node, p := range f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, nodes, provisionTimeout) {
		env.instances[node] = p.Name
		env.addresses[node] = net.JoinHostPort(p.Status.PodIP, provisionerMetricsPort)
	}
	env.ns = f.Namespace(ctx, t)
	return env
}

// nodeWithoutProvisioner adds a Node object that no kubelet runs and that
// the DaemonSets do not tolerate (the fake nodes' label and taint), so no
// provisioner instance exists for it; the test deletes it at the end.
func (e *provEnv) nodeWithoutProvisioner(ctx context.Context, t *testing.T) string {
	t.Helper()
	name := "e2e-idle-" + framework.RandomSuffix()
	e.f.APINode(ctx, t, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			localcluster.FakeNodeLabel: "true", corev1.LabelHostname: name}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: localcluster.FakeNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	})
	return name
}

// other returns a real node that is not node.
func (e *provEnv) other(node string) string {
	for _, n := range e.nodes {
		if n != node {
			return n
		}
	}
	return ""
}

// storageClass creates a cluster-scoped StorageClass for this test, with
// reclaim policy Delete, and deletes it when the test ends.
func (e *provEnv) storageClass(ctx context.Context, t *testing.T, what string, binding storagev1.VolumeBindingMode, params map[string]string) string {
	t.Helper()
	return e.storageClassWithPolicy(ctx, t, what, binding, corev1.PersistentVolumeReclaimDelete, params)
}

// storageClassWithPolicy is storageClass with a reclaim policy.
func (e *provEnv) storageClassWithPolicy(ctx context.Context, t *testing.T, what string, binding storagev1.VolumeBindingMode, reclaim corev1.PersistentVolumeReclaimPolicy, params map[string]string) string {
	t.Helper()
	return e.createStorageClass(ctx, t, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "e2e-" + what + "-" + framework.RandomSuffix()},
		Provisioner:       provisionerName,
		Parameters:        params,
		VolumeBindingMode: &binding,
		ReclaimPolicy:     &reclaim,
	})
}

// createStorageClass creates sc and deletes it when the test ends.
func (e *provEnv) createStorageClass(ctx context.Context, t *testing.T, sc *storagev1.StorageClass) string {
	t.Helper()
	if _, err := e.f.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create StorageClass %s: %v", sc.Name, err)
	}
	t.Cleanup(func() {
		_ = e.f.Client.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	return sc.Name
}

// claim creates a claim of class with the given size and annotations.
func (e *provEnv) claim(ctx context.Context, t *testing.T, name, class, size string, mode corev1.PersistentVolumeAccessMode, annotations map[string]string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := e.claimObject(name, class, size, mode, annotations)
	created, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create claim %s/%s: %v", e.ns, name, err)
	}
	return created
}

// claimObject is the claim that claim creates.
func (e *provEnv) claimObject(name, class, size string, mode corev1.PersistentVolumeAccessMode, annotations map[string]string) *corev1.PersistentVolumeClaim {
	pvc := framework.Claim(e.ns, name, class, size, mode)
	pvc.Annotations = annotations
	return pvc
}

// waitBound waits until the claim is Bound and returns it with its PV.
func (e *provEnv) waitBound(ctx context.Context, t *testing.T, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	return e.f.WaitForClaimBound(ctx, t, e.ns, name, provisionTimeout)
}

// events returns the events about a claim of the test's namespace.
func (e *provEnv) events(ctx context.Context, claim string) ([]corev1.Event, error) {
	list, err := e.f.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "PersistentVolumeClaim",
		"involvedObject.name": claim,
	}.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitEvent waits for an event about the claim with the type and reason
// whose message contains text, and returns it.
func (e *provEnv) waitEvent(ctx context.Context, t *testing.T, claim, eventType, reason, text string) corev1.Event {
	t.Helper()
	var found corev1.Event
	framework.WaitFor(ctx, t, provisionTimeout, fmt.Sprintf("a %s %s event on claim %s containing %q", eventType, reason, claim, text), func(ctx context.Context) (bool, error) {
		events, err := e.events(ctx, claim)
		if err != nil {
			return false, err
		}
		for _, ev := range events {
			if ev.Type == eventType && ev.Reason == reason && strings.Contains(ev.Message, text) {
				found = ev
				return true, nil
			}
		}
		return false, fmt.Errorf("events so far: %s", e.f.EventReasons(ctx, e.ns, "PersistentVolumeClaim", claim))
	})
	return found
}

// checkNoVolume checks that the claim pvc of e's namespace got no volume:
// it is Pending and unbound, and no real node's pool has a directory named
// after its UID.
func (e *provEnv) checkNoVolume(ctx context.Context, t *testing.T, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	got, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, pvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
		t.Errorf("Claim %s/%s is %s bound to %q, want Pending and unbound", e.ns, pvc.Name, got.Status.Phase, got.Spec.VolumeName)
	}
	if entries := e.poolEntries(t, string(pvc.UID)); len(entries) != 0 {
		t.Errorf("Pool entries for claim %s/%s = %v, want none", e.ns, pvc.Name, entries)
	}
}

// eventNode returns the node of the provisioner instance that emitted ev, or
// "" when no provisioner did: the library's events name the pod in their
// source component, the provisioner's own name the node as source host.
func (e *provEnv) eventNode(ev corev1.Event) string {
	component := ev.Source.Component
	if component == "" {
		component = ev.ReportingController
	}
	if component == provisionerName {
		if ev.Source.Host != "" {
			return ev.Source.Host
		}
		return ev.ReportingInstance
	}
	if !strings.HasPrefix(component, provisionerName+"_") {
		return ""
	}
	for node, pod := range e.instances {
		if strings.HasPrefix(component, provisionerName+"_"+pod+"_") {
			return node
		}
	}
	return "unknown instance " + component
}

// checkOneSource checks that every provisioner event about the claim comes
// from the instance on node, and that there is at least one.
func (e *provEnv) checkOneSource(ctx context.Context, t *testing.T, claim, node string) {
	t.Helper()
	events, err := e.events(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]string{}
	for _, ev := range events {
		if n := e.eventNode(ev); n != "" {
			sources[n] = append(sources[n], ev.Reason)
		}
	}
	if len(sources) != 1 || sources[node] == nil {
		t.Errorf("Provisioner events on claim %s by instance node = %v, want all from the instance on %s", claim, sources, node)
	}
}

// checkPV checks what a user sees on a node-mode PV made for claim on node.
func (e *provEnv) checkPV(ctx context.Context, t *testing.T, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, node string, reclaim corev1.PersistentVolumeReclaimPolicy) {
	t.Helper()
	n, err := e.f.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := map[string]string{
		annPVProvisionedBy: provisionerName, annPVNode: node, annPVPool: "default",
		annPVClaimNamespace: pvc.Namespace, annPVClaimName: pvc.Name, annPVMode: "node",
	}
	for k, v := range wantAnn {
		if got := pv.Annotations[k]; got != v {
			t.Errorf("PV %s annotation %s = %q, want %q", pv.Name, k, got, v)
		}
	}
	dir := pv.Annotations[annPVDirectory]
	if want := pvc.Namespace + "-" + pvc.Name + "-" + pv.Name; dir != want {
		t.Errorf("PV %s directory = %q, want %q (the default pathPattern)", pv.Name, dir, want)
	}
	hp := pv.Spec.HostPath
	if hp == nil || hp.Path != localcluster.PoolPath+"/"+dir || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("PV %s hostPath = %+v, want %s/%s of type Directory", pv.Name, hp, localcluster.PoolPath, dir)
	}
	want := fmt.Sprintf("[{[{%s In [%s]}] []}]", corev1.LabelHostname, n.Labels[corev1.LabelHostname])
	if na := pv.Spec.NodeAffinity; na == nil || na.Required == nil || fmt.Sprint(na.Required.NodeSelectorTerms) != want {
		t.Errorf("PV %s node affinity = %+v, want required %s", pv.Name, pv.Spec.NodeAffinity, want)
	}
	if got, want := pv.Spec.Capacity[corev1.ResourceStorage], pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
		t.Errorf("PV %s capacity = %s, want the request %s", pv.Name, got.String(), want.String())
	}
	if fmt.Sprint(pv.Spec.AccessModes) != fmt.Sprint(pvc.Spec.AccessModes) {
		t.Errorf("PV %s access modes = %v, want the claim's %v", pv.Name, pv.Spec.AccessModes, pvc.Spec.AccessModes)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != reclaim {
		t.Errorf("PV %s reclaim policy = %s, want %s", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, reclaim)
	}
}

// nodePath is where this machine sees node's copy of the PV's directory.
func (e *provEnv) nodePath(t *testing.T, node string, pv *corev1.PersistentVolume, file ...string) string {
	t.Helper()
	p := e.f.MustNodeDir(t, node, hostpathv1.VolumePath(pv))
	return filepath.Join(append([]string{p}, file...)...)
}

// poolEntries returns the entries of every node's pool whose name contains
// text.
func (e *provEnv) poolEntries(t *testing.T, text string) []string {
	t.Helper()
	var out []string
	for _, n := range e.nodes {
		pool := e.f.MustNodeDir(t, n, localcluster.PoolPath)
		entries, err := os.ReadDir(pool)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, en := range entries {
			if strings.Contains(en.Name(), text) {
				out = append(out, filepath.Join(n, en.Name()))
			}
		}
	}
	sort.Strings(out)
	return out
}

// get returns the body of GET path on the provisioner of node, failing the
// test unless it answers 200.
func (e *provEnv) get(ctx context.Context, t *testing.T, node, path string) string {
	t.Helper()
	return scrapeOK(ctx, t, "http://"+e.addresses[node]+path, metricsToken(ctx, t, e.f))
}

// waitReleased waits until the PV is Released (its claim is gone and it
// is kept).
func (e *provEnv) waitReleased(ctx context.Context, t *testing.T, pv *corev1.PersistentVolume) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to be Released", func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase != corev1.VolumeReleased {
			return false, fmt.Errorf("PV is %s", got.Status.Phase)
		}
		return true, nil
	})
}

// writerPod runs the testtools image with the claim at /data and command.
func writerPod(ns, name, node, claim, command string) *corev1.Pod {
	p := framework.TestToolsPod(ns, name, node, command)
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// deleteAndWaitGone deletes the pod (if any) and the claim, and waits until
// both are gone.
func (e *provEnv) deleteAndWaitGone(ctx context.Context, t *testing.T, pod, claim string) {
	t.Helper()
	if pod != "" {
		if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("Delete pod %s: %v", pod, err)
		}
		framework.WaitFor(ctx, t, provisionTimeout, "pod "+pod+" to be gone", func(ctx context.Context) (bool, error) {
			_, err := e.f.Client.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	if err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete claim %s: %v", claim, err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "claim "+claim+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestProvisionerWaitForFirstConsumer is the walkthrough: a claim of the
// WaitForFirstConsumer class and a pod that writes a file; the claim binds on
// the pod's node, the file is in that node's pool and nowhere else, and
// deleting pod and claim removes the directory.
func TestProvisionerWaitForFirstConsumer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	pvc := e.claim(ctx, t, "test-claim", classWaitForConsumer, "10Mi", corev1.ReadWriteOnce, nil)
	pod, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "test-pod", "", pvc.Name, "echo hello > /data/SUCCESS"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod = e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
	node := pod.Spec.NodeName

	pvc, pv := e.waitBound(ctx, t, pvc.Name)
	if got := pvc.Annotations[annSelectedNode]; got != node {
		t.Errorf("Claim selected-node = %q, want the pod's node %q", got, node)
	}
	e.checkPV(ctx, t, pvc, pv, node, corev1.PersistentVolumeReclaimDelete)
	e.checkOneSource(ctx, t, pvc.Name, node)

	file := e.nodePath(t, node, pv, "SUCCESS")
	if data, err := os.ReadFile(file); err != nil || string(data) != "hello\n" {
		t.Errorf("File on %s at %s = %q, %v; want \"hello\\n\"", node, file, data, err)
	}
	elsewhere := e.nodePath(t, e.other(node), pv)
	if _, err := os.Stat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Directory on the other node %s: stat %s = %v, want it not to exist", e.other(node), elsewhere, err)
	}

	e.deleteAndWaitGone(ctx, t, pod.Name, pvc.Name)
	dir := e.nodePath(t, node, pv)
	framework.WaitFor(ctx, t, provisionTimeout, "the PV and directory "+dir+" to be deleted", func(ctx context.Context) (bool, error) {
		if _, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("PV %s still exists (%v)", pv.Name, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("directory still there (stat: %v)", err)
		}
		return true, nil
	})
}

// TestProvisionerPinnedClaims: claims that name their node bind there without
// any pod, with each annotation key, in an Immediate class and in a
// WaitForFirstConsumer one; only that node's instance acts for them.
func TestProvisionerPinnedClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	tests := []struct {
		name  string
		class string
		key   string
		node  string
		// also are more annotations, naming other nodes.
		also map[string]string
	}{
		{name: "pinned-hostpath", class: classImmediate, key: annProvisionOnNode, node: e.nodes[1]},
		{name: "pinned-kubevirt", class: classImmediate, key: annKubevirtOnNode, node: e.nodes[0]},
		{name: "pinned-wffc", class: classWaitForConsumer, key: annProvisionOnNode, node: e.nodes[1]},
		{
			name: "conflicting-annotations", class: classImmediate, key: annProvisionOnNode, node: e.nodes[0],
			also: map[string]string{annKubevirtOnNode: e.nodes[1]},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			annotations := map[string]string{tc.key: tc.node}
			for k, v := range tc.also {
				annotations[k] = v
			}
			pvc := e.claim(ctx, t, tc.name, tc.class, "1Mi", corev1.ReadWriteOnce, annotations)
			pvc, pv := e.waitBound(ctx, t, pvc.Name)
			e.checkPV(ctx, t, pvc, pv, tc.node, corev1.PersistentVolumeReclaimDelete)
			if tc.class == classWaitForConsumer {
				if got := pvc.Annotations[annSelectedNode]; got != tc.node {
					t.Errorf("Claim selected-node = %q, want %q set by the provisioner", got, tc.node)
				}
				e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeNormal, "NodeSelected", annProvisionOnNode)
			}
			if tc.also != nil {
				e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, "NodeAnnotationConflict",
					fmt.Sprintf("the volume goes to %q (%s wins)", tc.node, tc.key))
			}
			e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeNormal, "ProvisioningSucceeded", pv.Name)
			e.checkOneSource(ctx, t, pvc.Name, tc.node)
			if info, err := os.Stat(e.nodePath(t, tc.node, pv)); err != nil || !info.IsDir() {
				t.Errorf("Directory on %s: %v, want a directory", tc.node, err)
			}
			if _, err := os.Stat(e.nodePath(t, e.other(tc.node), pv)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Directory on the other node %s: %v, want none", e.other(tc.node), err)
			}
		})
	}
}

// TestProvisionerRetain: with reclaimPolicy Retain the directory and its
// file stay after the claim is deleted, and the PV is Released.
func TestProvisionerRetain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pvc := e.claim(ctx, t, "keep", classRetain, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	pvc, pv := e.waitBound(ctx, t, pvc.Name)
	dir := e.nodePath(t, node, pv)
	t.Cleanup(func() {
		// A retained volume is the operator's to remove.
		_ = e.f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		_ = os.RemoveAll(dir)
	})
	e.checkPV(ctx, t, pvc, pv, node, corev1.PersistentVolumeReclaimRetain)

	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "writer", node, pvc.Name, "echo kept > /data/data.txt"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, "writer", provisionTimeout)
	e.deleteAndWaitGone(ctx, t, "writer", pvc.Name)

	e.waitReleased(ctx, t, pv)
	if data, err := os.ReadFile(filepath.Join(dir, "data.txt")); err != nil || string(data) != "kept\n" {
		t.Errorf("Retained file = %q, %v; want \"kept\\n\"", data, err)
	}
}

// TestProvisionerFailures: claims that cannot be provisioned stay Pending
// with a Warning event that says why, and no directory is created.
func TestProvisionerFailures(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pinned := map[string]string{annProvisionOnNode: node}
	badPattern := e.storageClass(ctx, t, "badpattern", storagev1.VolumeBindingImmediate, map[string]string{"pathPattern": "../${pvc.metadata.name}"})
	unknownParam := e.storageClass(ctx, t, "unknownparam", storagev1.VolumeBindingImmediate, map[string]string{"size": "1Gi"})
	multihost := e.storageClass(ctx, t, "multihost", storagev1.VolumeBindingImmediate, map[string]string{"mode": "multihost"})
	idle := e.nodeWithoutProvisioner(ctx, t)

	tests := []struct {
		name        string
		class       string
		size        string
		mode        corev1.PersistentVolumeAccessMode
		annotations map[string]string
		reason      string
		text        string
		// fromNode is the instance that must report ("" for the one
		// elected among all).
		fromNode string
	}{
		{name: "bad-pattern", class: badPattern, annotations: pinned, reason: eventProvisioningFail, text: `StorageClass parameter "pathPattern"`, fromNode: node},
		{name: "unknown-parameter", class: unknownParam, annotations: pinned, reason: eventProvisioningFail, text: `StorageClass parameter "size": unknown parameter`, fromNode: node},
		{name: "no-node", class: classImmediate, reason: "NodeNotSpecified", text: "add the annotation " + annProvisionOnNode},
		{name: "missing-node", class: classImmediate, annotations: map[string]string{annProvisionOnNode: "no-such-node"}, reason: "NodeNotFound", text: `Node "no-such-node" named by ` + annProvisionOnNode + " does not exist"},
		{name: "no-provisioner", class: classImmediate, annotations: map[string]string{annProvisionOnNode: idle}, reason: "NoProvisionerOnNode", text: fmt.Sprintf("No hostpath provisioner runs on node %q", idle)},
		{name: "oversized", class: classImmediate, size: "8Pi", annotations: pinned, reason: eventProvisioningFail, text: "the volume does not fit in the pool", fromNode: node},
		{name: "read-write-many", class: classImmediate, mode: corev1.ReadWriteMany, annotations: pinned, reason: eventProvisioningFail, text: "access mode ReadWriteMany is not supported", fromNode: node},
		{name: "multihost-reuse", class: multihost, annotations: map[string]string{"hostpath.dev/reuse-directory": "some-directory"}, reason: eventProvisioningFail, text: "hostpath.dev/reuse-directory"},
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for _, tc := range tests {
		size, mode := tc.size, tc.mode
		if size == "" {
			size = "1Mi"
		}
		if mode == "" {
			mode = corev1.ReadWriteOnce
		}
		claims[tc.name] = e.claim(ctx, t, tc.name, tc.class, size, mode, tc.annotations)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pvc := claims[tc.name]
			ev := e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, tc.reason, tc.text)
			t.Logf("Event: %s %s: %s", ev.Type, ev.Reason, ev.Message)
			e.checkNoVolume(ctx, t, pvc)
			if tc.fromNode != "" {
				e.checkOneSource(ctx, t, pvc.Name, tc.fromNode)
			}
		})
	}
	// A claim pinned to each node, created after the others and bound,
	// shows that every instance has processed the failing claims too.
	for _, n := range e.nodes {
		e.claim(ctx, t, "sentinel-"+n, classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: n})
	}
	for _, n := range e.nodes {
		e.waitBound(ctx, t, "sentinel-"+n)
	}
	// The claims no node owns were reported by one instance only.
	for _, name := range []string{"no-node", "missing-node", "no-provisioner", "multihost-reuse"} {
		events, err := e.events(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		from := map[string]bool{}
		for _, ev := range events {
			if n := e.eventNode(ev); n != "" {
				from[n] = true
			}
		}
		if len(from) != 1 {
			t.Errorf("Claim %s has provisioner events from instances %v, want exactly one: %s", name, from, e.f.EventReasons(ctx, e.ns, "PersistentVolumeClaim", name))
		}
	}
	// Only the owner counts the failure: the other instance has no
	// series for the class at all.
	series := failedMetric + `{class="` + badPattern + `"`
	if m := e.get(ctx, t, node, "/metrics"); !strings.Contains(m, series) {
		t.Errorf("Metrics of the provisioner on %s lack %s", node, series)
	}
	if m := e.get(ctx, t, e.other(node), "/metrics"); strings.Contains(m, `"`+badPattern+`"`) {
		t.Errorf("Metrics of the provisioner on %s mention class %s, want nothing from a non-owner", e.other(node), badPattern)
	}
	for _, n := range e.nodes {
		for _, path := range []string{"/healthz", "/readyz"} {
			e.get(ctx, t, n, path)
		}
	}
	if entries := e.poolEntries(t, e.ns+"-"); len(entries) != len(e.nodes) {
		t.Errorf("Pool entries for the namespace = %v, want only the %d sentinels", entries, len(e.nodes))
	}
}
