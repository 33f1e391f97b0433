package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"hostpath.dev/api/generated/clientset/versioned"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

const (
	// hostdefinerName is the host definer's Deployment and leader Lease.
	hostdefinerName = "hostpath-hostdefiner"
	// hostdefinerSelector selects its pods.
	hostdefinerSelector = "app.kubernetes.io/name=hostpath-hostdefiner"
	// defineTimeout bounds a definition reaching a phase; Error takes the
	// default 5 tries (2+4+8+16 s of backoff).
	defineTimeout = 2 * time.Minute
	// poolRoot is the managers' --pool-root on the nodes.
	poolRoot = localcluster.PoolRootPath
	// stateDir is the managers' --state-dir on the nodes.
	stateDir = localcluster.StatePath
)

// hdEnv is what every host definer test starts from.
type hdEnv struct {
	*provEnv
	hd versioned.Interface
}

func setupHostDefiner(ctx context.Context, t *testing.T) *hdEnv {
	t.Helper()
	e := setupProvisioner(ctx, t)
	hd, err := versioned.NewForConfig(e.f.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &hdEnv{provEnv: e, hd: hd}
}

// definition returns the definition of node and pool, nil when there is none.
func (e *hdEnv) definition(ctx context.Context, node, pool string) (*hostpathv1.HostDefinition, error) {
	d, err := e.hd.HostpathV1().HostDefinitions().Get(ctx, hostpathv1.Name(node, pool), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}

// waitPhase waits until the definition of node and pool is in phase, and
// returns it.
func (e *hdEnv) waitPhase(ctx context.Context, t *testing.T, node, pool string, phase hostpathv1.Phase) *hostpathv1.HostDefinition {
	t.Helper()
	var def *hostpathv1.HostDefinition
	framework.WaitFor(ctx, t, defineTimeout, fmt.Sprintf("HostDefinition %s to be %s", hostpathv1.Name(node, pool), phase), func(ctx context.Context) (bool, error) {
		d, err := e.definition(ctx, node, pool)
		if err != nil || d == nil {
			return false, fmt.Errorf("get: %v (exists: %v)", err, d != nil)
		}
		def = d
		if d.Status.Phase != phase {
			return false, fmt.Errorf("phase %q, conditions %s", d.Status.Phase, conditions(d))
		}
		return true, nil
	})
	return def
}

// waitGone waits until node has no definition of pool.
func (e *hdEnv) waitGone(ctx context.Context, t *testing.T, node, pool string) {
	t.Helper()
	framework.WaitFor(ctx, t, defineTimeout, "HostDefinition "+hostpathv1.Name(node, pool)+" to be deleted", func(ctx context.Context) (bool, error) {
		d, err := e.definition(ctx, node, pool)
		if err != nil || d != nil {
			return false, fmt.Errorf("still there: %v, %s", err, conditions(d))
		}
		return true, nil
	})
}

// waitCondition waits until the definition has condition typ with reason.
func (e *hdEnv) waitCondition(ctx context.Context, t *testing.T, node, pool, typ, reason string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	framework.WaitFor(ctx, t, defineTimeout, fmt.Sprintf("HostDefinition %s condition %s reason %s", hostpathv1.Name(node, pool), typ, reason), func(ctx context.Context) (bool, error) {
		d, err := e.definition(ctx, node, pool)
		if err != nil || d == nil {
			return false, fmt.Errorf("get: %v (exists: %v)", err, d != nil)
		}
		cond = meta.FindStatusCondition(d.Status.Conditions, typ)
		if cond == nil || cond.Reason != reason {
			return false, fmt.Errorf("conditions %s", conditions(d))
		}
		return true, nil
	})
	return cond
}

// definitionEvent waits for an event on the definition of node and pool
// with reason, whose message holds text, and returns its message.
func (e *hdEnv) definitionEvent(ctx context.Context, t *testing.T, node, pool, reason, text string) string {
	t.Helper()
	name := hostpathv1.Name(node, pool)
	var msg string
	framework.WaitFor(ctx, t, defineTimeout, "event "+reason+" on HostDefinition "+name, func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=HostDefinition,involvedObject.name=" + name,
		})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Reason == reason && strings.Contains(ev.Message, text) {
				msg = ev.Message
				return true, nil
			}
			seen = append(seen, ev.Reason)
		}
		return false, fmt.Errorf("events so far: %v", seen)
	})
	return msg
}

