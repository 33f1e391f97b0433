package chartcheck

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hostpath.dev/api/runtime/filetest"
)

// The objects of the synthetic repository: a ConfigMap whose file the
// chart copies, and the CRD-like object the chart keeps on uninstall.
const (
	configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostpath-pools\n  namespace: hostpath-system\ndata:\n  pool.default: /var/hpvolumes\n"
	crd       = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: hostdefinitions.hostpath.dev\n"
	namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: hostpath-system\n"
	chartCRD  = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: hostdefinitions.hostpath.dev\n  annotations:\n    helm.sh/resource-policy: keep\n"
)

// fakeHelm lints fine and prints, for `template`, OUT/chart-NAME: NAME
// is the values file's name or defaults.yaml; helm4 prints
// OUT/helm4-NAME when there is one. It fails on a --kube-version other
// than v1.37.2.
const fakeHelm = `#!/bin/sh
case $1 in
lint) echo "1 chart(s) linted, 0 chart(s) failed"; exit 0 ;;
template) ;;
*) echo "fake helm: $1?" >&2; exit 1 ;;
esac
out=defaults.yaml
while [ $# -gt 0 ]; do
  case $1 in
  -f) out=$(basename "$2") ;;
  --kube-version) [ "$2" = v1.37.2 ] || { echo "Error: kube-version $2" >&2; exit 1; } ;;
  esac
  shift
done
if [ -n "$HELM4" ] && [ -f "OUT/helm4-$out" ]; then cat "OUT/helm4-$out"; exit; fi
cat "OUT/chart-$out"
`

// fakeKustomize prints, for `build DIR`, OUT/kustomize-NAME.yaml: NAME is
// DIR's base name, or for an overlay the base name of the last path it
// lists, each of which must lead to a folder from the overlay.
const fakeKustomize = `#!/bin/sh
[ "$1" = build ] || { echo "fake kustomize: $1?" >&2; exit 1; }
name=$(basename "$2")
case $name in
chartcheck-*)
  for p in $(sed -n 's/^- //p' "$2/kustomization.yaml"); do
    [ -d "$2/$p" ] || { echo "Error: no folder $p from the overlay" >&2; exit 1; }
    name=$(basename "$p")
  done ;;
esac
cat "OUT/kustomize-$name.yaml"
`

// repo is a synthetic repository: manifests/ with every kustomization
// Cases names, a chart with a copy and every ci/ file, docs/install.md
// with the values table, the fake tools, and each case's renderings equal.
type repo struct {
	root, out string
	opts      Options
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{root: t.TempDir()}
	r.out = filepath.Join(r.root, "out")
	for _, dir := range []string{"manifests", "manifests/openshift", "manifests/monitoring", "manifests/components/pool-fast", "manifests/components/btrfs", "manifests/components/control-plane"} {
		filetest.Write(t, filepath.Join(r.root, dir, "kustomization.yaml"), "# "+dir+"\n")
	}
	filetest.Write(t, filepath.Join(r.root, "manifests/base/pools.yaml"), configMap)
	filetest.Write(t, filepath.Join(r.root, FilesDir, "base/pools.yaml"), configMap)
	filetest.Write(t, filepath.Join(r.root, ChartDir, "Chart.yaml"), "apiVersion: v2\nname: hostpath\nversion: 0.0.0\n")
	filetest.Write(t, filepath.Join(r.root, ValuesFile), "# -- Pools.\npools: {default: /var/hpvolumes}\n")
	for _, c := range Cases {
		if c.Values != "" {
			filetest.Write(t, filepath.Join(r.root, ChartDir, c.Values), "# "+c.Name+"\n")
		}
		name := "defaults.yaml"
		if c.Values != "" {
			name = filepath.Base(c.Values)
		}
		filetest.Write(t, filepath.Join(r.out, "chart-"+name), "---\n# Source: hostpath/templates/objects.yaml\n"+configMap+"---\n"+chartCRD)
		k := filepath.Base(c.Resources[len(c.Resources)-1])
		if len(c.Components) > 0 {
			k = filepath.Base(c.Components[len(c.Components)-1])
		}
		filetest.Write(t, filepath.Join(r.out, "kustomize-"+k+".yaml"), namespace+"---\n"+configMap+"---\n"+crd)
	}
	filetest.Write(t, filepath.Join(r.root, DocFile), "# Install\n")
	if _, err := SyncTable(r.root); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(r.root, "bin")
	filetest.WriteMode(t, filepath.Join(bin, "helm"), strings.ReplaceAll(fakeHelm, "OUT", r.out), 0o755)
	filetest.WriteMode(t, filepath.Join(bin, "helm4"), "#!/bin/sh\nHELM4=1 exec "+filepath.Join(bin, "helm")+` "$@"`+"\n", 0o755)
	filetest.WriteMode(t, filepath.Join(bin, "kustomize"), strings.ReplaceAll(fakeKustomize, "OUT", r.out), 0o755)
	r.opts = Options{Root: r.root, KubeVersion: "v1.37.2", Tools: Tools{Helm: filepath.Join(bin, "helm"), Helm4: filepath.Join(bin, "helm4"), Kustomize: filepath.Join(bin, "kustomize")}}
	return r
}

