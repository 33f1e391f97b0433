package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// SkipInstallEnv, when "true", makes Main skip InstallProduct (to test the
// cluster itself while the product does not deploy).
const SkipInstallEnv = "HOSTPATH_E2E_SKIP_INSTALL"

// WorkloadTimeout bounds the wait for the product's DaemonSets and
// Deployments after InstallProduct.
const WorkloadTimeout = 3 * time.Minute

var global *Framework

// Cluster returns the framework Main set up; only valid in tests run by it.
func Cluster() *Framework {
	if global == nil {
		panic("framework.Cluster called outside a TestMain that ran framework.Main")
	}
	return global
}

// Main is the body of the suite's TestMain: it connects to the local cluster
// (skipping the whole suite with a message and exit code 0 when none is up,
// unless HOSTPATH_E2E_REQUIRED=true), installs the product
// (InstallProduct, when manifests/kustomization.yaml exists) and waits until every
// DaemonSet and Deployment in SystemNamespace is rolled out, then runs the
// tests. It returns the exit code.
func Main(m *testing.M) int {
	ctx := context.Background()
	f, err := New(ctx)
	if err != nil {
		if errors.Is(err, ErrNoCluster) && os.Getenv(RequiredEnv) != "true" {
			fmt.Printf("SKIP: e2e tests not run: %v\n", err)
			return 0
		}
		fmt.Printf("FAIL: e2e setup: %v\n", err)
		return 1
	}
	global = f
	if err := f.InstallProduct(ctx); err != nil {
		fmt.Printf("FAIL: e2e setup: %v\n", err)
		return 1
	}
	return m.Run()
}

// InstallKustomization is what the suite installs, relative to the
// repository: the product (manifests/) with the btrfs variant
// (manifests/components/btrfs), for the size tests.
const InstallKustomization = "e2e/install/"

// InstallKustomization135 is what the suite installs where the API server
// does not serve MutatingAdmissionPolicies v1 (Kubernetes 1.35):
// InstallKustomization without the claim-labelling policy.
const InstallKustomization135 = "e2e/install-kubernetes-1.35/"

// ServesMutatingAdmissionPolicies reports whether the API server serves
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (Kubernetes
// 1.36 and later).
func (f *Framework) ServesMutatingAdmissionPolicies() (bool, error) {
	list, err := f.Client.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		return false, fmt.Errorf("discover admissionregistration.k8s.io/v1: %w", err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicies" }), nil
}

// InstallProduct runs `kubectl apply -k e2e/install/` (InstallKustomization;
// InstallKustomization135 on Kubernetes 1.35) and waits for the product's workloads; it does nothing (but say so) when
// manifests/kustomization.yaml does not exist yet.
func (f *Framework) InstallProduct(ctx context.Context) error {
	if os.Getenv(SkipInstallEnv) == "true" {
		fmt.Printf("e2e: %s=true: the product is not installed\n", SkipInstallEnv)
		return nil
	}
	if _, err := os.Stat(filepath.Join(f.RepoRoot, "manifests", "kustomization.yaml")); err != nil {
		fmt.Println("e2e: manifests/kustomization.yaml does not exist yet: the product is not installed")
		return nil
	}
	dir := InstallKustomization
	if serves, err := f.ServesMutatingAdmissionPolicies(); err != nil {
		return err
	} else if !serves {
		dir = InstallKustomization135
	}
	start := time.Now()
	out, err := f.Kubectl(ctx, "apply", "-k", dir)
	if err != nil {
		return fmt.Errorf("install the product: %w", err)
	}
	fmt.Print(out)
	if err := f.WaitForWorkloads(ctx, SystemNamespace, WorkloadTimeout); err != nil {
		return err
	}
	fmt.Printf("e2e: product installed and rolled out in %v\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// WaitForWorkloads waits until every DaemonSet and Deployment in ns has all
// its pods updated and available.
func (f *Framework) WaitForWorkloads(ctx context.Context, ns string, timeout time.Duration) error {
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := f.pendingWorkloads(ctx, ns)
		if err != nil {
			pending = []string{err.Error()}
			return false, nil
		}
		pending = p
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("workloads in %s not rolled out after %v: %s", ns, timeout, strings.Join(pending, "; "))
	}
	return nil
}

// pendingWorkloads describes the DaemonSets and Deployments of ns that are
// not rolled out yet.
func (f *Framework) pendingWorkloads(ctx context.Context, ns string) ([]string, error) {
	dss, err := f.Client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	deps, err := f.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var pending []string
	for _, d := range dss.Items {
		if s := d.Status; s.ObservedGeneration < d.Generation || s.UpdatedNumberScheduled != s.DesiredNumberScheduled ||
			s.NumberAvailable != s.DesiredNumberScheduled {
			pending = append(pending, fmt.Sprintf("DaemonSet %s: %d/%d available", d.Name, s.NumberAvailable, s.DesiredNumberScheduled))
		}
	}
	for _, d := range deps.Items {
		s, want := d.Status, ptr.Deref(d.Spec.Replicas, 1)
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			pending = append(pending, fmt.Sprintf("Deployment %s: %d/%d available", d.Name, s.AvailableReplicas, want))
		}
	}
	return pending, nil
}