func conditions(d *hostpathv1.HostDefinition) string {
	if d == nil {
		return "(none)"
	}
	var parts []string
	for _, c := range d.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// newPoolClass creates a StorageClass naming a new pool, deleted at the end.
func (e *hdEnv) newPoolClass(ctx context.Context, t *testing.T) string {
	t.Helper()
	pool := "e2e-" + framework.RandomSuffix()
	e.storageClass(ctx, t, "pool", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{"pool": pool})
	return pool
}

// labelNode sets (value non-empty) or removes a node label.
func (e *hdEnv) labelNode(ctx context.Context, t *testing.T, node, key, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, v)
	if _, err := e.f.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("Label node %s %s=%q: %v", node, key, value, err)
	}
}

// TestHostDefinerReady: every real node has a Ready definition of the
// default pool, with the host's identity and the pool's space recorded, and
// `kubectl get hostdefinitions` prints the columns of the design.
func TestHostDefinerReady(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	hostIDs := map[string]string{}
	for _, node := range e.nodes {
		d := e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
		st := d.Status
		if st.HostID == "" || st.BootID == "" || st.MachineID == "" || st.PoolPath != "/var/hpvolumes" || st.CapacityBytes <= 0 || st.ManagerPod == "" {
			t.Errorf("HostDefinition %s status = %+v, want identity, pool path /var/hpvolumes, capacity and manager pod", d.Name, st)
		}
		if other, dup := hostIDs[st.HostID]; dup {
			t.Errorf("Nodes %s and %s have the same host ID %s", other, node, st.HostID)
		}
		hostIDs[st.HostID] = node
		if c := meta.FindStatusCondition(st.Conditions, hostpathv1.ConditionDefined); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("HostDefinition %s condition Defined = %+v, want True", d.Name, c)
		}
	}
	out, err := e.f.Kubectl(ctx, "get", "hostdefinitions")
	if err != nil {
		t.Fatal(err)
	}
	if header := strings.Fields(strings.SplitN(out, "\n", 2)[0]); !slices.Equal(header, []string{"NAME", "AGE", "PHASE", "STORAGE", "NODE"}) {
		t.Errorf("kubectl get hostdefinitions header = %v, want NAME AGE PHASE STORAGE NODE\n%s", header, out)
	}
	for _, node := range e.nodes {
		if !strings.Contains(out, hostpathv1.Name(node, "default")) || !strings.Contains(out, "Ready") {
			t.Errorf("kubectl get hostdefinitions does not show %s Ready:\n%s", hostpathv1.Name(node, "default"), out)
		}
	}
	t.Logf("kubectl get hostdefinitions:\n%s", out)
}

