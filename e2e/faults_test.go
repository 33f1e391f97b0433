package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

const (
	// burstSize is the number of claims a crash test makes at once.
	burstSize = 200
	// burstTimeout bounds the wait for a burst to bind, or to go, across
	// a crash (at the controller-manager's default client limits the
	// binder manages about 4 claims a second).
	burstTimeout = 4 * time.Minute
)

// burst creates n claims of class in the test's namespace at once (from a
// few goroutines), named prefix-0..n-1, with the annotations given.
func (e *provEnv) burst(ctx context.Context, t *testing.T, prefix, class string, n int, annotations map[string]string) []string {
	t.Helper()
	names := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				names[i] = fmt.Sprintf("%s-%d", prefix, i)
				mode := corev1.ReadWriteOnce
				if class == classShared {
					mode = corev1.ReadWriteMany
				}
				pvc := e.claimObject(names[i], class, "1Mi", mode, annotations)
				_, errs[i] = e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Create claim %s: %v", names[i], err)
		}
	}
	return names
}

// namespacePVs returns the PVs whose claims are in the test's namespace.
func (e *provEnv) namespacePVs(ctx context.Context) ([]corev1.PersistentVolume, error) {
	list, err := e.f.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.PersistentVolume
	for _, pv := range list.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == e.ns {
			out = append(out, pv)
		}
	}
	return out, nil
}

// waitAllBound waits until every claim of names is Bound.
func (e *provEnv) waitAllBound(ctx context.Context, t *testing.T, names []string) {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	framework.WaitFor(ctx, t, burstTimeout, fmt.Sprintf("%d claims to be Bound", len(names)), func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, c := range list.Items {
			if want[c.Name] && c.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		if bound < len(names) {
			return false, fmt.Errorf("%d/%d Bound", bound, len(names))
		}
		return true, nil
	})
}

// waitPVsAtLeast waits until the namespace's claims have at least n PVs:
// the burst is under way.
func (e *provEnv) waitPVsAtLeast(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	framework.WaitFor(ctx, t, burstTimeout, fmt.Sprintf("%d PVs of the burst", n), func(ctx context.Context) (bool, error) {
		pvs, err := e.namespacePVs(ctx)
		if err != nil {
			return false, err
		}
		if len(pvs) < n {
			return false, fmt.Errorf("%d PVs", len(pvs))
		}
		return true, nil
	})
}

// deleteAll deletes the claims and waits until they, their PVs and (see
// checkDisks) their directories are gone.
func (e *provEnv) deleteAll(ctx context.Context, t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		if err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("Delete claim %s: %v", n, err)
		}
	}
	e.waitNoPVs(ctx, t)
}

// waitNoPVs waits until the namespace's claims have no PV left.
func (e *provEnv) waitNoPVs(ctx context.Context, t *testing.T) {
	t.Helper()
	framework.WaitFor(ctx, t, burstTimeout, "the PVs of the namespace to be gone", func(ctx context.Context) (bool, error) {
		pvs, err := e.namespacePVs(ctx)
		if err != nil {
			return false, err
		}
		if len(pvs) > 0 {
			return false, fmt.Errorf("%d PVs left", len(pvs))
		}
		return true, nil
	})
}

// diskEntry is a directory of the test's namespace in a node's default pool,
// with the owner its record names ("" without one).
type diskEntry struct{ node, dir, owner string }

func (d diskEntry) String() string { return d.node + ":" + d.dir + " (owner " + d.owner + ")" }

