package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

// partOf is the label every object of the manifests carries.
const partOf = "app.kubernetes.io/part-of=hostpath"

// TestUninstall provisions a node-mode and a multihost claim, uninstalls
// with `kubectl delete -k manifests/`, checks that nothing of ours is left
// (namespace, objects with our label, the hostpath.dev API group) while the
// volumes' directories stay on the nodes, then installs again: the existing
// claims are still served (they are deleted, and their directories go,
// through the new install). It may run anywhere in the suite: it works in a
// namespace of its own and, pass or fail, ends with the product installed
// as TestMain installs it (framework.InstallProduct).
func TestUninstall(t *testing.T) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	node := e.nodes[0]
	pinned := e.claim(ctx, t, "kept-node", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, nodePV := e.waitBound(ctx, t, pinned.Name)
	shared := e.claim(ctx, t, "kept-shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, sharedPV := e.waitBound(ctx, t, shared.Name)

	reinstalled := false
	t.Cleanup(func() {
		if !reinstalled {
			if err := e.f.InstallProduct(context.Background()); err != nil {
				t.Errorf("Install the product again: %v", err)
			}
		}
	})
	// --ignore-not-found: the install has the PodMonitors' token Secret
	// (manifests/monitoring/token), which the token controller deletes with
	// its service account, before kubectl comes to it.
	if out, err := e.f.Kubectl(ctx, "delete", "-k", framework.InstallKustomization, "--timeout=3m", "--ignore-not-found"); err != nil {
		t.Fatalf("kubectl delete -k manifests/: %v\n%s", err, out)
	}
	e.checkNothingLeft(ctx, t)
	for _, n := range e.nodes {
		if _, err := os.Stat(e.nodePath(t, n, sharedPV)); err != nil {
			t.Errorf("Multihost directory on %s after the uninstall: %v, want it kept", n, err)
		}
	}
	if _, err := os.Stat(e.nodePath(t, node, nodePV)); err != nil {
		t.Errorf("Directory of %s on %s after the uninstall: %v, want it kept", nodePV.Name, node, err)
	}

	if err := e.f.InstallProduct(ctx); err != nil {
		t.Fatalf("Install the product again: %v", err)
	}
	reinstalled = true
	for _, n := range e.nodes {
		e.waitPhase(ctx, t, n, "default", hostpathv1.PhaseReady)
	}
	e.deleteAndWaitGone(ctx, t, "", pinned.Name)
	e.deleteAndWaitGone(ctx, t, "", shared.Name)
	e.waitGoneEverywhere(ctx, t, nodePV)
	e.waitGoneEverywhere(ctx, t, sharedPV)
}

// checkNothingLeft fails the test for anything of the product that an
// uninstall left behind: the namespace, labelled objects
// (checkNothingLabelled) and the hostpath.dev API group (the CRD).
func (e *hdEnv) checkNothingLeft(ctx context.Context, t *testing.T) {
	t.Helper()
	e.checkNothingLabelled(ctx, t)
	if _, err := e.f.Client.Discovery().ServerResourcesForGroupVersion(hostpathv1.SchemeGroupVersion.String()); !apierrors.IsNotFound(err) {
		t.Errorf("API group %s after the uninstall: %v, want NotFound (the CRD deleted)", hostpathv1.SchemeGroupVersion, err)
	}
}

// checkNothingLabelled fails the test unless the product's namespace is
// gone and no object labelled partOf is left anywhere (labelled).
func (e *hdEnv) checkNothingLabelled(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := e.f.Client.CoreV1().Namespaces().Get(ctx, framework.SystemNamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Namespace %s after the uninstall: %v, want NotFound", framework.SystemNamespace, err)
	}
	if left, err := e.labelled(ctx); err != nil || len(left) > 0 {
		t.Errorf("Objects labelled %s after the uninstall: %s (%v)", partOf, strings.Join(left, ", "), err)
	}
}

// labelled lists the objects labelled partOf of the kinds the product
// makes, in every namespace.
func (e *hdEnv) labelled(ctx context.Context) ([]string, error) {
	kinds := "storageclasses,clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings,csidrivers," +
		"daemonsets,deployments,pods,services,serviceaccounts,configmaps,secrets,roles,rolebindings,networkpolicies"
	out, err := e.f.Kubectl(ctx, "get", kinds, "--all-namespaces", "-l", partOf, "-o", "name")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}
