package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/e2e/framework/releases"
)

const (
	// helmRelease is the release name docs/install.md uses.
	helmRelease = "hostpath"
	// helmChart is the chart, relative to the repository.
	helmChart = "charts/hostpath"
	// helmPool is the second pool TestHelm's values add, and helmPoolPath
	// its path on the nodes (a shared mount in each node, as a pool needs).
	helmPool     = "second"
	helmPoolPath = localcluster.ExtraPoolPath
	// helmClass and helmSharedClass are TestHelm's own classes, in the
	// second pool.
	helmClass       = "e2e-helm-second"
	helmSharedClass = "e2e-helm-second-shared"
	// crdName is the CRD the chart keeps on uninstall.
	crdName = "hostdefinitions.hostpath.dev"
)

// helmValues are TestHelm's values: not the defaults. A second pool, the
// default classes and two of its own in that pool, and resources of its own
// for the manager.
const helmValues = `pools:
  extra:
  - {name: ` + helmPool + `, path: ` + helmPoolPath + `}
storageClasses:
- {name: hostpath, mode: node, pool: default}
- {name: hostpath-retain, mode: node, pool: default, reclaimPolicy: Retain}
- {name: hostpath-immediate, mode: node, pool: default, volumeBindingMode: Immediate}
- {name: hostpath-local, mode: node, pool: default, volumeType: local}
- {name: hostpath-shared, mode: multihost, pool: default, volumeBindingMode: Immediate}
- {name: hostpath-capacity, mode: node, pool: default, capacity: true}
- {name: ` + helmClass + `, mode: node, pool: ` + helmPool + `, volumeBindingMode: Immediate}
- {name: ` + helmSharedClass + `, mode: multihost, pool: ` + helmPool + `, volumeBindingMode: Immediate}
manager:
  resources:
    requests: {cpu: 20m, memory: 40Mi}
    limits: {memory: 300Mi}
`

// helm runs one of the pinned helm commands (scripts/tool.sh helm or
// helm4) against the local cluster.
type helm struct {
	f    *framework.Framework
	bins map[string]string
}

// newHelm builds (once; scripts/tool.sh caches them) helm v3 and v4.
func newHelm(ctx context.Context, t *testing.T, f *framework.Framework) *helm {
	t.Helper()
	h := &helm{f: f, bins: map[string]string{}}
	for _, v := range []string{"helm", "helm4"} {
		out, err := exec.CommandContext(ctx, filepath.Join(f.RepoRoot, "scripts", "tool.sh"), v).Output()
		if err != nil {
			t.Fatalf("scripts/tool.sh %s: %v", v, err)
		}
		h.bins[v] = strings.TrimSpace(string(out))
	}
	return h
}

// run runs helm (v: "helm" or "helm4") with args in the release's
// namespace and returns its combined output.
func (h *helm) run(ctx context.Context, v string, args ...string) (string, error) {
	args = append(args, "--kubeconfig", h.f.Kubeconfig, "--namespace", framework.SystemNamespace)
	cmd := exec.CommandContext(ctx, h.bins[v], args...)
	cmd.Dir = h.f.RepoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", v, strings.Join(args, " "), err, tail(string(out), 3000))
	}
	return string(out), nil
}

// pkg packages the chart as version into dir and returns the archive.
func (h *helm) pkg(ctx context.Context, t *testing.T, dir, version string) string {
	t.Helper()
	if _, err := h.run(ctx, "helm", "package", helmChart, "--version", version, "--destination", dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "hostpath-"+version+".tgz")
}

