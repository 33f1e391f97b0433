package chartcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hostpath.dev/api/runtime/filetest"
)

// values is a values.yaml with every shape the table meets: a header, a
// documented map whose leaves need no comment, leaves documented one by
// one, a continued comment, a list, an empty map, a quoted key, and two
// undocumented leaves.
const values = `# Values of the chart: a header, not a key's text.

image:
  # -- Registry of the images.
  registry: hostpath.dev
  # -- Tag of the images;
  # empty: the appVersion.
  tag: ""
  pullPolicy: IfNotPresent

# -- Resources of the | pods.
resources:
  requests: {cpu: 10m}
  limits:
    memory: 256Mi

# a section comment
pools:
  # -- More pools.
  extra: []
  # -- Labels.
  labels: {}
  "a.b": 1

# -- The classes.
classes:
- {name: hostpath, mode: node}
`

func TestReadValues(t *testing.T) {
	got, undocumented, err := ReadValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{
		{Key: "image.registry", Default: `"hostpath.dev"`, Description: "Registry of the images."},
		{Key: "image.tag", Default: `""`, Description: "Tag of the images; empty: the appVersion."},
		{Key: "resources", Default: `{"limits":{"memory":"256Mi"},"requests":{"cpu":"10m"}}`, Description: "Resources of the | pods."},
		{Key: "pools.extra", Default: "[]", Description: "More pools."},
		{Key: "pools.labels", Default: "{}", Description: "Labels."},
		{Key: "classes", Default: `[{"mode":"node","name":"hostpath"}]`, Description: "The classes."},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ReadValues =\n  %q\nwant\n  %q", got, want)
	}
	wantUndocumented := []Undocumented{{Key: "image.pullPolicy", Line: 9}, {Key: `pools."a.b"`, Line: 23}}
	if !slices.Equal(undocumented, wantUndocumented) {
		t.Errorf("undocumented = %v, want %v", undocumented, wantUndocumented)
	}
}

func TestDescription(t *testing.T) {
	for _, tc := range []struct{ head, want string }{
		{"# -- One line.", "One line."},
		{"# header\n\n# -- Two\n# lines.", "Two lines."},
		{"# -- old\n# -- The last one counts.", "The last one counts."},
		{"# not documentation", ""},
		{"#-- no space", ""},
		{"", ""},
	} {
		if got := Description(tc.head); got != tc.want {
			t.Errorf("Description(%q) = %q, want %q", tc.head, got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	got := Table([]Value{
		{Key: "a.b", Default: `"x|y"`, Description: "A | B."},
		{Key: "c", Default: "`q`", Description: "Backquotes."},
	})
	want := "| Key | Default | Description |\n|---|---|---|\n" +
		"| `a.b` | `\"x\\|y\"` | A \\| B. |\n" +
		"| `c` | `` `q` `` | Backquotes. |\n"
	if got != want {
		t.Errorf("Table =\n%s\nwant\n%s", got, want)
	}
}

func TestReplaceTable(t *testing.T) {
	table := "| Key |\n"
	block := BeginMarker + "\n\n" + table + "\n" + EndMarker + "\n"
	tests := []struct {
		name, doc, want, err string
	}{
		{"no markers: the section is added at the end", "# Install\n\ntext", "# Install\n\ntext\n\n" + tableSection + block, ""},
		{"markers: only between them", "# Install\n" + BeginMarker + "\nold\n" + EndMarker + "\nafter\n", "# Install\n" + block + "after\n", ""},
		{"begin without end", BeginMarker + "\n", "", "without"},
		{"end before begin", EndMarker + "\n" + BeginMarker + "\n", "", "without"},
		{"begin twice", BeginMarker + "\n" + BeginMarker + "\n" + EndMarker + "\n", "", "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReplaceTable(tc.doc, table)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReplaceTable = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ReplaceTable = %q, %v\nwant %q", got, err, tc.want)
			}
			if again, err := ReplaceTable(got, table); err != nil || again != got {
				t.Errorf("ReplaceTable twice = %q, %v; want it unchanged", again, err)
			}
		})
	}
}

// TestCheckTable: an undocumented value and a missing, then stale, table
// fail the check, naming the key and make chart-sync; SyncTable writes the
// table (and still names the undocumented value); documented, all pass.
func TestCheckTable(t *testing.T) {
	root := t.TempDir()
	filetest.Write(t, filepath.Join(root, ValuesFile), values)
	filetest.Write(t, filepath.Join(root, DocFile), "# Install\n\nThe rest of the page.\n")

	problems, err := CheckTable(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"charts/hostpath/values.yaml:9: value `image.pullPolicy` has no `# -- ` comment, nor has a key above it",
		"charts/hostpath/values.yaml:23: value `pools.\"a.b\"` has no `# -- ` comment, nor has a key above it",
		"docs/install.md: no chart values table (between <!-- chart-values:begin --> and <!-- chart-values:end -->): run make chart-sync",
	}
	if !slices.Equal(problems, want) {
		t.Fatalf("CheckTable =\n  %s\nwant\n  %s", strings.Join(problems, "\n  "), strings.Join(want, "\n  "))
	}

	changed, err := SyncTable(root)
	if !changed || err == nil || !strings.Contains(err.Error(), "image.pullPolicy (line 9)") {
		t.Fatalf("SyncTable = %v, %v; want the table written and an error naming image.pullPolicy", changed, err)
	}
	page := readFile(t, filepath.Join(root, DocFile))
	if !strings.HasPrefix(page, "# Install\n\nThe rest of the page.\n\n## Chart values\n") || !strings.Contains(page, "| `image.registry` | `\"hostpath.dev\"` | Registry of the images. |") {
		t.Fatalf("docs/install.md after SyncTable:\n%s", page)
	}

	documented := strings.NewReplacer("  pullPolicy:", "  # -- Pull policy.\n  pullPolicy:", `  "a.b": 1`, "  # -- A key with a dot.\n  \"a.b\": 1").Replace(values)
	filetest.Write(t, filepath.Join(root, ValuesFile), documented)
	problems, err = CheckTable(root)
	if err != nil || !slices.Equal(problems, []string{"docs/install.md: the chart values table is stale (charts/hostpath/values.yaml changed): run make chart-sync"}) {
		t.Fatalf("CheckTable after a change of values.yaml = %q, %v; want the table stale", problems, err)
	}
	if changed, err := SyncTable(root); !changed || err != nil {
		t.Fatalf("SyncTable = %v, %v; want the table rewritten", changed, err)
	}
	if problems, err := CheckTable(root); err != nil || len(problems) > 0 {
		t.Fatalf("CheckTable after SyncTable = %q, %v; want nothing", problems, err)
	}
	if changed, err := SyncTable(root); changed || err != nil {
		t.Fatalf("SyncTable again = %v, %v; want nothing changed", changed, err)
	}
	if page := readFile(t, filepath.Join(root, DocFile)); strings.Count(page, "## Chart values") != 1 || !strings.Contains(page, "| `pools.\"a.b\"` | `1` | A key with a dot. |") {
		t.Fatalf("docs/install.md after two syncs:\n%s", page)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
