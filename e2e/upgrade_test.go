package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/e2e/framework/releases"
)

// productImages are the images the manifests run, retagged for a release.
var productImages = []string{"hostpath.dev/manager", "hostpath.dev/provisioner", "hostpath.dev/hostdefiner"}

// oldHostDefinerBinding is the ClusterRoleBinding that releases up to
// v0.2.0 made for the host definer; CHANGELOG.md tells upgraders to delete
// it after applying the new manifests, as a binding's role cannot change.
const oldHostDefinerBinding = "hostpath-hostdefiner-manager-client"

// TestUpgrade upgrades to the current version from each release that
// RELEASES records with upgrade "supported" (e2e/framework/releases; never
// from git tags, which a clone may not have), oldest first, one subtest per
// release. Each installs the release from its commit's manifests with
// images built from its code (git archive, then scripts/images.sh with
// IMAGE_TAG and SOURCE_DIR), provisions a node-mode claim and a multihost
// claim in use by pods, then applies the current manifests and does the
// manual steps CHANGELOG.md lists, as a user upgrading would
// (upgradeToCurrent). The pods keep their data; the HostDefinitions the
// release wrote are kept (same objects, same host IDs); the release's owner
// records and PVs are brought up to date (multihost mark, reclaim policy
// recorded with every copy and on the PV; the watch label on the PVs and
// claims); the old volumes can be deleted
// (their directories go on every node), and new claims provision. It fails
// when RELEASES is missing or malformed or records no release to upgrade
// from. It may run anywhere in the suite: each subtest works in a
// namespace of its own and, pass or fail, ends with the current version
// installed (upgradeToCurrent, which is TestMain's install over the
// current version).
func TestUpgrade(t *testing.T) {
	ctx := t.Context()
	root := framework.Cluster().RepoRoot
	rels, err := releases.Read(root)
	if err != nil {
		t.Fatalf("The releases to upgrade from: %v", err)
	}
	to, err := releases.Describe(ctx, root, rels)
	if err != nil {
		t.Fatalf("Name the current version: %v", err)
	}
	var from []releases.Release
	for _, r := range rels {
		if r.Supported() {
			from = append(from, r)
		}
	}
	if len(from) == 0 {
		t.Fatalf("%s records no release with upgrade %q: nothing to upgrade from", releases.File, releases.UpgradeSupported)
	}
	for _, rel := range from {
		t.Run(rel.Version, func(t *testing.T) { upgradeFrom(t, rel, to) })
	}
}