func (r *repo) args(cmd string) []string {
	return []string{"-helm", r.opts.Helm, "-helm4", r.opts.Helm4, "-kustomize", r.opts.Kustomize, "-kube-version", r.opts.KubeVersion, r.root}
}

// TestCheck is what make check-chart runs, on a synthetic repository with
// fake tools: in step, it passes; then a stale copy, a drifted field in one
// case, a case without its values file, helm v4 rendering otherwise and an
// undocumented value each fail it, all reported at once and in order.
func TestCheck(t *testing.T) {
	r := newRepo(t)
	var stdout bytes.Buffer
	if err := CheckCommand(&stdout, &stdout)(context.Background(), r.args("check")); err != nil || !strings.HasPrefix(stdout.String(), "chartcheck: ok") {
		t.Fatalf("chartcheck check in step: %v, %q; want ok", err, stdout.String())
	}

	filetest.Write(t, filepath.Join(r.root, FilesDir, "base/pools.yaml"), configMap+"# edited\n")
	filetest.Write(t, filepath.Join(r.out, "chart-openshift-values.yaml"), strings.Replace(configMap, "/var/hpvolumes", "/var/other", 1)+"---\n"+chartCRD)
	if err := os.Remove(filepath.Join(r.root, ChartDir, "ci/monitoring-values.yaml")); err != nil {
		t.Fatal(err)
	}
	filetest.Write(t, filepath.Join(r.out, "helm4-defaults.yaml"), configMap)
	filetest.Write(t, filepath.Join(r.root, ValuesFile), "# -- Pools.\npools: {default: /var/hpvolumes}\nundocumented: 1\n")

	problems, err := Check(context.Background(), r.opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"charts/hostpath/files/base/pools.yaml differs from manifests/base/pools.yaml: run make chart-sync",
		`case openshift (manifests/openshift): ConfigMap hostpath-system/hostpath-pools (v1): data["pool.default"]: chart "/var/other", manifests "/var/hpvolumes"`,
		"case monitoring (manifests + manifests/monitoring): charts/hostpath/ci/monitoring-values.yaml is missing",
		"helm v4 against helm v3 (defaults): CustomResourceDefinition hostdefinitions.hostpath.dev (apiextensions.k8s.io/v1): only in helm v3",
		"charts/hostpath/values.yaml:3: value `undocumented` has no `# -- ` comment, nor has a key above it",
	}
	if !slices.Equal(problems, want) {
		t.Fatalf("Check =\n  %s\nwant\n  %s", strings.Join(problems, "\n  "), strings.Join(want, "\n  "))
	}
	err = CheckCommand(&stdout, &stdout)(context.Background(), r.args("check"))
	if err == nil || !strings.Contains(err.Error(), "5 problem(s):\n  charts/hostpath/files/base/pools.yaml differs") {
		t.Fatalf("chartcheck check with problems: %v, want them listed", err)
	}
}