// TestHostDefinerNewPool: a StorageClass with a new pool gets a Ready
// definition on every node and the pool's directory on each; deleting the
// class undefines the pool and keeps the directories.
func TestHostDefinerNewPool(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	pool := e.newPoolClass(ctx, t)
	for _, node := range e.nodes {
		d := e.waitPhase(ctx, t, node, pool, hostpathv1.PhaseReady)
		dir := e.f.MustNodeDir(t, node, filepath.Join(poolRoot, pool))
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			t.Errorf("Pool directory of %s on %s (%s): %v", pool, node, dir, err)
		}
		if d.Status.PoolPath != filepath.Join(poolRoot, pool) {
			t.Errorf("HostDefinition %s poolPath = %q, want %q", d.Name, d.Status.PoolPath, filepath.Join(poolRoot, pool))
		}
	}
	classes, err := e.f.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range classes.Items {
		if sc.Parameters["pool"] == pool {
			if err := e.f.Client.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, node := range e.nodes {
		e.waitGone(ctx, t, node, pool)
		if _, err := os.Stat(e.f.MustNodeDir(t, node, filepath.Join(poolRoot, pool))); err != nil {
			t.Errorf("Pool directory on %s after undefine: %v, want it kept", node, err)
		}
	}
}

// breakManager makes the manager of node unable to start (a host ID file
// that holds no host ID) and deletes its pod; it returns a func that
// restores the file.
func (e *hdEnv) breakManager(ctx context.Context, t *testing.T, node string) func() {
	t.Helper()
	file := e.f.MustNodeDir(t, node, filepath.Join(stateDir, "host-id"))
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("not-a-host-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := os.WriteFile(file, saved, 0o644); err != nil {
			t.Errorf("Restore %s: %v", file, err)
		}
	}
	t.Cleanup(restore)
	e.restartManager(ctx, t, node)
	return restore
}

// restartManager deletes the manager pod of node (the DaemonSet makes a new one).
func (e *hdEnv) restartManager(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: managerSelector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatalf("Delete the manager pod of %s: %v", node, err)
	}
}

// TestHostDefinerErrorAndRecovery: with one node's manager unable to start,
// its definition of a new pool goes PendingForCreation, then Error after
// the tries, and a multihost claim made meanwhile names the node pending;
// the recovery procedure (keep the manager off the node, fix the node, let
// it back) brings both definitions to Ready and the node gets the
// multihost directory.
func TestHostDefinerErrorAndRecovery(t *testing.T) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	broken := e.nodes[1]
	restore := e.breakManager(ctx, t, broken)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
		defer cancel()
		e.setNoManager(cctx, t, broken, false)
	})
	pool := e.newPoolClass(ctx, t)
	e.waitPhase(ctx, t, e.nodes[0], pool, hostpathv1.PhaseReady)
	e.waitPhase(ctx, t, broken, pool, hostpathv1.PhasePendingForCreation)
	t.Logf("Event: %s", e.definitionEvent(ctx, t, broken, pool, "DefinePending", "ManagerNotReady"))
	// The default pool's definition stays Ready (the host is defined, its
	// manager is down): a multihost claim names the node pending.
	pvc := e.claim(ctx, t, "while-broken", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if got := pv.Annotations[annPVPendingNodes]; got != broken {
		t.Errorf("PV %s annotation %s = %q, want %q", pv.Name, annPVPendingNodes, got, broken)
	}
	t.Logf("Event: %s", e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, "NodesPending", fmt.Sprintf("%q", broken)).Message)
	d := e.waitPhase(ctx, t, broken, pool, hostpathv1.PhaseError)
	if d.Status.Tries != 5 {
		t.Errorf("HostDefinition %s tries = %d, want 5 (--max-tries)", d.Name, d.Status.Tries)
	}
	t.Logf("Event: %s", e.definitionEvent(ctx, t, broken, pool, "DefineError", hostpathv1.RetryAnnotation))

	e.setNoManager(ctx, t, broken, true)
	e.waitGone(ctx, t, broken, pool)
	e.waitGone(ctx, t, broken, "default")
	restore()
	e.setNoManager(ctx, t, broken, false)
	e.waitPhase(ctx, t, broken, pool, hostpathv1.PhaseReady)
	e.waitPhase(ctx, t, broken, "default", hostpathv1.PhaseReady)
	if info, err := os.Stat(e.nodePath(t, broken, pv)); err != nil || !info.IsDir() {
		t.Errorf("Multihost directory on %s after recovery: %v", broken, err)
	}
	framework.WaitFor(ctx, t, defineTimeout, "PV "+pv.Name+" to list "+broken, func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if want := strings.Join(e.nodes, ","); got.Annotations[annPVNodes] != want || got.Annotations[annPVPendingNodes] != "" {
			return false, fmt.Errorf("nodes %q pending %q, want %q and none", got.Annotations[annPVNodes], got.Annotations[annPVPendingNodes], want)
		}
		return true, nil
	})
}