// poolDirectories reads, from this machine, every real node's default pool
// and returns its directories whose names start with the namespace (the
// default pathPattern's), with their owner records.
func (e *provEnv) poolDirectories(t *testing.T) []diskEntry {
	t.Helper()
	var out []diskEntry
	for _, n := range e.nodes {
		pool := e.f.MustNodeDir(t, n, localcluster.PoolPath)
		entries, err := os.ReadDir(pool)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range entries {
			if !strings.HasPrefix(en.Name(), e.ns+"-") {
				continue
			}
			d := diskEntry{node: n, dir: en.Name()}
			if rec, err := readRecordFile(filepath.Join(pool, ".hostpath", "owners", en.Name())); err == nil {
				d.owner = rec.Owner
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// checkDisks compares the disks of every real node with the namespace's
// PVs: each PV's directory is on each node that should hold it (its node;
// every node in hostpath.dev/nodes for a multihost one) with an owner record
// naming it, and no other directory of the namespace is on any node.
func (e *provEnv) checkDisks(ctx context.Context, t *testing.T) {
	t.Helper()
	pvs, err := e.namespacePVs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []diskEntry
	for _, pv := range pvs {
		nodes := []string{pv.Annotations[annPVNode]}
		if pv.Annotations[annPVMode] == "multihost" {
			nodes = strings.Split(pv.Annotations[annPVNodes], ",")
		}
		for _, n := range nodes {
			want = append(want, diskEntry{node: n, dir: pv.Annotations[annPVDirectory], owner: pv.Name})
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i].String() < want[j].String() })
	got := e.poolDirectories(t)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("The disks do not match the PVs:\n  on disk:   %v\n  PVs want:  %v\n  only on disk: %v\n  missing:      %v",
			len(got), len(want), diffEntries(got, want), diffEntries(want, got))
	}
}

// diffEntries returns the entries of a not in b.
func diffEntries(a, b []diskEntry) []diskEntry {
	in := map[diskEntry]bool{}
	for _, d := range b {
		in[d] = true
	}
	var out []diskEntry
	for _, d := range a {
		if !in[d] {
			out = append(out, d)
		}
	}
	return out
}

// checkOrphansAgree runs `kubectl hostpath orphans` and fails on any
// finding about the namespace's directories: it must agree with
// checkDisks.
func (e *provEnv) checkOrphansAgree(ctx context.Context, t *testing.T, bin string) {
	t.Helper()
	r, _ := runOrphans(ctx, t, e.f, bin)
	for _, f := range r.Findings {
		if strings.HasPrefix(f.Directory, e.ns+"-") {
			t.Errorf("kubectl hostpath orphans reports %s", f)
		}
	}
}

// TestFaultCrashMidBurst: a provisioner or a manager killed with SIGKILL while
// 200 claims of its node are being provisioned loses nothing and makes
// nothing twice: after the kubelet restarts it, every claim is Bound, each
// PV's directory is on its node with an owner record naming it, no other
// directory of the burst is on any node, and `kubectl hostpath orphans`
// agrees; deleting the claims then removes every directory.
func TestFaultCrashMidBurst(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	bin := buildKubectlHostpath(ctx, t, e.f)
	node := e.nodes[0]
	for _, program := range []string{"provisioner", "manager"} {
		t.Run(program, func(t *testing.T) {
			names := e.burst(ctx, t, program, classImmediate, burstSize, map[string]string{annProvisionOnNode: node})
			e.waitPVsAtLeast(ctx, t, burstSize/10)
			pid, err := framework.KillContainerProcess(node, program)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Killed the %s of %s (PID %d) with SIGKILL mid-burst", program, node, pid)
			e.waitAllBound(ctx, t, names)
			e.checkDisks(ctx, t)
			e.checkOrphansAgree(ctx, t, bin)
			e.deleteAll(ctx, t, names)
			e.checkDisks(ctx, t)
		})
	}
}

// TestFaultCrashMultihost: a manager killed with SIGKILL in the middle of
// multihost creates, and again in the middle of their deletes, loses
// nothing: every claim binds, every PV's directory ends on every node its
// hostpath.dev/nodes lists (all of them, once the host definer has given the
// restarted node what it missed), and the deletes remove every directory
// from every node.
func TestFaultCrashMultihost(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	victim := e.nodes[1]
	names := e.burst(ctx, t, "shared", classShared, 20, nil)
	e.waitPVsAtLeast(ctx, t, 2)
	if _, err := framework.KillContainerProcess(victim, "manager"); err != nil {
		t.Fatal(err)
	}
	e.waitAllBound(ctx, t, names)
	framework.WaitFor(ctx, t, burstTimeout, "every multihost PV to list every node", func(ctx context.Context) (bool, error) {
		pvs, err := e.namespacePVs(ctx)
		if err != nil {
			return false, err
		}
		all := strings.Join(e.nodes, ",")
		for _, pv := range pvs {
			if got := pv.Annotations[annPVNodes]; got != all {
				return false, fmt.Errorf("PV %s lists nodes %q, pending %q", pv.Name, got, pv.Annotations["hostpath.dev/pending-nodes"])
			}
		}
		return true, nil
	})
	e.checkDisks(ctx, t)

	for _, n := range names {
		if err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := framework.KillContainerProcess(victim, "manager"); err != nil {
		t.Fatal(err)
	}
	e.waitNoPVs(ctx, t)
	if left := e.poolDirectories(t); len(left) != 0 {
		t.Errorf("Directories left after deleting every multihost claim: %v", left)
	}
}

// TestFaultAPIServerOutage: the API server stopped for 10 s in the middle of a
// burst (scripts/apiserver.sh outage): once it is back, every claim binds
// and every volume exists exactly once on its node.
func TestFaultAPIServerOutage(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[1]
	names := e.burst(ctx, t, "outage", classImmediate, 100, map[string]string{annProvisionOnNode: node})
	e.waitPVsAtLeast(ctx, t, 10)
	if out, err := runScript(ctx, e.f, "apiserver.sh", "outage", "10"); err != nil {
		t.Fatalf("scripts/apiserver.sh outage 10: %v\n%s", err, out)
	}
	e.waitAllBound(ctx, t, names)
	e.checkDisks(ctx, t)
	e.deleteAll(ctx, t, names)
	e.checkDisks(ctx, t)
}

// TestFaultNodeReboot: a node stopped like a power-off and started again with a
// new boot ID (scripts/node-reboot.sh) is reported Rebooted by the host
// definer and verified again (its definition Ready with the new boot ID);
// every volume of the node is intact, and a pod comes back on its own and
// reads what it wrote before.
func TestFaultNodeReboot(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	n := 2
	node := e.nodes[n-1]
	pvc := e.claim(ctx, t, "survivor", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, nil)
	shared := e.claim(ctx, t, "shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	// Placed by the scheduler (a node selector, not spec.nodeName), which
	// selects the node of the WaitForFirstConsumer claim.
	pod := writerPod(e.ns, "survivor", "", pvc.Name, "[ -f /data/f ] || echo before-reboot > /data/f; echo read: $(cat /data/f); sleep 3600")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodRunning(ctx, t, e.ns, pod.Name, provisionTimeout)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	e.waitBound(ctx, t, shared.Name)
	before := e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady).Status.BootID

	if out, err := runScript(ctx, e.f, "node-reboot.sh", fmt.Sprint(n)); err != nil {
		t.Fatalf("scripts/node-reboot.sh %d: %v\n%s", n, err, out)
	}
	// node-start.sh keeps the node's boot ID in its folder.
	data, err := os.ReadFile(filepath.Join(e.f.ClusterDir, "nodes", node, "boot_id"))
	if err != nil {
		t.Fatal(err)
	}
	after := strings.TrimSpace(string(data))
	if after == before {
		t.Fatalf("boot ID %s unchanged by the reboot", after)
	}
	e.definitionEvent(ctx, t, node, "default", "Rebooted", after)
	framework.WaitFor(ctx, t, defineTimeout, "the definition of "+node+" to be Ready with the new boot ID", func(ctx context.Context) (bool, error) {
		d, err := e.definition(ctx, node, "default")
		if err != nil || d == nil {
			return false, err
		}
		if d.Status.Phase != hostpathv1.PhaseReady || d.Status.BootID != after {
			return false, fmt.Errorf("phase %s, boot ID %s", d.Status.Phase, d.Status.BootID)
		}
		return true, nil
	})
	// The pod comes back (same pod, its container started again) and reads
	// the file it wrote before the reboot.
	framework.WaitFor(ctx, t, provisionTimeout, "pod "+pod.Name+" to run again after the reboot", func(ctx context.Context) (bool, error) {
		p, err := e.f.Client.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 || !p.Status.ContainerStatuses[0].Ready {
			return false, fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return true, nil
	})
	if logs, err := e.f.PodLogs(ctx, e.ns, pod.Name, "main"); err != nil || !strings.Contains(logs, "read: before-reboot") {
		t.Errorf("Pod output after the reboot %q, %v: want it to read what it wrote before", logs, err)
	}
	if b, err := os.ReadFile(e.nodePath(t, node, pv, "f")); err != nil || string(b) != "before-reboot\n" {
		t.Errorf("File on %s after the reboot: %q, %v", node, b, err)
	}
	e.checkDisks(ctx, t)
}

// TestFaultRetainSurvives: the data of a Retain volume survives the claim's
// deletion and the PV's, a provisioner and a manager killed with SIGKILL,
// and the orphan sweep their restart sets off: the directory keeps its file,
// its owner record says retained, and `kubectl hostpath orphans` reports it
// as retained (never to be removed by the product).
func TestFaultRetainSurvives(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	bin := buildKubectlHostpath(ctx, t, e.f)
	node := e.nodes[0]
	class := e.storageClassWithPolicy(ctx, t, "retain-now", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain, nil)
	pvc := e.claim(ctx, t, "keep", class, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	pod, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "keep", node, pvc.Name, "echo precious > /data/f"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
	e.deleteAndWaitGone(ctx, t, pod.Name, pvc.Name)
	e.waitReleased(ctx, t, pv)
	// The PV deleted by hand too: the directory is now nobody's.
	if err := e.f.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The manager killed, then, once it serves again, the provisioner: the
	// restarted provisioner sweeps the pools when it starts (and logs that
	// it did).
	e.killAndWaitReady(ctx, t, node, "manager", managerSelector)
	e.killAndWaitReady(ctx, t, node, "provisioner", provisionerSelector)
	instance := e.instances[node]
	framework.WaitFor(ctx, t, provisionTimeout, "the restarted provisioner of "+node+" to sweep", func(ctx context.Context) (bool, error) {
		logs, err := e.f.PodLogs(ctx, framework.SystemNamespace, instance, "")
		if err != nil {
			return false, err
		}
		if !strings.Contains(logs, "Swept orphaned directories") {
			return false, errors.New("no sweep logged yet")
		}
		return true, nil
	})
	r, _ := runOrphans(ctx, t, e.f, bin)
	found := false
	for _, f := range r.Findings {
		if f.Directory == pv.Annotations[annPVDirectory] {
			found = f.Finding == "retained" && f.Node == node
			if !found {
				t.Errorf("kubectl hostpath orphans reports %s, want it retained", f)
			}
		}
	}
	if !found {
		t.Errorf("kubectl hostpath orphans does not report the retained directory %s; it reports %v (counts %v)", pv.Annotations[annPVDirectory], r.Findings, r.Counts)
	}
	if b, err := os.ReadFile(e.nodePath(t, node, pv, "f")); err != nil || string(b) != "precious\n" {
		t.Errorf("Retained file after the restarts and the sweep: %q, %v", b, err)
	}
	pool := e.f.MustNodeDir(t, node, localcluster.PoolPath)
	rec, err := os.ReadFile(filepath.Join(pool, ".hostpath", "owners", pv.Annotations[annPVDirectory]))
	if err != nil || !strings.Contains(string(rec), `"retained":true`) {
		t.Errorf("Owner record %s, %v: want retained", rec, err)
	}
	// The directory is the user's to remove, with its record.
	if err := os.RemoveAll(e.nodePath(t, node, pv)); err != nil {
		t.Error(err)
	}
	if err := os.Remove(filepath.Join(pool, ".hostpath", "owners", pv.Annotations[annPVDirectory])); err != nil {
		t.Error(err)
	}
}

// killAndWaitReady kills program on node with SIGKILL and waits until its
// pod (selected by selector) runs a restarted, Ready container.
func (e *provEnv) killAndWaitReady(ctx context.Context, t *testing.T, node, program, selector string) {
	t.Helper()
	restarts := func(ctx context.Context) (int32, bool, error) {
		pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
			return 0, false, fmt.Errorf("the %s pod of %s: %v", program, node, err)
		}
		cs := pods.Items[0].Status.ContainerStatuses[0]
		return cs.RestartCount, cs.Ready, nil
	}
	before, _, err := restarts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.KillContainerProcess(node, program); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the "+program+" of "+node+" to restart and be Ready", func(ctx context.Context) (bool, error) {
		n, ready, err := restarts(ctx)
		if err != nil {
			return false, err
		}
		if n <= before || !ready {
			return false, fmt.Errorf("restarts %d (was %d), ready %t", n, before, ready)
		}
		return true, nil
	})
}

// TestFaultHostDefinerFailoverDuringJoin: the leading host definer is killed
// (its pod deleted without a grace period) while a new node joins and gets
// the directories of 20 multihost volumes: the standby takes over, the new
// node's definition ends Ready, every volume lists the node and has its
// directory there exactly once (checkDisks), and the backfill counted no
// volume twice. The count may be short: directories the killed leader
// made before it could write the status are not counted again by the new
// leader, which finds them there (docs/hostdefiner.md says so; a CI run of
// 2026-11-26 saw 13 of 20).
func TestFaultHostDefinerFailoverDuringJoin(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	names := e.burst(ctx, t, "joined", classShared, 20, nil)
	e.waitAllBound(ctx, t, names)
	leader := e.leader(ctx, t, "")

	// While node-add.sh runs: once the new node has a definition, kill
	// the leader.
	killed := make(chan error, 1)
	go func() {
		killed <- wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			defs, err := e.hd.HostpathV1().HostDefinitions().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, d := range defs.Items {
				if !slices.Contains(e.nodes, d.Spec.NodeName) {
					zero := int64(0)
					err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: &zero})
					return err == nil, err
				}
			}
			return false, nil
		})
	}()
	node := e.addNode(ctx, t)
	if err := <-killed; err != nil {
		t.Fatalf("Kill the leading host definer %s during the join: %v", leader, err)
	}
	next := e.leader(ctx, t, leader)
	t.Logf("Killed the leader %s while %s joined; %s leads", leader, node, next)
	e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
	framework.WaitFor(ctx, t, defineTimeout, "every multihost PV to list "+node, func(ctx context.Context) (bool, error) {
		pvs, err := e.namespacePVs(ctx)
		if err != nil {
			return false, err
		}
		for _, pv := range pvs {
			if !slices.Contains(hostpathv1.SplitNodes(pv.Annotations[annPVNodes]), node) {
				return false, fmt.Errorf("PV %s lists %q", pv.Name, pv.Annotations[annPVNodes])
			}
		}
		return true, nil
	})
	e.nodes = append(e.nodes, node)
	e.checkDisks(ctx, t)
	d := e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
	t.Logf("HostDefinition %s: backfilled %d, multihost volumes %d", d.Name, d.Status.BackfilledVolumes, d.Status.MultihostVolumes)
	if int(d.Status.MultihostVolumes) < len(names) || d.Status.BackfilledVolumes < 1 || d.Status.BackfilledVolumes > d.Status.MultihostVolumes {
		t.Errorf("HostDefinition %s: backfilled %d, multihost volumes %d; want all %d volumes held, and between 1 and that many counted as backfilled",
			d.Name, d.Status.BackfilledVolumes, d.Status.MultihostVolumes, len(names))
	}
	e.deleteAll(ctx, t, names)
	e.checkDisks(ctx, t)
}

