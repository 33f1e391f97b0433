package chartcheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Case is one render-equality case: the chart with a values file of its
// ci/ folder renders the objects that a kustomization of manifests/ does.
type Case struct {
	// Name names the case in reports.
	Name string
	// Values is the values file, relative to ChartDir; empty: the chart's
	// defaults.
	Values string
	// Resources and Components make the kustomization, as paths relative
	// to the repository's root: one resource and no component is that
	// kustomization itself, anything else an overlay listing them.
	Resources, Components []string
}

// Cases are the chart's render-equality cases: its defaults render as
// manifests/, and each file of ci/ as the overlay or component it stands for.
var Cases = []Case{
	{Name: "defaults", Resources: []string{"manifests"}},
	{Name: "openshift", Values: "ci/openshift-values.yaml", Resources: []string{"manifests/openshift"}},
	{Name: "pool-fast", Values: "ci/pool-fast-values.yaml", Resources: []string{"manifests"}, Components: []string{"manifests/components/pool-fast"}},
	{Name: "btrfs", Values: "ci/btrfs-values.yaml", Resources: []string{"manifests"}, Components: []string{"manifests/components/btrfs"}},
	{Name: "control-plane", Values: "ci/control-plane-values.yaml", Resources: []string{"manifests"}, Components: []string{"manifests/components/control-plane"}},
	{Name: "monitoring", Values: "ci/monitoring-values.yaml", Resources: []string{"manifests", "manifests/monitoring"}},
}

// Kustomization describes the case's kustomize side for reports:
// "manifests/openshift", or "manifests + components/pool-fast".
func (c Case) Kustomization() string {
	return strings.Join(append(append([]string{}, c.Resources...), c.Components...), " + ")
}

// toolTimeout bounds one run of helm or kustomize.
const toolTimeout = 2 * time.Minute

// Tools are the paths of the binaries the check runs (scripts/tool.sh
// builds them): helm v3, helm v4 and kustomize v5.
type Tools struct {
	Helm, Helm4, Kustomize string
}

// Renderer renders the chart and the kustomizations of one repository.
type Renderer struct {
	// Root is the repository's root.
	Root string
	// KubeVersion is the Kubernetes version helm renders for (its
	// --kube-version): helm built by `go install` assumes v1.20.0, which
	// the chart's kubeVersion refuses.
	KubeVersion string
	Tools
}

// chartPath is the chart's folder, or a file of it (a slash path).
func (r Renderer) chartPath(file string) string {
	return filepath.Join(r.Root, filepath.FromSlash(ChartDir), filepath.FromSlash(file))
}

// ServedAPIs are the kinds helm renders as served (its --api-versions),
// beside those it knows: the chart includes the claim-labelling
// MutatingAdmissionPolicy only where the API server serves it (Kubernetes
// 1.36 and later, as the pinned K8S_VERSION), which `helm template`,
// offline, cannot ask.
var ServedAPIs = []string{"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}

// Template runs `helm template` of the chart with helm (a path), in
// Namespace as Release, with the values file (relative to ChartDir; none
// when empty), and returns what it printed.
func (r Renderer) Template(ctx context.Context, helm, values string) ([]byte, error) {
	args := []string{"template", Release, r.chartPath(""), "--namespace", Namespace, "--kube-version", r.KubeVersion}
	for _, api := range ServedAPIs {
		args = append(args, "--api-versions", api)
	}
	if values != "" {
		args = append(args, "-f", r.chartPath(values))
	}
	return run(ctx, helm, args...)
}

// Lint runs `helm lint --strict` on the chart, in Namespace (in another
// one the chart fails to render, which lint reports as information only).
func (r Renderer) Lint(ctx context.Context) ([]byte, error) {
	return run(ctx, r.Helm, "lint", "--strict", r.chartPath(""), "--namespace", Namespace, "--kube-version", r.KubeVersion)
}

// Build runs `kustomize build` of the case's kustomization. An overlay is
// written to a temporary folder under the root's .cache, listing its
// resources and components by relative paths, as a user's overlay next to
// manifests/ does, and removed after.
func (r Renderer) Build(ctx context.Context, c Case) ([]byte, error) {
	if len(c.Resources) == 1 && len(c.Components) == 0 {
		return run(ctx, r.Kustomize, "build", filepath.Join(r.Root, filepath.FromSlash(c.Resources[0])))
	}
	cache := filepath.Join(r.Root, ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cache, "chartcheck-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	for _, list := range []struct {
		field string
		paths []string
	}{{"resources", c.Resources}, {"components", c.Components}} {
		if len(list.paths) > 0 {
			b.WriteString(list.field + ":\n")
		}
		for _, p := range list.paths {
			b.WriteString("- ../../" + p + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return run(ctx, r.Kustomize, "build", dir)
}

// run runs a tool and returns its standard output; an error names the
// command and quotes its standard error.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), args[0], err, msg)
	}
	return stdout.Bytes(), nil
}