func TestCheckErrors(t *testing.T) {
	r := newRepo(t)
	tests := []struct {
		name  string
		setup func(o *Options)
		want  string
	}{
		{"no tools", func(o *Options) { o.Tools = Tools{} }, "-helm is required"},
		{"no chart", func(o *Options) { o.Root = t.TempDir() }, "charts/hostpath/Chart.yaml: no chart"},
		{"a failing helm", func(o *Options) { o.KubeVersion = "v1.20.0" }, "case defaults (manifests): chart: helm template: exit status 1: Error: kube-version v1.20.0"},
		{"a failing kustomize", func(o *Options) { o.Kustomize = o.Helm4 }, "case defaults (manifests): manifests: helm4 build: exit status 1: fake helm: build?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := r.opts
			tc.setup(&o)
			problems, err := Check(context.Background(), o)
			got := strings.Join(problems, "\n")
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("Check = %q, %v; want %q", problems, err, tc.want)
			}
		})
	}
}

// TestSync is make chart-sync: it rewrites a stale copy and the table and
// says so; a copy whose source is gone is an error naming it.
func TestSync(t *testing.T) {
	r := newRepo(t)
	copyPath := filepath.Join(r.root, FilesDir, "base/pools.yaml")
	filetest.Write(t, copyPath, "stale\n")
	filetest.Write(t, filepath.Join(r.root, ValuesFile), "# -- Pools, changed.\npools: {default: /var/hpvolumes}\n")
	var stdout bytes.Buffer
	if err := SyncCommand(&stdout, &stdout)(context.Background(), []string{r.root}); err != nil {
		t.Fatal(err)
	}
	if want := "chartcheck: rewrote charts/hostpath/files/base/pools.yaml\nchartcheck: rewrote docs/install.md\n"; stdout.String() != want {
		t.Errorf("chartcheck sync printed %q, want %q", stdout.String(), want)
	}
	if got := readFile(t, copyPath); got != configMap {
		t.Errorf("the copy after sync: %q, want its source", got)
	}
	if problems, err := Check(context.Background(), r.opts); err != nil || len(problems) > 0 {
		t.Errorf("Check after sync: %q, %v; want nothing", problems, err)
	}
	stdout.Reset()
	if err := SyncCommand(&stdout, &stdout)(context.Background(), []string{r.root}); err != nil || stdout.String() != "chartcheck: nothing to rewrite\n" {
		t.Errorf("chartcheck sync again: %v, %q; want nothing rewritten", err, stdout.String())
	}

	filetest.Write(t, filepath.Join(r.root, FilesDir, "gone.yaml"), "x\n")
	_, err := Sync(r.root)
	if err == nil || !strings.Contains(err.Error(), "charts/hostpath/files/gone.yaml: its source manifests/gone.yaml is gone") {
		t.Errorf("Sync with a copy of nothing: %v, want an error naming it", err)
	}
	problems, err := CheckCopies(r.root)
	if err != nil || !slices.Equal(problems, []string{"charts/hostpath/files/gone.yaml: its source manifests/gone.yaml is gone: remove the copy (and what includes it)"}) {
		t.Errorf("CheckCopies with a copy of nothing: %q, %v", problems, err)
	}
}

func TestCheckCopiesNone(t *testing.T) {
	withoutFiles, empty := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, FilesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{withoutFiles, empty} {
		if problems, err := CheckCopies(root); err != nil || len(problems) != 1 || !strings.Contains(problems[0], "no copies") {
			t.Errorf("CheckCopies without copies: %q, %v; want one problem", problems, err)
		}
		if changed, err := SyncCopies(root); err != nil || len(changed) > 0 {
			t.Errorf("SyncCopies without copies: %q, %v; want nothing", changed, err)
		}
	}
}
