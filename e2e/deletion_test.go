package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// The deletion invariant (docs/guarantees.md): a directory that holds data
// is removed only when no PV refers to it and the last reclaim policy of its
// PV was Delete; a PV goes only once every node holding its directory has
// reached its final state. Each test here compares what every node's pool
// holds with the PVs, before and after.

const (
	// annPVRecordedPolicy is the reclaim policy every node's owner record
	// of the PV's directory says.
	annPVRecordedPolicy = "hostpath.dev/recorded-reclaim-policy"
	// provisionerDaemonSet and managerDaemonSet are the node agents.
	provisionerDaemonSet = "hostpath-provisioner"
	managerDaemonSet     = "hostpath-manager"
	// poolsConfigArg is the manager's argument that names its pools: the
	// mounted ConfigMap hostpath-pools (pool.default, poolRoot).
	poolsConfigArg = "--pools-config=/etc/hostpath/pools"
)

// sweepOften makes every provisioner sweep its node every 2 seconds, with
// a grace period of 1 second, until the test ends. Call it only once the
// test's claims are Bound: a shorter grace than a provisioning attempt
// takes to save its PV is not what operators run.
func (e *provEnv) sweepOften(ctx context.Context, t *testing.T) {
	t.Helper()
	e.f.SetArgs(ctx, t, framework.DaemonSet(provisionerDaemonSet), "provisioner",
		framework.AddArgs("--orphan-grace-period=1s", "--orphan-sweep-period=2s"), provisionTimeout)
	for node, p := range e.f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, e.nodes, provisionTimeout) {
		e.instances[node] = p.Name
	}
}

// waitSweeps waits until the provisioner of node has logged n more sweeps
// than it had when called.
func (e *provEnv) waitSweeps(ctx context.Context, t *testing.T, node string, n int) {
	t.Helper()
	count := func(ctx context.Context) (int, error) {
		logs, err := e.f.PodLogs(ctx, framework.SystemNamespace, e.instances[node], "")
		return strings.Count(logs, "Swept orphaned directories"), err
	}
	start, err := count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, fmt.Sprintf("%d more sweeps on %s", n, node), func(ctx context.Context) (bool, error) {
		got, err := count(ctx)
		if err != nil {
			return false, err
		}
		if got < start+n {
			return false, fmt.Errorf("%d sweeps since", got-start)
		}
		return true, nil
	})
}

// pvEvents lists the events of a PV.
func (e *provEnv) pvEvents(ctx context.Context, pv string) ([]corev1.Event, error) {
	list, err := e.f.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "PersistentVolume",
		"involvedObject.name": pv,
	}.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitPVEvent waits for an event of eventType and reason on the PV whose
// message contains every one of texts, and returns it.
func (e *provEnv) waitPVEvent(ctx context.Context, t *testing.T, pv, eventType, reason string, texts ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	framework.WaitFor(ctx, t, provisionTimeout, fmt.Sprintf("a %s %s event on PV %s containing %q", eventType, reason, pv, texts), func(ctx context.Context) (bool, error) {
		events, err := e.pvEvents(ctx, pv)
		if err != nil {
			return false, err
		}
		var seen []string
	next:
		for _, ev := range events {
			seen = append(seen, ev.Type+" "+ev.Reason+": "+ev.Message)
			if ev.Type != eventType || ev.Reason != reason {
				continue
			}
			for _, text := range texts {
				if !strings.Contains(ev.Message, text) {
					continue next
				}
			}
			found = ev
			return true, nil
		}
		return false, fmt.Errorf("events: %s", strings.Join(seen, " | "))
	})
	return found
}

// readNodeFiles reads every file of the directory of pv on each of nodes:
// "node:name" to content, and the errors of the directories it could not
// read.
func (e *provEnv) readNodeFiles(t *testing.T, pv *corev1.PersistentVolume, nodes ...string) (map[string]string, []error) {
	t.Helper()
	out := map[string]string{}
	var errs []error
	for _, node := range nodes {
		dir := e.nodePath(t, node, pv)
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("the directory of PV %s on %s: %w", pv.Name, node, err))
			continue
		}
		for _, en := range entries {
			data, err := os.ReadFile(filepath.Join(dir, en.Name()))
			if err != nil {
				errs = append(errs, err)
			}
			out[node+":"+en.Name()] = string(data)
		}
	}
	return out, errs
}

