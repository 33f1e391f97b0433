package chartcheck

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// deployment is a small Deployment as helm template prints it: a comment
// before the document, labels with dots in their keys.
const deployment = `---
# Source: hostpath/templates/hostdefiner.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hostpath-hostdefiner
  namespace: hostpath-system
  labels:
    app.kubernetes.io/name: hostpath-hostdefiner
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: hostdefiner
        args: [--v=2, --leader-elect]
`

const clusterRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: hostpath-manager-reader
rules: []
`

func mustParse(t *testing.T, stream string) Objects {
	t.Helper()
	objs, err := Parse([]byte(stream))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return objs
}

func TestParse(t *testing.T) {
	objs := mustParse(t, "---\n# Source: empty.yaml\n---\n"+deployment+"---\n"+clusterRole+"\n---\n")
	want := []Key{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "hostpath-system", Name: "hostpath-hostdefiner"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "hostpath-manager-reader"},
	}
	if len(objs) != len(want) {
		t.Fatalf("Parse: %d objects, want %d: %v", len(objs), len(want), objs)
	}
	for _, k := range want {
		if _, ok := objs[k]; !ok {
			t.Errorf("Parse: no %s", k)
		}
	}
	for _, tc := range []struct{ name, stream, want string }{
		{"twice", clusterRole + "---\n" + clusterRole, "rendered twice"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "without kind"},
		{"not YAML", "a: [\n", "parse document"},
	} {
		if _, err := Parse([]byte(tc.stream)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want []Difference
	}{
		{"equal", "a: {b: [1, x]}", "a: {b: [1, x]}", nil},
		{"a drifted field, by its path", "spec: {replicas: 2}", "spec: {replicas: 3}", []Difference{{"spec.replicas", "2", "3"}}},
		{"a key with dots", "labels: {app.kubernetes.io/name: a}", "labels: {app.kubernetes.io/name: b}", []Difference{{`labels["app.kubernetes.io/name"]`, `"a"`, `"b"`}}},
		{"a field on one side", "m: {a: 1}", "m: {a: 1, b: true}", []Difference{{"m.b", absent, "true"}}},
		{"list order matters", "l: [a, b]", "l: [b, a]", []Difference{{"l[0]", `"a"`, `"b"`}, {"l[1]", `"b"`, `"a"`}}},
		{"a longer list", "l: [a]", "l: [a, {x: 1}]", []Difference{{"l[1]", absent, `{"x":1}`}}},
		{"a type change", "v: '1'", "v: 1", []Difference{{"v", `"1"`, "1"}}},
		{"a map against a list", "v: {a: 1}", "v: [1]", []Difference{{"v", `{"a":1}`, "[1]"}}},
		{"empty map and no map are not equal", "m: {}", "{}", []Difference{{"m", "{}", absent}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mustYAML(t, tc.a), mustYAML(t, tc.b)
			if got := Diff(a, b); !slices.Equal(got, tc.want) {
				t.Errorf("Diff = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDiffLongValues(t *testing.T) {
	prefix := strings.Repeat("x", 100)
	got := Diff(map[string]any{"s": prefix + "-a-tail"}, map[string]any{"s": prefix + "-b-tail"})
	if len(got) != 1 || !strings.Contains(got[0].A, "-a-tail") || !strings.Contains(got[0].B, "-b-tail") || !strings.HasPrefix(got[0].A, `"…`) {
		t.Errorf("two long strings: %q, want both shown from near their difference", got)
	}
	long := map[string]any{"l": slices.Repeat([]any{"item"}, 40)}
	got = Diff(long, map[string]any{})
	if len(got) != 1 || len([]rune(got[0].A)) > maxShort+1 || !strings.HasSuffix(got[0].A, "…") {
		t.Errorf("a long value: %q, want it cut after %d characters", got, maxShort)
	}
}

// TestCompare is the comparison of one case: an object only on either
// side, a drifted field named by its path with both values, the
// kustomize side's Namespace and the chart's resource policy left out.
func TestCompare(t *testing.T) {
	chart := mustParse(t, deployment+"---\n"+clusterRole+`---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: hostdefinitions.hostpath.dev
  annotations: {helm.sh/resource-policy: keep}
`)
	manifests := mustParse(t, strings.Replace(deployment, "replicas: 2", "replicas: 3", 1)+`---
apiVersion: v1
kind: Namespace
metadata: {name: hostpath-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: hostdefinitions.hostpath.dev
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: hostpath-manager, namespace: hostpath-system}
`)
	manifests.DropKind("Namespace")
	chart.DropAnnotation(ResourcePolicyAnnotation)
	got := Compare("case defaults (manifests): ", chart, manifests, "chart", "manifests")
	want := []string{
		"case defaults (manifests): Deployment hostpath-system/hostpath-hostdefiner (apps/v1): spec.replicas: chart 2, manifests 3",
		"case defaults (manifests): ClusterRole hostpath-manager-reader (rbac.authorization.k8s.io/v1): only in chart",
		"case defaults (manifests): ServiceAccount hostpath-system/hostpath-manager (v1): only in manifests",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Compare =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestDropAnnotationKeepsOthers(t *testing.T) {
	objs := mustParse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {helm.sh/resource-policy: keep, other: x}\n")
	objs.DropAnnotation(ResourcePolicyAnnotation)
	for _, obj := range objs {
		ann := obj["metadata"].(map[string]any)["annotations"]
		if got := compactJSON(ann); got != `{"other":"x"}` {
			t.Errorf("annotations after DropAnnotation: %s, want the other one kept", got)
		}
	}
}

func mustYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