// TestHostDefinerClonedHost: a node that reports another node's host ID
// (its host-id file copied) goes to Error naming both nodes; the original
// stays Ready; with its own ID back and a retry, the clone is Ready again.
func TestHostDefinerClonedHost(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	original, clone := e.nodes[0], e.nodes[1]
	e.waitPhase(ctx, t, original, "default", hostpathv1.PhaseReady)
	e.waitPhase(ctx, t, clone, "default", hostpathv1.PhaseReady)
	src := e.f.MustNodeDir(t, original, filepath.Join(stateDir, "host-id"))
	dst := e.f.MustNodeDir(t, clone, filepath.Join(stateDir, "host-id"))
	id, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, id, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(dst, saved, 0o644) })
	e.restartManager(ctx, t, clone)
	d := e.waitPhase(ctx, t, clone, "default", hostpathv1.PhaseError)
	c := meta.FindStatusCondition(d.Status.Conditions, hostpathv1.ConditionDefined)
	if c == nil || c.Reason != "ClonedHost" || !strings.Contains(c.Message, original) || !strings.Contains(c.Message, clone) {
		t.Errorf("HostDefinition %s condition Defined = %+v, want reason ClonedHost naming %s and %s", d.Name, c, original, clone)
	}
	if o, err := e.definition(ctx, original, "default"); err != nil || o == nil || o.Status.Phase != hostpathv1.PhaseReady {
		t.Errorf("HostDefinition of the original %s = %v, %v; want Ready", original, o, err)
	}

	if err := os.WriteFile(dst, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	e.restartManager(ctx, t, clone)
	e.f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, []string{clone}, provisionTimeout)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, hostpathv1.RetryAnnotation, framework.RandomSuffix())
	if _, err := e.hd.HostpathV1().HostDefinitions().Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPhase(ctx, t, clone, "default", hostpathv1.PhaseReady)
}

// TestHostDefinerDeletionGuards: the avoid-deletion label and
// --allow-delete=false each keep a definition when its node's manager goes
// (with the UndefineBlocked condition); with both off, it goes.
func TestHostDefinerDeletionGuards(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	node := e.nodes[1]
	e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
		defer cancel()
		e.labelNode(cctx, t, node, hostpathv1.AvoidDeletionLabel, "")
		e.setNoManager(cctx, t, node, false)
	})

	e.labelNode(ctx, t, node, hostpathv1.AvoidDeletionLabel, "true")
	framework.WaitFor(ctx, t, defineTimeout, "the avoid-deletion label on the definition", func(ctx context.Context) (bool, error) {
		d, err := e.definition(ctx, node, "default")
		if err != nil || d == nil || d.Labels[hostpathv1.AvoidDeletionLabel] != "true" {
			return false, fmt.Errorf("definition %v, %v", d, err)
		}
		return true, nil
	})
	e.setNoManager(ctx, t, node, true)
	e.waitCondition(ctx, t, node, "default", hostpathv1.ConditionUndefineBlocked, "AvoidDeletionLabel")
	t.Logf("Event: %s", e.definitionEvent(ctx, t, node, "default", "UndefineBlocked", hostpathv1.AvoidDeletionLabel))
	e.setNoManager(ctx, t, node, false)
	e.labelNode(ctx, t, node, hostpathv1.AvoidDeletionLabel, "")
	framework.WaitFor(ctx, t, defineTimeout, "the UndefineBlocked condition to clear", func(ctx context.Context) (bool, error) {
		d, err := e.definition(ctx, node, "default")
		if err != nil || d == nil || meta.FindStatusCondition(d.Status.Conditions, hostpathv1.ConditionUndefineBlocked) != nil {
			return false, fmt.Errorf("%s, %v", conditions(d), err)
		}
		return true, nil
	})

	restore := e.setHostDefinerArg(ctx, t, "--allow-delete=false")
	e.setNoManager(ctx, t, node, true)
	e.waitCondition(ctx, t, node, "default", hostpathv1.ConditionUndefineBlocked, "AllowDeleteFalse")
	restore()
	e.waitGone(ctx, t, node, "default")
	e.setNoManager(ctx, t, node, false)
	e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
}

