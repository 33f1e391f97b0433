// Package framework runs the e2e tests against the local cluster that
// scripts/cluster-up.sh starts: it finds the cluster's kubeconfig, installs
// the product (kubectl apply -k e2e/install/: manifests/ with the btrfs
// variant), and gives tests helpers that wait
// on conditions, create throwaway namespaces, map node paths to this machine,
// and dump what is needed to debug a failure.
package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/e2e/framework/localcluster"
)

const (
	// KubeconfigEnv overrides the kubeconfig path (default
	// <repo>/.cluster/kubeconfig).
	KubeconfigEnv = "HOSTPATH_KUBECONFIG"
	// RequiredEnv, when "true", turns "no cluster" from a skip into a failure
	// (scripts/test.sh sets it).
	RequiredEnv = "HOSTPATH_E2E_REQUIRED"
	// KubernetesVersionEnv overrides the Kubernetes version pinned in
	// scripts/lib.sh (KubernetesVersion).
	KubernetesVersionEnv = "K8S_VERSION"
	// SystemNamespace is where the product runs.
	SystemNamespace = "hostpath-system"
	// TestToolsImage has busybox and nettool (e2e/cmd/nettool).
	TestToolsImage = "hostpath.dev/testtools:dev"
)

// ErrNoCluster means no local cluster answers; the suite skips.
var ErrNoCluster = errors.New("no local cluster is up")

// Framework is a connection to the local cluster.
type Framework struct {
	// RepoRoot is the repository's top folder (where go.work is).
	RepoRoot string
	// ClusterDir is <repo>/.cluster.
	ClusterDir string
	// Kubeconfig is the admin kubeconfig in use.
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// KubernetesVersion is the version of the cluster's components
	// (KubernetesVersion).
	KubernetesVersion string
	// KubectlPath is the kubectl of the cluster's version.
	KubectlPath string
}

// pinnedVersion is how scripts/lib.sh pins K8S_VERSION.
var pinnedVersion = regexp.MustCompile(`(?m)^K8S_VERSION=\$\{K8S_VERSION:-(v[0-9][^}]*)\}$`)

// KubernetesVersion is the version of the cluster's components: K8S_VERSION
// from the environment (scripts/test.sh sets it for the compatibility
// tests), else the one scripts/lib.sh pins, the one home of that version.
// The matching kubectl is in <root>/.cache/k8s/<version>/bin.
func KubernetesVersion(root string) (string, error) {
	if v := os.Getenv(KubernetesVersionEnv); v != "" {
		return v, nil
	}
	lib := filepath.Join(root, "scripts", "lib.sh")
	data, err := os.ReadFile(lib)
	if err != nil {
		return "", fmt.Errorf("read the pinned Kubernetes version: %w", err)
	}
	m := pinnedVersion.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s pins no K8S_VERSION (want a line K8S_VERSION=${K8S_VERSION:-vX.Y.Z})", lib)
	}
	return string(m[1]), nil
}

// New finds the repository and the cluster's kubeconfig and checks that the
// API server answers. It returns an error wrapping ErrNoCluster when there is
// no kubeconfig or the API server does not answer.
func New(ctx context.Context) (*Framework, error) {
	root, err := FindRepoRoot()
	if err != nil {
		return nil, err
	}
	f := &Framework{RepoRoot: root, ClusterDir: filepath.Join(root, ".cluster")}
	f.Kubeconfig = os.Getenv(KubeconfigEnv)
	if f.Kubeconfig == "" {
		f.Kubeconfig = filepath.Join(f.ClusterDir, "kubeconfig")
	}
	if f.KubernetesVersion, err = KubernetesVersion(root); err != nil {
		return nil, err
	}
	f.KubectlPath = filepath.Join(root, ".cache", "k8s", f.KubernetesVersion, "bin", "kubectl")
	if _, err := os.Stat(f.Kubeconfig); err != nil {
		return nil, fmt.Errorf("%w: no kubeconfig at %s (run `make cluster-up`)", ErrNoCluster, f.Kubeconfig)
	}
	f.Config, err = component.RESTConfig(f.Kubeconfig, 50, 100, "hostpath-e2e")
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", f.Kubeconfig, err)
	}
	f.Client, err = kubernetes.NewForConfig(f.Config)
	if err != nil {
		return nil, fmt.Errorf("create clientset: %w", err)
	}
	probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := f.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(probeCtx); err != nil {
		return nil, fmt.Errorf("%w: the API server %s does not answer (run `make cluster-up`): %v", ErrNoCluster, f.Config.Host, err)
	}
	return f, nil
}

// FindRepoRoot walks up from the working directory to the folder that holds
// go.work.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (a folder with go.work) not found above the working directory")
		}
		dir = parent
	}
}

// NodeDir maps hostPath, a path under localcluster.PoolPath, StatePath,
// PoolRootPath or KubeletPath on node, to where that node's copy is on this machine
// (.cluster/nodes/<node>/..., localcluster.NodeDir).
func (f *Framework) NodeDir(node, hostPath string) (string, error) {
	return localcluster.NodeDir(filepath.Join(f.ClusterDir, "nodes"), node, hostPath)
}

// MustNodeDir is NodeDir failing t at once if hostPath cannot be mapped.
func (f *Framework) MustNodeDir(t testing.TB, node, hostPath string) string {
	t.Helper()
	dir, err := f.NodeDir(node, hostPath)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