// nodeFiles is readNodeFiles for a test that cannot go on without them.
func (e *provEnv) nodeFiles(t *testing.T, pv *corev1.PersistentVolume, nodes ...string) map[string]string {
	t.Helper()
	files, errs := e.readNodeFiles(t, pv, nodes...)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	return files
}

// checkFiles fails the test unless every file of want is still there with
// its content.
func (e *provEnv) checkFiles(t *testing.T, when string, pv *corev1.PersistentVolume, want map[string]string, nodes ...string) {
	t.Helper()
	got, errs := e.readNodeFiles(t, pv, nodes...)
	for _, err := range errs {
		t.Errorf("%s: %v", when, err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: file %s of PV %s = %q, want %q", when, k, pv.Name, got[k], v)
		}
	}
}

// setReclaimPolicy patches the reclaim policy of the PV name.
func (e *provEnv) setReclaimPolicy(ctx context.Context, t *testing.T, name string, policy corev1.PersistentVolumeReclaimPolicy) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"persistentVolumeReclaimPolicy":%q}}`, policy)
	if _, err := e.f.Client.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("Patch the reclaim policy of PV %s: %v", name, err)
	}
}

// ownerRecord is the manager's owner record of a volume, as on disk.
type ownerRecord struct {
	Owner          string `json:"owner"`
	Retained       bool   `json:"retained"`
	ReclaimPolicy  string `json:"reclaimPolicy"`
	ClaimNamespace string `json:"claimNamespace"`
	Multihost      bool   `json:"multihost"`
	SizeBytes      int64  `json:"sizeBytes"`
}

// readOwnerRecord reads the owner record of directory dir of the pool at
// poolPath on node.
func (e *provEnv) readOwnerRecord(t *testing.T, node, poolPath, dir string) ownerRecord {
	t.Helper()
	rec, err := readRecordFile(ownerRecordFile(t, e.f, node, poolPath, dir))
	if err != nil {
		t.Fatalf("Owner record of %s on %s: %v", dir, node, err)
	}
	return rec
}

// TestDeletionPoolRenamed: a pool renamed under a Bound multihost claim and
// a Bound node-mode claim, both in use (the manager's pools, from the
// ConfigMap as --pools-config, become --pool=renamed=PATH, same path, and
// the same --pool-root), with the provisioners sweeping
// every 2 s: every file stays on every node, each PV gets a Warning
// DirectoryMisplaced per node naming the directory, kubectl hostpath
// orphans lists the directories as misplaced, and renaming the pool back
// clears the report; deleting the claims then removes the directories.
func TestDeletionPoolRenamed(t *testing.T) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	bin := buildKubectlHostpath(ctx, t, e.f)
	node := e.nodes[0]

	shared := e.claim(ctx, t, "renamed-shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)
	local := e.claim(ctx, t, "renamed-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, localPV := e.waitBound(ctx, t, local.Name)
	ds, err := e.f.Client.AppsV1().DaemonSets(e.ns).Create(ctx, framework.SharedDaemonSet(e.ns, "users", shared.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.f.ReadyPodsByNode(ctx, t, e.ns, "app=users", e.nodes, provisionTimeout)
	user := writerPod(e.ns, "local-user", node, local.Name, "echo mine > /data/f && exec sleep 3600")
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the node-mode claim's file", func(context.Context) (bool, error) {
		data, err := os.ReadFile(e.nodePath(t, node, localPV, "f"))
		return string(data) == "mine\n", err
	})
	sharedFiles := e.nodeFiles(t, sharedPV, e.nodes...)
	localFiles := e.nodeFiles(t, localPV, node)
	if len(sharedFiles) != len(e.nodes) {
		t.Fatalf("Files of the multihost claim: %v, want one per node", sharedFiles)
	}

	e.sweepOften(ctx, t)
	renamed := []string{"--pool=renamed=" + localcluster.PoolPath, "--pool-root=" + localcluster.PoolRootPath}
	e.f.SetArgs(ctx, t, framework.DaemonSet(managerDaemonSet), "manager", func(args []string) []string {
		return slices.Concat(slices.DeleteFunc(args, func(a string) bool { return a == poolsConfigArg }), renamed)
	}, provisionTimeout)
	t.Cleanup(func() {
		// What the host definer prepared as pool "default" under the pool
		// root while "default" was not configured.
		for _, n := range e.nodes {
			if dir, err := e.f.NodeDir(n, path.Join(localcluster.PoolRootPath, "default")); err == nil {
				_ = os.RemoveAll(dir)
			}
		}
	})
	for _, n := range e.nodes {
		e.waitPVEvent(ctx, t, sharedPV.Name, corev1.EventTypeWarning, "DirectoryMisplaced",
			fmt.Sprintf("%q in pool \"renamed\" on node %q", sharedPV.Annotations[annPVDirectory], n))
	}
	e.waitPVEvent(ctx, t, localPV.Name, corev1.EventTypeWarning, "DirectoryMisplaced",
		fmt.Sprintf("%q in pool \"renamed\" on node %q", localPV.Annotations[annPVDirectory], node))
	for _, n := range e.nodes {
		e.waitSweeps(ctx, t, n, 2)
	}
	e.checkFiles(t, "pool renamed, after two more sweeps", sharedPV, sharedFiles, e.nodes...)
	e.checkFiles(t, "pool renamed, after two more sweeps", localPV, localFiles, node)
	r, _ := runOrphans(ctx, t, e.f, bin)
	for _, n := range e.nodes {
		checkFinding(t, r, orphansFinding{Node: n, Pool: "renamed", Directory: sharedPV.Annotations[annPVDirectory], Finding: "misplaced", Owner: sharedPV.Name})
	}
	checkFinding(t, r, orphansFinding{Node: node, Pool: "renamed", Directory: localPV.Annotations[annPVDirectory], Finding: "misplaced", Owner: localPV.Name})

	// Renamed back: nothing is reported about these directories any more.
	if err := e.f.UpdateArgs(ctx, framework.DaemonSet(managerDaemonSet), "manager", func(args []string) []string {
		return append(slices.DeleteFunc(args, func(a string) bool { return slices.Contains(renamed, a) }), poolsConfigArg)
	}, provisionTimeout); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "kubectl hostpath orphans to report nothing of the claims", func(ctx context.Context) (bool, error) {
		r, _ := runOrphans(ctx, t, e.f, bin)
		var about []string
		for _, f := range r.Findings {
			if f.Directory == sharedPV.Annotations[annPVDirectory] || f.Directory == localPV.Annotations[annPVDirectory] {
				about = append(about, f.String())
			}
		}
		if len(about) > 0 {
			return false, errors.New(strings.Join(about, "; "))
		}
		return true, nil
	})
	e.checkFiles(t, "pool renamed back", sharedPV, sharedFiles, e.nodes...)
	e.checkFiles(t, "pool renamed back", localPV, localFiles, node)

	if err := e.f.Client.AppsV1().DaemonSets(e.ns).Delete(ctx, ds.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	e.deleteAndWaitGone(ctx, t, user.Name, local.Name)
	framework.WaitFor(ctx, t, provisionTimeout, "the DaemonSet's pods to be gone", func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=users"})
		return err == nil && len(list.Items) == 0, err
	})
	e.deleteAndWaitGone(ctx, t, "", shared.Name)
	e.waitGoneEverywhere(ctx, t, sharedPV)
	framework.WaitFor(ctx, t, provisionTimeout, "the node-mode directory to be gone", func(context.Context) (bool, error) {
		_, err := os.Stat(e.nodePath(t, node, localPV))
		return errors.Is(err, os.ErrNotExist), nil
	})
}

// TestDeletionRetainAfterCreation: a multihost PV made with policy Delete
// and patched to Retain records Retain with its directory on every node;
// with one node's manager away (hostpath.dev/manager=false) while the claim
// and then the PV are deleted, the PV waits for that node with a Warning
// naming it; once the manager is back the directory is marked retained
// there, the PV goes, and the data survives the sweeps that follow on
// every node.
func TestDeletionRetainAfterCreation(t *testing.T) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	away := e.nodes[1]

	pvc := e.claim(ctx, t, "retain-later", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if got := pv.Annotations[annPVRecordedPolicy]; got != "Delete" {
		t.Errorf("PV %s annotation %s = %q, want Delete (the class's)", pv.Name, annPVRecordedPolicy, got)
	}
	t.Cleanup(func() {
		for _, n := range e.nodes {
			_ = os.RemoveAll(e.nodePath(t, n, pv))
		}
	})
	e.writeOnEveryNode(ctx, t, pvc.Name, "echo kept > /data/f")
	files := e.nodeFiles(t, pv, e.nodes...)
	e.sweepOften(ctx, t)

	e.setReclaimPolicy(ctx, t, pv.Name, corev1.PersistentVolumeReclaimRetain)
	framework.WaitFor(ctx, t, provisionTimeout, "Retain recorded on every node", func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if a := got.Annotations[annPVRecordedPolicy]; a != "Retain" {
			return false, fmt.Errorf("%s = %q", annPVRecordedPolicy, a)
		}
		return true, nil
	})
	for _, n := range e.nodes {
		if rec := e.readOwnerRecord(t, n, localcluster.PoolPath, pv.Annotations[annPVDirectory]); rec.ReclaimPolicy != "Retain" || rec.Owner != pv.Name {
			t.Errorf("Owner record on %s = %+v, want owner %s, reclaimPolicy Retain", n, rec, pv.Name)
		}
	}

	e.setNoManager(ctx, t, away, true)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
		defer cancel()
		e.setNoManager(cctx, t, away, false)
	})
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitReleased(ctx, t, pv)
	if err := e.f.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPVEvent(ctx, t, pv.Name, corev1.EventTypeWarning, "DirectoryNotRetained", fmt.Sprintf("node %q", away))
	if got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("PV %s while %s's manager is away: %v, %v; want it there, being deleted", pv.Name, away, got, err)
	}
	e.checkFiles(t, "while "+away+"'s manager is away", pv, files, e.nodes...)

	e.setNoManager(ctx, t, away, false)
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, n := range e.nodes {
		if rec := e.readOwnerRecord(t, n, localcluster.PoolPath, pv.Annotations[annPVDirectory]); !rec.Retained || rec.ReclaimPolicy != "Retain" {
			t.Errorf("Owner record on %s once the PV is gone = %+v, want retained, reclaimPolicy Retain", n, rec)
		}
	}
	for _, n := range e.nodes {
		e.waitSweeps(ctx, t, n, 2)
	}
	e.checkFiles(t, "after the PV went and two sweeps on every node", pv, files, e.nodes...)
}

// TestDeletionPoolMissing: a Delete PV whose pool is missing on its node
// (the pool's directory moved away) is not done: when its claim is
// deleted, the PV stays with a Warning naming the pool and the node, and
// nothing is removed; once the pool is back (the documented recovery), the
// directory and the PV go.
func TestDeletionPoolMissing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	node := e.nodes[0]
	pool := "e2e-" + framework.RandomSuffix()
	class := e.storageClass(ctx, t, "missing", storagev1.VolumeBindingImmediate, map[string]string{"pool": pool})
	e.waitPhase(ctx, t, node, pool, hostpathv1.PhaseReady)

	pvc := e.claim(ctx, t, "pool-missing", class, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if err := os.WriteFile(e.nodePath(t, node, pv, "f"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	poolDir := e.f.MustNodeDir(t, node, path.Join(localcluster.PoolRootPath, pool))
	moved := poolDir + ".moved"
	if err := os.Rename(poolDir, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(moved)
		_ = os.RemoveAll(poolDir)
	})

	// A policy change cannot be recorded where the pool is missing: a
	// Warning says so and the PV keeps the policy its node has recorded.
	e.setReclaimPolicy(ctx, t, pv.Name, corev1.PersistentVolumeReclaimRetain)
	e.waitPVEvent(ctx, t, pv.Name, corev1.EventTypeWarning, "ReclaimPolicyPending",
		fmt.Sprintf("Reclaim policy Retain is not recorded yet with the directory %q in pool %q on node %q: pool %q is missing on the node",
			pv.Annotations[annPVDirectory], pool, node, pool))
	if got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err != nil || got.Annotations[annPVRecordedPolicy] != "Delete" {
		t.Errorf("PV %s while Retain cannot be recorded: %v; want %s still Delete", pv.Name, err, annPVRecordedPolicy)
	}
	e.setReclaimPolicy(ctx, t, pv.Name, corev1.PersistentVolumeReclaimDelete)

	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitPVEvent(ctx, t, pv.Name, corev1.EventTypeWarning, "DirectoryNotRemoved",
		fmt.Sprintf("on node %q is not removed yet: pool %q is missing on the node", node, pool))
	if _, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("PV %s while its pool is missing: %v; want it kept", pv.Name, err)
	}
	movedFile := filepath.Join(moved, pv.Annotations[annPVDirectory], "f")
	if data, err := os.ReadFile(movedFile); err != nil || string(data) != "data\n" {
		t.Errorf("The data while the pool is missing: %q, %v", data, err)
	}

	// The recovery: the pool comes back where the manager expects it.
	if err := os.Rename(moved, poolDir); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := os.Stat(e.nodePath(t, node, pv)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("The directory once the pool is back and the PV gone: %v, want it removed", err)
	}
}
