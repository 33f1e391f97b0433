package chartcheck

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"hostpath.dev/api/runtime/filetest"
)

// Environment variables naming the real tools for TestRealTools (paths,
// as scripts/tool.sh prints them); without all three it is skipped.
const (
	helmEnv      = "CHARTCHECK_HELM"
	helm4Env     = "CHARTCHECK_HELM4"
	kustomizeEnv = "CHARTCHECK_KUSTOMIZE"
)

// TestRealTools runs the real helm v3, helm v4 and kustomize on a small
// chart and kustomization: what helm and kustomize really print parses,
// an overlay's relative paths lead to manifests/ and its component, the
// chart's kubeVersion is met, and a value that no longer matches its
// component is reported by its field.
func TestRealTools(t *testing.T) {
	tools := Tools{Helm: os.Getenv(helmEnv), Helm4: os.Getenv(helm4Env), Kustomize: os.Getenv(kustomizeEnv)}
	if tools.Helm == "" || tools.Helm4 == "" || tools.Kustomize == "" {
		t.Skipf("%s, %s and %s name no tools (scripts/tool.sh helm, helm4, kustomize print them)", helmEnv, helm4Env, kustomizeEnv)
	}
	root := t.TempDir()
	files := map[string]string{
		"manifests/kustomization.yaml":                  "resources: [base]\n",
		"manifests/base/kustomization.yaml":             "resources: [namespace.yaml, pools.yaml, serviceaccount.yaml]\n",
		"manifests/base/namespace.yaml":                 namespace,
		"manifests/base/pools.yaml":                     configMap,
		"manifests/base/serviceaccount.yaml":            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: hostpath-manager\n  namespace: hostpath-system\n",
		"manifests/components/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- target: {kind: ServiceAccount}\n  patch: |-\n    - op: add\n      path: /metadata/labels\n      value: {extra: \"true\"}\n",
		FilesDir + "/base/pools.yaml":                   configMap,
		ChartDir + "/Chart.yaml":                        "apiVersion: v2\nname: hostpath\nversion: 0.1.0\nkubeVersion: \">=1.35.0-0\"\n",
		ValuesFile:                                      "# -- Label the service account extra.\nextra: false\n",
		ChartDir + "/ci/extra-values.yaml":              "extra: true\n",
		ChartDir + "/templates/objects.yaml": `{{ .Files.Get "files/base/pools.yaml" }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: hostpath-manager
  namespace: {{ .Release.Namespace }}
  {{- if .Values.extra }}
  labels: {extra: "true"}
  {{- end }}
`,
	}
	for name, content := range files {
		filetest.Write(t, filepath.Join(root, name), content)
	}
	r := Renderer{Root: root, KubeVersion: "v1.37.2", Tools: tools}
	cases := []Case{
		{Name: "defaults", Resources: []string{"manifests"}},
		{Name: "extra", Values: "ci/extra-values.yaml", Resources: []string{"manifests"}, Components: []string{"manifests/components/extra"}},
	}
	ctx := context.Background()
	if out, err := r.Lint(ctx); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	if problems, err := CheckCases(ctx, r, cases); err != nil || len(problems) > 0 {
		t.Fatalf("CheckCases in step: %q, %v; want nothing", problems, err)
	}
	if problems := CheckHelm4(ctx, r); len(problems) > 0 {
		t.Fatalf("CheckHelm4: %q, want nothing", problems)
	}

	filetest.Write(t, filepath.Join(root, ChartDir, "ci/extra-values.yaml"), "extra: false\n")
	problems, err := CheckCases(ctx, r, cases)
	want := []string{`case extra (manifests + manifests/components/extra): ServiceAccount hostpath-system/hostpath-manager (v1): metadata.labels: chart (absent), manifests {"extra":"true"}`}
	if err != nil || !slices.Equal(problems, want) {
		t.Fatalf("CheckCases with a drifted value: %q, %v; want %q", problems, err, want)
	}
}
