package chartcheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Value is one documented key of values.yaml: a row of the values table.
type Value struct {
	// Key is the full path of the key: image.registry.
	Key string
	// Default is its value in values.yaml as compact JSON.
	Default string
	// Description is the text of its `# --` comment, on one line.
	Description string
}

// Undocumented is a leaf key of values.yaml that neither it nor a key above
// it documents.
type Undocumented struct {
	Key  string
	Line int
}

// docPrefix starts the comment line that documents the key below it
// (helm-docs' convention); the `#` lines after it continue the text.
const docPrefix = "# --"

// ReadValues reads a values.yaml: the keys documented by a `# --` comment,
// in the file's order, and the leaves (scalars, lists, empty maps) that
// neither they nor a key above them document.
func ReadValues(data []byte) ([]Value, []Undocumented, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse values: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, errors.New("parse values: not a map")
	}
	var w valueWalker
	if err := w.walk(root, "", false); err != nil {
		return nil, nil, err
	}
	return w.values, w.undocumented, nil
}

// valueWalker collects what ReadValues returns.
type valueWalker struct {
	values       []Value
	undocumented []Undocumented
}

// walk visits the keys of a map whose path is prefix; documented tells
// whether a key above documents them.
func (w *valueWalker) walk(m *yaml.Node, prefix string, documented bool) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := joinKey(prefix, k.Value)
		desc := Description(k.HeadComment)
		if desc != "" {
			var def any
			if err := v.Decode(&def); err != nil {
				return fmt.Errorf("values: %s: %w", key, err)
			}
			w.values = append(w.values, Value{Key: key, Default: compactJSON(def), Description: desc})
		}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		switch {
		case v.Kind == yaml.MappingNode && len(v.Content) > 0:
			if err := w.walk(v, key, documented || desc != ""); err != nil {
				return err
			}
		case !documented && desc == "":
			w.undocumented = append(w.undocumented, Undocumented{Key: key, Line: k.Line})
		}
	}
	return nil
}

// joinKey is the path of key k below prefix: a key that is not a plain
// name is quoted.
func joinKey(prefix, k string) string {
	if !plainKey.MatchString(k) {
		k = strconv.Quote(k)
	}
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// Description returns the text of the `# --` comment in a key's head
// comment (its last one, and the comment lines after it, joined by
// spaces), or "".
func Description(head string) string {
	lines := strings.Split(head, "\n")
	start := -1
	for i, l := range lines {
		if t := strings.TrimSpace(l); t == docPrefix || strings.HasPrefix(t, docPrefix+" ") {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	var words []string
	for i, l := range lines[start:] {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if i == 0 {
			t = strings.TrimPrefix(t, "--")
		}
		if t = strings.TrimSpace(t); t != "" {
			words = append(words, t)
		}
	}
	return strings.Join(words, " ")
}

// Table is the Markdown table of the values: key, default, description.
func Table(values []Value) string {
	var b strings.Builder
	b.WriteString("| Key | Default | Description |\n|---|---|---|\n")
	for _, v := range values {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(code(v.Key)), cell(code(v.Default)), cell(v.Description))
	}
	return b.String()
}

// code is s as a Markdown code span.
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// cell escapes the pipes of a table cell (also in code spans, for GitHub).
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// Markers of the generated table in DocFile, each on a line of its own.
const (
	BeginMarker = "<!-- chart-values:begin -->"
	EndMarker   = "<!-- chart-values:end -->"
)

// tableSection is what SyncTable appends to a page without markers: the
// section whose body it owns, before the markers.
const tableSection = "## Chart values\n\n" +
	"The values of the Helm chart `charts/hostpath`, with their defaults. With\n" +
	"the defaults it renders the objects of `manifests/`, and with each values\n" +
	"file of `charts/hostpath/ci/` those of the overlay the file names (`make\n" +
	"check-chart`, part of `make verify`, checks both). `make chart-sync`\n" +
	"writes this table from the `# --` comments of `charts/hostpath/values.yaml`.\n\n"

// ReplaceTable returns doc with the lines between the markers replaced by
// table, or, when doc has neither marker, with a section "Chart values"
// holding them appended. A marker without the other, or either twice, is an
// error.
func ReplaceTable(doc, table string) (string, error) {
	lines := strings.SplitAfter(doc, "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case BeginMarker:
			if begin >= 0 {
				return "", fmt.Errorf("%s twice", BeginMarker)
			}
			begin = i
		case EndMarker:
			if end >= 0 {
				return "", fmt.Errorf("%s twice", EndMarker)
			}
			end = i
		}
	}
	block := BeginMarker + "\n\n" + table + "\n" + EndMarker + "\n"
	switch {
	case begin < 0 && end < 0:
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		return doc + "\n" + tableSection + block, nil
	case begin < 0 || end < begin:
		return "", fmt.Errorf("%s without %s before it", EndMarker, BeginMarker)
	}
	return strings.Join(lines[:begin], "") + block + strings.Join(lines[end+1:], ""), nil
}

// HasMarkers reports whether doc has the table's begin marker on a line.
func HasMarkers(doc string) bool {
	for l := range strings.Lines(doc) {
		if strings.TrimSpace(l) == BeginMarker {
			return true
		}
	}
	return false
}

// CheckTable returns the problems of the values table under root: each
// undocumented value of ValuesFile, and DocFile's table missing or stale.
func CheckTable(root string) ([]string, error) {
	doc, updated, undocumented, err := table(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, u := range undocumented {
		problems = append(problems, fmt.Sprintf("%s:%d: value `%s` has no `# -- ` comment, nor has a key above it", ValuesFile, u.Line, u.Key))
	}
	switch {
	case !HasMarkers(doc):
		problems = append(problems, fmt.Sprintf("%s: no chart values table (between %s and %s): run make chart-sync", DocFile, BeginMarker, EndMarker))
	case updated != doc:
		problems = append(problems, fmt.Sprintf("%s: the chart values table is stale (%s changed): run make chart-sync", DocFile, ValuesFile))
	}
	return problems, nil
}

// SyncTable rewrites the values table of DocFile under root and reports
// whether it changed. It writes the table also when values are
// undocumented, and then returns an error naming them.
func SyncTable(root string) (bool, error) {
	doc, updated, undocumented, err := table(root)
	if err != nil {
		return false, err
	}
	changed := updated != doc
	if changed {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(DocFile)), []byte(updated), 0o644); err != nil {
			return false, fmt.Errorf("write %s: %w", DocFile, err)
		}
	}
	if len(undocumented) > 0 {
		keys := make([]string, len(undocumented))
		for i, u := range undocumented {
			keys[i] = fmt.Sprintf("%s (line %d)", u.Key, u.Line)
		}
		return changed, fmt.Errorf("%s: values without a `# -- ` comment, nor a key above them with one: %s", ValuesFile, strings.Join(keys, ", "))
	}
	return changed, nil
}

// table reads ValuesFile and DocFile under root and returns the page as it
// is and as it should be, and the undocumented values.
func table(root string) (doc, updated string, undocumented []Undocumented, err error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(ValuesFile)))
	if err != nil {
		return "", "", nil, err
	}
	values, undocumented, err := ReadValues(data)
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: %w", ValuesFile, err)
	}
	page, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(DocFile)))
	if err != nil {
		return "", "", nil, err
	}
	updated, err = ReplaceTable(string(page), Table(values))
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: %w", DocFile, err)
	}
	return string(page), updated, undocumented, nil
}