// TestFaultManagerRestartWithoutHostDefiner: with no host definer running, a
// manager killed with SIGKILL comes back serving /v1 over TLS with the
// certificate it stored (no CSR can be approved meanwhile), and provisions.
func TestFaultManagerRestartWithoutHostDefiner(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	node := e.nodes[0]
	stopHostDefiner(ctx, t, e.f)
	e.killAndWaitReady(ctx, t, node, "manager", managerSelector)

	urls := managerPods(ctx, t, e.f, []string{node})
	token := roleToken(ctx, t, e.f, e.ns, "reader", managerapi.AdminClusterRole)
	waitAllowed(ctx, t, urls[node], token, "GET /v1/host over TLS on the restarted manager")
	pvc := e.claim(ctx, t, "after-restart", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if fi, err := os.Stat(e.nodePath(t, node, pv)); err != nil || !fi.IsDir() {
		t.Errorf("Directory of %s on %s: %v", pv.Name, node, err)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
}

// stopHostDefiner scales the host definer's Deployment to no replica and
// waits until no pod of it runs; it returns what scales it back to its
// replicas and waits for the workloads, which the test's cleanup also
// does if the test did not.
func stopHostDefiner(ctx context.Context, t *testing.T, f *framework.Framework) (start func(context.Context) error) {
	t.Helper()
	scale := func(ctx context.Context, n int32) error {
		_, err := f.Kubectl(ctx, "-n", framework.SystemNamespace, "scale", "deployment", hostdefinerName, fmt.Sprintf("--replicas=%d", n))
		return err
	}
	before, err := f.Client.AppsV1().Deployments(framework.SystemNamespace).Get(ctx, hostdefinerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := *before.Spec.Replicas
	if err := scale(ctx, 0); err != nil {
		t.Fatal(err)
	}
	started := false
	start = func(ctx context.Context) error {
		if started {
			return nil
		}
		started = true
		if err := scale(ctx, replicas); err != nil {
			return err
		}
		return f.WaitForWorkloads(ctx, framework.SystemNamespace, 2*time.Minute)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := start(cctx); err != nil {
			t.Errorf("Scale the host definer back to %d: %v", replicas, err)
		}
	})
	framework.WaitFor(ctx, t, provisionTimeout, "no host definer pod", func(ctx context.Context) (bool, error) {
		pods, err := f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: hostdefinerSelector})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	return start
}

// TestFaultClaimWithoutClassesConfigMap: the ConfigMap of the classes
// deleted while no host definer runs, the API server skips the
// claim-labelling policy (its parameters are missing), and a claim of
// hostpath made meanwhile has no watch label: no instance that watches by
// label sees it, and a WaitForFirstConsumer claim pinned to a node, with
// no pod, gets no other update. When the host definer is back it makes the
// ConfigMap again and labels that claim, which then binds on its node.
// Where the API server has no claim-labelling policy (Kubernetes 1.35) it
// skips.
func TestFaultClaimWithoutClassesConfigMap(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	if !claimPolicyBound(ctx, t, e.f) {
		t.Skip("the API server has no claim-labelling policy (Kubernetes 1.35): the claims carry no label")
	}
	node := e.nodes[0]
	start := stopHostDefiner(ctx, t, e.f)
	if err := e.f.Client.CoreV1().ConfigMaps(framework.SystemNamespace).Delete(ctx, hostpathv1.ClassesConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pinned := e.claim(ctx, t, "while-missing", classWaitForConsumer, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	if v, ok := pinned.Labels[hostpathv1.LabelNode]; ok {
		t.Fatalf("Claim %s made without the policy's parameters has %s=%q: the test needs it unlabelled", pinned.Name, hostpathv1.LabelNode, v)
	}
	if err := start(ctx); err != nil {
		t.Fatalf("Start the host definer again: %v", err)
	}
	e.waitClaimLabel(ctx, t, pinned.Name, node)
	_, pv := e.waitBound(ctx, t, pinned.Name)
	e.deleteAndWaitGone(ctx, t, "", pinned.Name)
	e.waitGoneEverywhere(ctx, t, pv)
	e.checkDisks(ctx, t)
}
