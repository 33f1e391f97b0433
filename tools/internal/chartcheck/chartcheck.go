// Package chartcheck keeps the Helm chart charts/hostpath from drifting
// away from the kustomize manifests it stands beside, for make verify
// (tools/cmd/chartcheck):
//
//   - its files/ are verbatim copies of files of manifests/ (the templates
//     include them with .Files.Get), byte for byte;
//   - for each Case, `helm template` with a values file of its ci/ folder
//     renders the same objects as `kustomize build` of the kustomization
//     the case pairs it with (the defaults as manifests/, the OpenShift
//     values as manifests/openshift, ...), and helm v4 renders the defaults
//     as helm v3 does; every difference is reported, field by field;
//   - `helm lint --strict` passes;
//   - every value of values.yaml is documented by a `# --` comment (its own
//     or a key's above it), and docs/install.md's table of them is the
//     one those comments make.
//
// Sync rewrites the copies from manifests/ and the table from values.yaml:
// what make chart-sync runs after a change to either. Check runs helm and
// kustomize from the paths it is given (scripts/tool.sh builds them); Sync
// runs nothing.
package chartcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"hostpath.dev/e2e/framework"
)

// Paths, relative to the repository's root, and names the check uses.
const (
	// ChartDir is the chart.
	ChartDir = "charts/hostpath"
	// FilesDir holds the chart's copies of files of ManifestsDir.
	FilesDir = ChartDir + "/files"
	// ManifestsDir is the kustomize manifests.
	ManifestsDir = "manifests"
	// ValuesFile is the chart's values, documented by `# --` comments.
	ValuesFile = ChartDir + "/values.yaml"
	// DocFile is the page with the values table.
	DocFile = "docs/install.md"
	// Release and Namespace are what the chart is rendered as.
	Release   = "hostpath"
	Namespace = "hostpath-system"
	// ResourcePolicyAnnotation is dropped from the chart's objects before
	// they are compared: manifests/ cannot say "keep on uninstall".
	ResourcePolicyAnnotation = "helm.sh/resource-policy"
)

// Options are what Check and Sync work on.
type Options struct {
	// Root is the repository's root.
	Root string
	// KubeVersion is the Kubernetes version helm renders for; empty: the
	// one scripts/lib.sh pins (K8S_VERSION).
	KubeVersion string
	// Tools are the binaries Check runs (Sync runs none).
	Tools
}

// Validate fails when a tool Check needs is not given.
func (o Options) Validate() error {
	var errs []error
	for _, t := range []struct{ flag, path string }{{"-helm", o.Helm}, {"-helm4", o.Helm4}, {"-kustomize", o.Kustomize}} {
		if t.path == "" {
			errs = append(errs, fmt.Errorf("%s is required (scripts/tool.sh builds it)", t.flag))
		}
	}
	return errors.Join(errs...)
}

// Check runs every check on the repository at o.Root and returns the
// problems found, in the order of the checks, each check's sorted. An
// error is something that stopped the check itself (an unreadable file,
// a tool that is not there).
func Check(ctx context.Context, o Options) ([]string, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.Root, filepath.FromSlash(ChartDir), "Chart.yaml")); errors.Is(err, fs.ErrNotExist) {
		return []string{ChartDir + "/Chart.yaml: no chart"}, nil
	}
	r := Renderer(o)
	if r.KubeVersion == "" {
		v, err := framework.KubernetesVersion(o.Root)
		if err != nil {
			return nil, err
		}
		r.KubeVersion = v
	}
	copies, err := CheckCopies(o.Root)
	if err != nil {
		return nil, err
	}
	var lint []string
	if out, err := r.Lint(ctx); err != nil {
		lint = []string{fmt.Sprintf("helm lint --strict %s: %v\n%s", ChartDir, err, out)}
	}
	cases, err := CheckCases(ctx, r, Cases)
	if err != nil {
		return nil, err
	}
	helm4 := CheckHelm4(ctx, r)
	table, err := CheckTable(o.Root)
	if err != nil {
		return nil, err
	}
	return slices.Concat(copies, lint, cases, helm4, table), nil
}

// Sync rewrites the chart's copies under root from manifests/ and the
// values table of DocFile from values.yaml, and returns the files it
// changed. A copy whose source is gone, or an undocumented value, is an
// error once the rest is written.
func Sync(root string) ([]string, error) {
	changed, copyErr := SyncCopies(root)
	tableChanged, err := SyncTable(root)
	if tableChanged {
		changed = append(changed, DocFile)
	}
	return changed, errors.Join(copyErr, err)
}

// CheckCases renders each case with r's helm v3 and kustomize and returns
// their differences. A case whose values file does not exist, or whose
// rendering fails, is a problem; so is every difference.
func CheckCases(ctx context.Context, r Renderer, cases []Case) ([]string, error) {
	var problems []string
	for _, c := range cases {
		prefix := fmt.Sprintf("case %s (%s): ", c.Name, c.Kustomization())
		if c.Values != "" {
			_, err := os.Stat(r.chartPath(c.Values))
			if errors.Is(err, fs.ErrNotExist) {
				problems = append(problems, fmt.Sprintf("%s%s/%s is missing", prefix, ChartDir, c.Values))
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		chart, err := render(ctx, func(ctx context.Context) ([]byte, error) { return r.Template(ctx, r.Helm, c.Values) })
		if err != nil {
			problems = append(problems, prefix+"chart: "+err.Error())
			continue
		}
		manifests, err := render(ctx, func(ctx context.Context) ([]byte, error) { return r.Build(ctx, c) })
		if err != nil {
			problems = append(problems, prefix+"manifests: "+err.Error())
			continue
		}
		manifests.DropKind("Namespace")
		chart.DropAnnotation(ResourcePolicyAnnotation)
		problems = append(problems, Compare(prefix, chart, manifests, "chart", "manifests")...)
	}
	return problems, nil
}

// CheckHelm4 renders the chart's defaults with helm v3 and helm v4 and
// returns their differences, or the failure of either.
func CheckHelm4(ctx context.Context, r Renderer) []string {
	const prefix = "helm v4 against helm v3 (defaults): "
	v3, err := render(ctx, func(ctx context.Context) ([]byte, error) { return r.Template(ctx, r.Helm, "") })
	if err != nil {
		return []string{prefix + "helm v3: " + err.Error()}
	}
	v4, err := render(ctx, func(ctx context.Context) ([]byte, error) { return r.Template(ctx, r.Helm4, "") })
	if err != nil {
		return []string{prefix + "helm v4: " + err.Error()}
	}
	return Compare(prefix, v4, v3, "helm v4", "helm v3")
}

// render runs a tool and parses what it printed.
func render(ctx context.Context, tool func(context.Context) ([]byte, error)) (Objects, error) {
	out, err := tool(ctx)
	if err != nil {
		return nil, err
	}
	return Parse(out)
}