// setHostDefinerArg adds arg to the host definer's arguments and waits
// for the rollout, then until a pod running with arg leads; the returned
// function (and the test's end) restores them and waits until a pod
// running without it leads. The rollout alone is not enough: it is
// complete once the old pods are being deleted, and until its kubelet
// stops it the old leader keeps acting on its old arguments (an
// undefine that --allow-delete=false was set to prevent, a certificate
// without the new lifetime).
func (e *hdEnv) setHostDefinerArg(ctx context.Context, t *testing.T, arg string) (restore func()) {
	t.Helper()
	runsWith := func(want bool) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool { return slices.Contains(containerArgs(p, "hostdefiner"), arg) == want }
	}
	restoreArgs := e.f.SetArgs(ctx, t, framework.Deployment(hostdefinerName), "hostdefiner", framework.AddArgs(arg), provisionTimeout)
	e.leaderWhere(ctx, t, "running with "+arg, runsWith(true))
	var once sync.Once
	restore = func() {
		once.Do(func() {
			restoreArgs()
			// The test's context is done once its cleanups run.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defineTimeout)
			defer cancel()
			e.leaderWhere(cctx, t, "running without "+arg, runsWith(false))
		})
	}
	t.Cleanup(restore)
	return restore
}

// containerArgs returns the arguments of the container name of p.
func containerArgs(p *corev1.Pod, name string) []string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Args
		}
	}
	return nil
}

// TestHostDefinerLeaderFailover: deleting the leader pod hands the Lease to
// the other replica, which keeps the definitions right (a new pool is
// defined everywhere).
func TestHostDefinerLeaderFailover(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	leader := e.leader(ctx, t, "")
	if err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := e.leader(ctx, t, leader)
	t.Logf("Leader %s deleted; %s leads", leader, next)
	pool := e.newPoolClass(ctx, t)
	for _, node := range e.nodes {
		e.waitPhase(ctx, t, node, pool, hostpathv1.PhaseReady)
		e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
	}
	if err := e.f.WaitForWorkloads(ctx, framework.SystemNamespace, provisionTimeout); err != nil {
		t.Fatal(err)
	}
}

// leader waits until a running host definer pod other than not holds the
// Lease and returns its name.
func (e *hdEnv) leader(ctx context.Context, t *testing.T, not string) string {
	t.Helper()
	return e.leaderWhere(ctx, t, "other than "+not, func(p *corev1.Pod) bool { return p.Name != not })
}

// leaderWhere waits until a host definer pod that is not being deleted
// and that ok accepts (what says how) holds the Lease, and returns its
// name.
func (e *hdEnv) leaderWhere(ctx context.Context, t *testing.T, what string, ok func(*corev1.Pod) bool) string {
	t.Helper()
	var name string
	framework.WaitFor(ctx, t, defineTimeout, "a host definer leader "+what, func(ctx context.Context) (bool, error) {
		lease, err := e.f.Client.CoordinationV1().Leases(framework.SystemNamespace).Get(ctx, hostdefinerName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: hostdefinerSelector})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && strings.HasPrefix(holder, p.Name+"_") && ok(&p) {
				name = p.Name
				return true, nil
			}
		}
		return false, fmt.Errorf("lease holder %q", holder)
	})
	return name
}

