package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/e2e/framework"
	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
)

// productImages are the images the manifests run, retagged for a release.
var productImages = []string{"hostpath.dev/manager", "hostpath.dev/provisioner", "hostpath.dev/hostdefiner"}

// TestUpgrade (after TestUninstall: its file sorts after it) installs the
// previous release, the newest tag v* before HEAD, from that tag's manifests
// with images built from that tag's code (scripts/images.sh with IMAGE_TAG
// and SOURCE_DIR), provisions a node-mode claim and a multihost claim in use
// by pods, then applies the current manifests as a user upgrading would.
// The pods keep their data, the old volumes can be deleted (their
// directories go on every node), and new claims provision. It skips when
// the checkout has no earlier release tag.
func TestUpgrade(t *testing.T) {
	ctx := t.Context()
	tag := previousRelease(ctx, t)
	e := setupMultihost(ctx, t)
	work := t.TempDir()
	src := filepath.Join(work, "src")
	if out, err := run(ctx, nil, "sh", "-c", `mkdir -p "$2" && git -C "$1" archive "$3" | tar -x -C "$2"`, "sh", e.f.RepoRoot, src, tag); err != nil {
		t.Fatalf("Extract %s: %v\n%s", tag, err, out)
	}
	env := []string{"IMAGE_TAG=" + tag, "SOURCE_DIR=" + src}
	if out, err := run(ctx, env, filepath.Join(e.f.RepoRoot, "scripts", "images.sh")); err != nil {
		t.Fatalf("Build and import the images of %s: %v\n%s", tag, err, tail(out, 3000))
	}
	release := filepath.Join(work, "release")
	if err := os.MkdirAll(release, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../src/manifests]\nimages:\n"
	for _, img := range productImages {
		k += fmt.Sprintf("- {name: %s, newTag: %s}\n", img, tag)
	}
	if err := os.WriteFile(filepath.Join(release, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}

	// Whatever happens, the suite ends with the current version installed.
	t.Cleanup(func() {
		if err := e.f.InstallProduct(context.Background()); err != nil {
			t.Errorf("Install the current version: %v", err)
		}
	})
	if out, err := e.f.Kubectl(ctx, "delete", "-k", framework.InstallKustomization, "--timeout=3m"); err != nil {
		t.Fatalf("kubectl delete -k manifests/: %v\n%s", err, out)
	}
	if out, err := e.f.Kubectl(ctx, "apply", "-k", release); err != nil {
		t.Fatalf("Install %s: %v\n%s", tag, err, out)
	}
	if err := e.f.WaitForWorkloads(ctx, framework.SystemNamespace, framework.WorkloadTimeout); err != nil {
		t.Fatalf("Install %s: %v", tag, err)
	}
	e.checkImages(ctx, t, tag)
	for _, n := range e.nodes {
		e.waitPhase(ctx, t, n, "default", hostpathv1.PhaseReady)
	}

	// Volumes of the old version, in use.
	node := e.nodes[0]
	pinned := e.claim(ctx, t, "old-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, nodePV := e.waitBound(ctx, t, pinned.Name)
	shared := e.claim(ctx, t, "old-shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "before", node, pinned.Name, "echo "+tag+" > /data/before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, "before", provisionTimeout)
	if _, err := e.f.Client.AppsV1().DaemonSets(e.ns).Create(ctx, sharedDaemonSet(e.ns, "through-upgrade", shared.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := e.f.ReadyPodsByNode(ctx, t, e.ns, "app=through-upgrade", e.nodes, provisionTimeout)

	// The upgrade: the current manifests over the old ones.
	if err := e.f.InstallProduct(ctx); err != nil {
		t.Fatalf("Upgrade to the current manifests: %v", err)
	}
	e.checkImages(ctx, t, "dev")
	for _, n := range e.nodes {
		e.waitPhase(ctx, t, n, "default", hostpathv1.PhaseReady)
		// Each provisioner marks its node's copy of the old multihost
		// volume (same-node authority), so that the elected instance, bound
		// to another node, may delete it there.
		waitMultihostRecord(ctx, t, e.f, n, sharedPV.Annotations[annPVDirectory])
	}

	// The old volumes keep working: the pods that ran through the upgrade
	// still see their files, and a new pod reads what the old one wrote.
	for _, n := range e.nodes {
		out, err := e.f.Kubectl(ctx, "-n", e.ns, "exec", pods[n].Name, "--", "cat", "/data/"+n)
		if err != nil || strings.TrimSpace(out) != n {
			t.Errorf("After the upgrade, /data/%s in the pod on %s = %q, %v; want %q", n, n, out, err, n)
		}
	}
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "after", node, pinned.Name, "grep -qx "+tag+" /data/before && echo dev > /data/after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, "after", provisionTimeout)
	if data, err := os.ReadFile(e.nodePath(t, node, nodePV, "after")); err != nil || strings.TrimSpace(string(data)) != "dev" {
		t.Errorf("File after in %s's directory on %s = %q, %v; want dev", nodePV.Name, node, data, err)
	}

	// New claims provision, and every volume, old and new, can be deleted.
	fresh := e.claim(ctx, t, "new-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, freshPV := e.waitBound(ctx, t, fresh.Name)
	freshShared := e.claim(ctx, t, "new-shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, freshSharedPV := e.waitBound(ctx, t, freshShared.Name)
	e.deleteDaemonSet(ctx, t, "through-upgrade")
	for _, pod := range []string{"before", "after"} {
		if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("Delete pod %s: %v", pod, err)
		}
	}
	for _, c := range []struct {
		claim string
		pv    *corev1.PersistentVolume
	}{{pinned.Name, nodePV}, {shared.Name, sharedPV}, {fresh.Name, freshPV}, {freshShared.Name, freshSharedPV}} {
		e.deleteAndWaitGone(ctx, t, "", c.claim)
		e.waitGoneEverywhere(ctx, t, c.pv)
	}
}

// previousRelease returns the newest release tag (v*) of the checkout that
// HEAD contains and that is not HEAD itself, and skips the test when there
// is none.
func previousRelease(ctx context.Context, t *testing.T) string {
	t.Helper()
	root, err := framework.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := run(ctx, nil, "git", "-C", root, "rev-parse", "HEAD")
	if err != nil {
		t.Skipf("No git history to take the previous release from: %v", err)
	}
	tags, err := run(ctx, nil, "git", "-C", root, "tag", "--list", "v*", "--merged", "HEAD", "--sort=-v:refname")
	if err != nil {
		t.Fatalf("List the release tags: %v\n%s", err, tags)
	}
	for _, tag := range strings.Fields(tags) {
		commit, err := run(ctx, nil, "git", "-C", root, "rev-list", "-n", "1", tag)
		if err != nil {
			t.Fatalf("Commit of %s: %v", tag, err)
		}
		if strings.TrimSpace(commit) != strings.TrimSpace(head) {
			return tag
		}
	}
	t.Skip("No release tag before HEAD in this checkout (git tag --list 'v*'): nothing to upgrade from")
	return ""
}

// checkImages fails the test unless every product workload runs the
// product's images with tag.
func (e *hdEnv) checkImages(ctx context.Context, t *testing.T, tag string) {
	t.Helper()
	var images []string
	dss, err := e.f.Client.AppsV1().DaemonSets(framework.SystemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dss.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	deps, err := e.f.Client.AppsV1().Deployments(framework.SystemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	if len(images) != len(productImages) {
		t.Errorf("Workload images %v, want one each of %v", images, productImages)
	}
	for _, img := range images {
		if !strings.HasSuffix(img, ":"+tag) {
			t.Errorf("Workload image %s, want tag %s", img, tag)
		}
	}
}

// deleteDaemonSet deletes the test's DaemonSet and waits until its pods are
// gone.
func (e *hdEnv) deleteDaemonSet(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := e.f.Client.AppsV1().DaemonSets(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete DaemonSet %s: %v", name, err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "the pods of DaemonSet "+name+" to be gone", func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		if len(list.Items) != 0 {
			return false, fmt.Errorf("%d pods left", len(list.Items))
		}
		return true, nil
	})
}

// run runs a command with extra environment and returns its combined output.
func run(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