// TestHelm moves an install of the last recorded release, made with
// kustomize, to the chart as docs/install.md says ("From the kustomize
// install to the chart"), with values that are not the defaults (a second
// pool, classes of its own, the manager's resources); upgrades between two
// builds of the chart with helm v4; uninstalls with helm v4; and installs
// again with helm v4, into a new namespace, and deletes the claims. The
// release's volumes keep their data through all of it, and pods keep
// using them; claims of both modes in the new pool are Bound, in use and
// deleted; the uninstall leaves no object of the chart but the CRD (kept,
// as documented) once the namespace is deleted too, and removes no data.
// It ends, pass or fail, with the suite's install
// (framework.InstallProduct).
func TestHelm(t *testing.T) {
	ctx := t.Context()
	root := framework.Cluster().RepoRoot
	rels, err := releases.Read(root)
	if err != nil || len(rels) == 0 {
		t.Fatalf("The release to move from: %v (%d releases)", err, len(rels))
	}
	last := rels[len(rels)-1]
	e := setupMultihost(ctx, t)
	h := newHelm(ctx, t, e.f)
	work := t.TempDir()
	values := filepath.Join(work, "values.yaml")
	if err := os.WriteFile(values, []byte(helmValues), 0o644); err != nil {
		t.Fatal(err)
	}
	build1, build2 := h.pkg(ctx, t, work, "0.0.1-e2e"), h.pkg(ctx, t, work, "0.0.2-e2e")
	t.Cleanup(func() { e.helmCleanup(context.Background(), t, h) })

	e.installRelease(ctx, t, last)
	node := e.nodes[0]
	pinned := e.claim(ctx, t, "kept-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, nodePV := e.waitBound(ctx, t, pinned.Name)
	shared := e.claim(ctx, t, "kept-shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)
	e.writeFile(ctx, t, "before", node, pinned.Name, last.Version)
	if _, err := e.f.Client.AppsV1().DaemonSets(e.ns).Create(ctx, framework.SharedDaemonSet(e.ns, "through-helm", shared.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := e.f.ReadyPodsByNode(ctx, t, e.ns, "app=through-helm", e.nodes, provisionTimeout)

	// docs/install.md: helm install --take-ownership over the kustomize
	// install, then the release's manual upgrade steps (CHANGELOG.md).
	if _, err := h.run(ctx, "helm", "install", helmRelease, build1, "--take-ownership", "-f", values, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("Move %s to the chart: %v", last.Version, err)
	}
	if out, err := e.f.Kubectl(ctx, "delete", "clusterrolebinding", oldHostDefinerBinding, "--ignore-not-found"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	e.checkHelmInstall(ctx, t, h, "0.0.1-e2e", "1")
	e.checkKept(ctx, t, pods, node, pinned.Name, nodePV, last.Version)
	e.useSecondPool(ctx, t, node)

	// Another build of the chart, with helm v4: the managers' new log
	// level rolls them out, one node at a time; the volumes stay.
	if _, err := h.run(ctx, "helm4", "upgrade", helmRelease, build2, "-f", values, "--set", "manager.logLevel=3", "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("Upgrade to the second build: %v", err)
	}
	e.checkHelmInstall(ctx, t, h, "0.0.2-e2e", "2")
	e.checkKept(ctx, t, nil, node, pinned.Name, nodePV, last.Version)
	e.deleteDaemonSet(ctx, t, "through-helm")

	e.checkHelmNothingLeft(ctx, t, h)
	for _, n := range e.nodes {
		if _, err := os.Stat(e.nodePath(t, n, sharedPV, n)); err != nil {
			t.Errorf("File %s of the multihost volume on %s after helm uninstall: %v, want it kept", n, n, err)
		}
	}
	if data, err := os.ReadFile(e.nodePath(t, node, nodePV, "before")); err != nil || strings.TrimSpace(string(data)) != last.Version {
		t.Errorf("File before of %s on %s after helm uninstall = %q, %v; want %q", nodePV.Name, node, data, err, last.Version)
	}
	// A fresh install with helm v4, which serves the volumes left behind
	// (the cleanup goes back to the suite's install).
	if _, err := h.run(ctx, "helm4", "install", helmRelease, build2, "--create-namespace", "-f", values, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("Install again with helm v4: %v", err)
	}
	e.checkHelmInstall(ctx, t, h, "0.0.2-e2e", "1")
	e.deleteAndWaitGone(ctx, t, "before", pinned.Name)
	e.deleteAndWaitGone(ctx, t, "", shared.Name)
	e.waitGoneEverywhere(ctx, t, nodePV)
	e.waitGoneEverywhere(ctx, t, sharedPV)
}

// writeFile runs a pod on node that writes text to /data/name of claim.
func (e *hdEnv) writeFile(ctx context.Context, t *testing.T, name, node, claim, text string) {
	t.Helper()
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, name, node, claim, "echo "+text+" > /data/"+name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, name, provisionTimeout)
}

// checkHelmInstall fails the test unless the release is deployed at chart
// version and revision, its workloads rolled out with the :dev images and
// the values' manager resources.
func (e *hdEnv) checkHelmInstall(ctx context.Context, t *testing.T, h *helm, version, revision string) {
	t.Helper()
	out, err := h.run(ctx, "helm", "list", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct{ Name, Revision, Status, Chart string }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("helm list: %v\n%s", err, out)
	}
	want := fmt.Sprintf("{%s %s deployed hostpath-%s}", helmRelease, revision, version)
	if len(list) != 1 || fmt.Sprint(list[0]) != want {
		t.Errorf("helm list = %+v, want one release %s", list, want)
	}
	if err := e.f.WaitForWorkloads(ctx, framework.SystemNamespace, framework.WorkloadTimeout); err != nil {
		t.Fatal(err)
	}
	e.checkImages(ctx, t, "dev")
	ds, err := e.f.Client.AppsV1().DaemonSets(framework.SystemNamespace).Get(ctx, "hostpath-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := ds.Spec.Template.Spec.Containers[0].Resources
	if got := fmt.Sprint(r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Memory()); got != "20m 40Mi 300Mi" {
		t.Errorf("Manager resources (cpu and memory requests, memory limit) = %s, want the values' 20m 40Mi 300Mi", got)
	}
	for _, n := range e.nodes {
		e.waitPhase(ctx, t, n, "default", hostpathv1.PhaseReady)
	}
}

// checkKept fails the test unless the release's volumes kept their data:
// each running pod (if pods is given) still reads its node's file of the
// multihost volume, and a new pod reads what the node-mode one had.
func (e *hdEnv) checkKept(ctx context.Context, t *testing.T, pods map[string]*corev1.Pod, node, claim string, pv *corev1.PersistentVolume, version string) {
	t.Helper()
	for n, p := range pods {
		out, err := e.f.Kubectl(ctx, "-n", e.ns, "exec", p.Name, "--", "cat", "/data/"+n)
		if err != nil || strings.TrimSpace(out) != n {
			t.Errorf("/data/%s in the pod on %s = %q, %v; want %q", n, n, out, err, n)
		}
	}
	name := fmt.Sprintf("read-%d", len(pods))
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, name, node, claim, "grep -qx "+version+" /data/before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, name, provisionTimeout)
	if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.nodePath(t, node, pv, "before")); err != nil {
		t.Errorf("File before of %s on %s: %v", pv.Name, node, err)
	}
}

// useSecondPool makes a claim of each of the values' classes, in the
// second pool, uses them from pods, checks the files on the nodes, and
// deletes them (their directories go): while the chart's values name the
// pool.
func (e *hdEnv) useSecondPool(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	pinned := e.claim(ctx, t, "second-node", helmClass, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pinnedPV := e.waitBound(ctx, t, pinned.Name)
	shared := e.claim(ctx, t, "second-shared", helmSharedClass, "1Mi", corev1.ReadWriteMany, nil)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)
	for _, pv := range []*corev1.PersistentVolume{pinnedPV, sharedPV} {
		if p := hostpathv1.VolumePath(pv); !strings.HasPrefix(p, helmPoolPath+"/") {
			t.Errorf("PV %s's directory %s, want one in the pool %s (%s)", pv.Name, p, helmPool, helmPoolPath)
		}
	}
	e.writeFile(ctx, t, "second", node, pinned.Name, "second")
	if _, err := e.f.Client.AppsV1().DaemonSets(e.ns).Create(ctx, framework.SharedDaemonSet(e.ns, "second-shared", shared.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.ReadyPodsByNode(ctx, t, e.ns, "app=second-shared", e.nodes, provisionTimeout)
	for _, n := range e.nodes {
		if data, err := os.ReadFile(e.nodePath(t, n, sharedPV, n)); err != nil || strings.TrimSpace(string(data)) != n {
			t.Errorf("File %s of the multihost volume in %s on %s = %q, %v", n, helmPool, n, data, err)
		}
	}
	if data, err := os.ReadFile(e.nodePath(t, node, pinnedPV, "second")); err != nil || strings.TrimSpace(string(data)) != "second" {
		t.Errorf("File second of %s on %s = %q, %v", pinnedPV.Name, node, data, err)
	}
	e.deleteDaemonSet(ctx, t, "second-shared")
	e.deleteAndWaitGone(ctx, t, "second", pinned.Name)
	e.deleteAndWaitGone(ctx, t, "", shared.Name)
	e.waitGoneEverywhere(ctx, t, pinnedPV)
	e.waitGoneEverywhere(ctx, t, sharedPV)
}

// runtimeObjects are the labelled objects the programs make at run time in
// their namespace, which helm uninstall leaves with it (docs/install.md,
// "Uninstalling the chart"): the host definer's CA bundle ConfigMap and CA
// Secret.
var runtimeObjects = []string{"configmap/hostpath-manager-ca", "secret/hostpath-manager-ca"}

// checkHelmNothingLeft uninstalls as docs/install.md says (helm uninstall,
// then the namespace deleted) and fails the test for any object of the
// product left but the CRD, which the chart keeps
// (helm.sh/resource-policy: keep): first that helm removed every object but
// what the programs made at run time, then that the namespace took the
// rest.
func (e *hdEnv) checkHelmNothingLeft(ctx context.Context, t *testing.T, h *helm) {
	t.Helper()
	if _, err := h.run(ctx, "helm4", "uninstall", helmRelease, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "helm uninstall to leave only what the programs made at run time", func(ctx context.Context) (bool, error) {
		left, err := e.labelled(ctx)
		if err != nil {
			return false, err
		}
		if left = slices.DeleteFunc(left, func(o string) bool { return slices.Contains(runtimeObjects, o) }); len(left) > 0 {
			return false, fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return true, nil
	})
	if out, err := e.f.Kubectl(ctx, "delete", "namespace", framework.SystemNamespace, "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	e.checkNothingLabelled(ctx, t)
	crd, err := e.f.Kubectl(ctx, "get", "crd", crdName, "-o", "jsonpath={.metadata.annotations.helm\\.sh/resource-policy}")
	if err != nil || crd != "keep" {
		t.Errorf("CRD %s after helm uninstall: resource policy %q, %v; want it kept", crdName, crd, err)
	}
}

// helmCleanup ends TestHelm with the suite's install whatever happened:
// the helm release uninstalled if it is still there, the suite's install
// applied, and what the second pool holds removed from the nodes.
func (e *hdEnv) helmCleanup(ctx context.Context, t *testing.T, h *helm) {
	if out, err := h.run(ctx, "helm", "list", "--short"); err == nil && slices.Contains(strings.Fields(out), helmRelease) {
		if _, err := h.run(ctx, "helm", "uninstall", helmRelease, "--wait"); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	}
	if err := e.upgradeToCurrent(ctx); err != nil {
		t.Errorf("Cleanup: install the product again: %v", err)
	}
	for _, n := range e.nodes {
		dir, err := e.f.NodeDir(n, helmPoolPath)
		var entries []os.DirEntry
		if err == nil {
			entries, err = os.ReadDir(dir)
		}
		for _, en := range entries {
			if err == nil {
				err = os.RemoveAll(filepath.Join(dir, en.Name()))
			}
		}
		if err != nil {
			t.Errorf("Cleanup: the pool %s on %s: %v", helmPoolPath, n, err)
		}
	}
}

// TestHelmSchema: a misspelt value fails `helm template` (and so `helm
// install`) of both helm versions at once, with an error naming it, before
// anything reaches the cluster.
func TestHelmSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newHelm(ctx, t, framework.Cluster())
	for _, c := range []struct{ set, want string }{
		{"manger.logLevel=3", "additional properties 'manger' not allowed"},
		{"storageClasses[0].name=a,storageClasses[0].reclaimPolicy=Recycle", "reclaimPolicy"},
		{"pools.default=relative/path", "/pools/default"},
		{"manager.image.digest=latest", "/manager/image/digest"},
	} {
		for _, v := range []string{"helm", "helm4"} {
			out, err := h.run(ctx, v, "template", helmRelease, helmChart, "--kube-version", "1.37.0", "--set", c.set)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("%s template --set %s: %v, output %q; want an error with %q", v, c.set, err, tail(out, 500), c.want)
			}
		}
	}
}