// TestHostDefinerNodeJoins: a node that joins the cluster gets a Ready
// definition and every existing multihost directory of the pool, is
// recorded in the PV, and a pod on it uses the shared claim (its node's
// copy of the directory). Its provisioner publishes a CSIStorageCapacity,
// which goes with the node.
func TestHostDefinerNodeJoins(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	pvc := e.claim(ctx, t, "before-join", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)

	node := e.addNode(ctx, t)
	d := e.waitPhase(ctx, t, node, "default", hostpathv1.PhaseReady)
	if d.Status.MultihostVolumes < 1 || d.Status.BackfilledVolumes < 1 {
		t.Errorf("HostDefinition %s multihostVolumes=%d backfilledVolumes=%d, want at least 1 each", d.Name, d.Status.MultihostVolumes, d.Status.BackfilledVolumes)
	}
	if info, err := os.Stat(e.nodePath(t, node, pv)); err != nil || !info.IsDir() {
		t.Errorf("Multihost directory on the new node %s: %v", node, err)
	}
	framework.WaitFor(ctx, t, defineTimeout, "PV "+pv.Name+" to list "+node, func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !slices.Contains(hostpathv1.SplitNodes(got.Annotations[annPVNodes]), node) {
			return false, fmt.Errorf("%s = %q", annPVNodes, got.Annotations[annPVNodes])
		}
		return true, nil
	})
	// A pod on the new node mounts the shared claim: its node's copy.
	reader := writerPod(e.ns, "on-new-node", node, pvc.Name, "echo here > /data/new && cat /data/new")
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, reader.Name, provisionTimeout)
	if b, err := os.ReadFile(e.nodePath(t, node, pv, "new")); err != nil || string(b) != "here\n" {
		t.Errorf("File written by a pod on %s: %q, %v", node, b, err)
	}

	// A node-mode volume on the new node, Bound: the other instances do
	// not cache its PV, nor does any instance watch the Node.
	pinned := e.claim(ctx, t, "pinned-new-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pinnedPV := e.waitBound(ctx, t, pinned.Name)

	// The new node's provisioner publishes its room for the capacity-aware
	// class; when the node goes, the garbage collector removes the object
	// (its owner is the Node), as nothing runs there to delete it.
	e.capacityOf(ctx, t, classCapacity, node, "published", func(int64) bool { return true })
	if _, err := e.script(ctx, "node-remove.sh", node); err != nil {
		t.Fatalf("scripts/node-remove.sh %s: %v", node, err)
	}
	e.waitNoCapacity(ctx, t, labelCapacityNode+"="+node)
	// The instances learn that the node is gone from its instance's pod,
	// deleted with the Node, and the volume's PV is marked at once.
	e.waitPV(ctx, t, pinnedPV.Name, "marked as of a gone node", func(pv *corev1.PersistentVolume) error {
		if _, ok := pv.Annotations[annNodeGoneSince]; !ok {
			return errors.New("not marked")
		}
		return nil
	})
	e.waitPVEvent(ctx, t, pinnedPV.Name, corev1.EventTypeWarning, "NodeGone", "the PersistentVolume is deleted once its claim is")
}

// addNode starts one more real node (scripts/node-add.sh) and removes it
// (scripts/node-remove.sh) when the test ends; it returns its name.
func (e *hdEnv) addNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	out, err := e.script(ctx, "node-add.sh")
	if err != nil {
		t.Fatalf("scripts/node-add.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	node := strings.TrimSpace(lines[len(lines)-1])
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
		defer cancel()
		if _, err := e.script(cctx, "node-remove.sh", node); err != nil {
			t.Errorf("scripts/node-remove.sh %s: %v", node, err)
		}
	})
	nodes, err := localcluster.RealNodes(ctx, e.f.Client)
	if err != nil || !slices.Contains(nodes, node) {
		t.Fatalf("node-add.sh printed %q; real nodes %v, %v", node, nodes, err)
	}
	e.f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, []string{node}, provisionTimeout)
	return node
}

// script runs a script of scripts/ and returns its stdout.
func (e *hdEnv) script(ctx context.Context, name string, args ...string) (string, error) {
	return runScript(ctx, e.f, name, args...)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