// upgradeFrom is TestUpgrade's test of one release, rel, to the current
// version, named to.
func upgradeFrom(t *testing.T, rel releases.Release, to string) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	t.Logf("Upgrade from %s (commit %s of %s) to %s (the current manifests, images :dev)", rel.Version, rel.Short(), rel.Date, to)
	// Whatever happens, the test ends with the current version installed,
	// and nothing of the release's left that the current one lacks.
	t.Cleanup(func() {
		if err := e.upgradeToCurrent(context.Background()); err != nil {
			t.Errorf("Install the current version: %v", err)
		}
	})
	start := time.Now()
	e.installRelease(ctx, t, rel)
	t.Logf("Installed %s in %v", rel.Version, time.Since(start).Round(time.Second))
	defs := map[string]*hostpathv1.HostDefinition{}
	for _, n := range e.nodes {
		defs[n] = e.waitPhase(ctx, t, n, "default", hostpathv1.PhaseReady)
	}

	// Volumes of the old version, in use.
	node := e.nodes[0]
	pinned := e.claim(ctx, t, "old-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, nodePV := e.waitBound(ctx, t, pinned.Name)
	shared := e.claim(ctx, t, "old-shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "before", node, pinned.Name, "echo "+rel.Version+" > /data/before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, "before", provisionTimeout)
	if _, err := e.f.Client.AppsV1().DaemonSets(e.ns).Create(ctx, framework.SharedDaemonSet(e.ns, "through-upgrade", shared.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := e.f.ReadyPodsByNode(ctx, t, e.ns, "app=through-upgrade", e.nodes, provisionTimeout)

	// The upgrade: the current manifests over the old ones, then the
	// manual steps of CHANGELOG.md.
	start = time.Now()
	if err := e.upgradeToCurrent(ctx); err != nil {
		t.Fatalf("Upgrade to the current version: %v", err)
	}
	e.checkImages(ctx, t, "dev")
	t.Logf("Upgraded from %s to %s: workloads rolled out in %v", rel.Version, to, time.Since(start).Round(time.Second))
	for _, n := range e.nodes {
		def := e.waitPhase(ctx, t, n, "default", hostpathv1.PhaseReady)
		if def.UID != defs[n].UID || def.Status.HostID != defs[n].Status.HostID {
			t.Errorf("HostDefinition of %s after the upgrade: UID %s, host ID %q; want %s's: %s, %q", n, def.UID, def.Status.HostID, rel.Version, defs[n].UID, defs[n].Status.HostID)
		}
	}
	// Each provisioner marks its node's copy of the old multihost volume
	// (same-node authority), so that the elected instance, bound to
	// another node, may delete it there; every copy records the reclaim
	// policy, and then the PV says so.
	e.waitRecordsUpgraded(ctx, t, nodePV, node)
	e.waitRecordsUpgraded(ctx, t, sharedPV, e.nodes...)
	// The release's PVs get the watch label from the upgrade step of the
	// instances (their node's; the elected one for the multihost PV), and,
	// where the claim-labelling policy is bound, its claims too.
	e.waitVolumeLabel(ctx, t, nodePV.Name, node)
	e.waitVolumeLabel(ctx, t, sharedPV.Name, hostpathv1.NodeLabelMultihost)
	if claimPolicyBound(ctx, t, e.f) {
		e.waitClaimLabel(ctx, t, pinned.Name, node)
		e.waitClaimLabel(ctx, t, shared.Name, hostpathv1.NodeLabelMultihost)
	}

	// The old volumes keep working: the pods that ran through the upgrade
	// still see their files, and a new pod reads what the old one wrote.
	for _, n := range e.nodes {
		out, err := e.f.Kubectl(ctx, "-n", e.ns, "exec", pods[n].Name, "--", "cat", "/data/"+n)
		if err != nil || strings.TrimSpace(out) != n {
			t.Errorf("After the upgrade, /data/%s in the pod on %s = %q, %v; want %q", n, n, out, err, n)
		}
	}
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, writerPod(e.ns, "after", node, pinned.Name, "grep -qx "+rel.Version+" /data/before && echo dev > /data/after"), metav1.CreateOptions{}); err != nil {
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

// upgradeToCurrent upgrades the installed product to the current version
// as a user does: the current manifests applied over the installed ones
// (framework.InstallProduct, which waits for the rollout), then the manual
// steps of CHANGELOG.md that apply here (delete the old binding of the host
// definer). Over the current version it changes nothing.
func (e *hdEnv) upgradeToCurrent(ctx context.Context) error {
	if err := e.f.InstallProduct(ctx); err != nil {
		return err
	}
	if out, err := e.f.Kubectl(ctx, "delete", "clusterrolebinding", oldHostDefinerBinding, "--ignore-not-found"); err != nil {
		return fmt.Errorf("delete the old binding %s: %w\n%s", oldHostDefinerBinding, err, out)
	}
	return nil
}

// installRelease replaces the installed product with release rel: its
// commit's tree (git archive), images built from it and tagged with its
// version (scripts/images.sh with IMAGE_TAG and SOURCE_DIR), and its
// manifests with those images (a kustomization over them).
func (e *hdEnv) installRelease(ctx context.Context, t *testing.T, rel releases.Release) {
	t.Helper()
	work := t.TempDir()
	src := filepath.Join(work, "src")
	if out, err := run(ctx, nil, "sh", "-c", `mkdir -p "$2" && git -C "$1" archive "$3" | tar -x -C "$2"`, "sh", e.f.RepoRoot, src, rel.Commit); err != nil {
		t.Fatalf("Extract %s (commit %s; a full clone has it): %v\n%s", rel.Version, rel.Commit, err, out)
	}
	env := []string{"IMAGE_TAG=" + rel.Version, "SOURCE_DIR=" + src}
	if out, err := run(ctx, env, filepath.Join(e.f.RepoRoot, "scripts", "images.sh")); err != nil {
		t.Fatalf("Build and import the images of %s: %v\n%s", rel.Version, err, tail(out, 3000))
	}
	release := filepath.Join(work, "release")
	if err := os.MkdirAll(release, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../src/manifests]\nimages:\n"
	for _, img := range productImages {
		k += fmt.Sprintf("- {name: %s, newTag: %s}\n", img, rel.Version)
	}
	if err := os.WriteFile(filepath.Join(release, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	// --ignore-not-found: the metrics token Secret goes with its service
	// account first.
	if out, err := e.f.Kubectl(ctx, "delete", "-k", framework.InstallKustomization, "--ignore-not-found", "--timeout=3m"); err != nil {
		t.Fatalf("kubectl delete -k %s: %v\n%s", framework.InstallKustomization, err, out)
	}
	if out, err := e.f.Kubectl(ctx, "apply", "-k", release); err != nil {
		t.Fatalf("Install %s: %v\n%s", rel.Version, err, out)
	}
	if err := e.f.WaitForWorkloads(ctx, framework.SystemNamespace, framework.WorkloadTimeout); err != nil {
		t.Fatalf("Install %s: %v", rel.Version, err)
	}
	e.checkImages(ctx, t, rel.Version)
}

// waitRecordsUpgraded waits until the owner record of pv's directory on
// each of nodes names pv, records its reclaim policy and, for a multihost
// PV, says multihost, and then until the PV's annotation says the policy
// is recorded: what the current version makes of a release's records.
func (e *hdEnv) waitRecordsUpgraded(ctx context.Context, t *testing.T, pv *corev1.PersistentVolume, nodes ...string) {
	t.Helper()
	dir := pv.Annotations[annPVDirectory]
	policy := string(pv.Spec.PersistentVolumeReclaimPolicy)
	multihost := pv.Annotations[annPVMode] == "multihost"
	for _, n := range nodes {
		framework.WaitFor(ctx, t, provisionTimeout, "the owner record of "+dir+" on "+n+" to be brought up to date", func(context.Context) (bool, error) {
			rec, err := readRecordFile(ownerRecordFile(t, e.f, n, localcluster.PoolPath, dir))
			if err != nil {
				return false, err
			}
			if rec.Owner != pv.Name || rec.ReclaimPolicy != policy || rec.Multihost != multihost {
				return false, fmt.Errorf("record %+v, want owner %s, reclaimPolicy %s, multihost %v", rec, pv.Name, policy, multihost)
			}
			return true, nil
		})
	}
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to say its reclaim policy is recorded", func(ctx context.Context) (bool, error) {
		got, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if a := got.Annotations[annPVRecordedPolicy]; a != policy {
			return false, fmt.Errorf("%s = %q", annPVRecordedPolicy, a)
		}
		return true, nil
	})
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
