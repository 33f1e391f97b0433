package chartcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Key identifies an object of a rendering.
type Key struct {
	APIVersion, Kind, Namespace, Name string
}

// String is the object as a report names it: "Kind namespace/name
// (apiVersion)", without the namespace for a cluster-scoped object.
func (k Key) String() string {
	name := k.Name
	if k.Namespace != "" {
		name = k.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s (%s)", k.Kind, name, k.APIVersion)
}

// compare orders keys by apiVersion, kind, namespace and name.
func (k Key) compare(o Key) int {
	for _, c := range [][2]string{{k.APIVersion, o.APIVersion}, {k.Kind, o.Kind}, {k.Namespace, o.Namespace}, {k.Name, o.Name}} {
		if n := strings.Compare(c[0], c[1]); n != 0 {
			return n
		}
	}
	return 0
}

// Objects are the objects of one rendering, each as its JSON form
// (sigs.k8s.io/yaml: numbers are float64), by key.
type Objects map[Key]map[string]any

// Parse splits a multi-document YAML stream, as helm template and
// kustomize build print it, into objects. Empty documents and documents of
// comments only are skipped; an object without kind or name, or one
// rendered twice, is an error.
func Parse(stream []byte) (Objects, error) {
	objs := Objects{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read YAML stream: %w", err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("parse document: %w:\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		k := keyOf(obj)
		if k.Kind == "" || k.Name == "" {
			return nil, fmt.Errorf("a document without kind or metadata.name:\n%s", doc)
		}
		if _, dup := objs[k]; dup {
			return nil, fmt.Errorf("%s rendered twice", k)
		}
		objs[k] = obj
	}
}

// keyOf reads an object's key.
func keyOf(obj map[string]any) Key {
	meta, _ := obj["metadata"].(map[string]any)
	str := func(m map[string]any, f string) string { s, _ := m[f].(string); return s }
	return Key{APIVersion: str(obj, "apiVersion"), Kind: str(obj, "kind"), Namespace: str(meta, "namespace"), Name: str(meta, "name")}
}

// DropKind removes the objects of a kind (the kustomize side's Namespace:
// helm installs into a namespace that --create-namespace makes).
func (o Objects) DropKind(kind string) {
	maps.DeleteFunc(o, func(k Key, _ map[string]any) bool { return k.Kind == kind })
}

// DropAnnotation removes an annotation from every object, and the
// annotations when none is left (the chart side's helm.sh/resource-policy,
// which manifests/ cannot have).
func (o Objects) DropAnnotation(name string) {
	for _, obj := range o {
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if _, ok := ann[name]; !ok {
			continue
		}
		delete(ann, name)
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
}

// Compare returns every difference between two renderings a and b, named
// aName and bName, each line prefixed with prefix: the objects only one
// has, and each field path at which an object both have differs, with
// both values. Lines are sorted by object key, then in field order.
func Compare(prefix string, a, b Objects, aName, bName string) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, Key.compare)
	var out []string
	for _, k := range keys {
		x, inA := a[k]
		y, inB := b[k]
		switch {
		case !inB:
			out = append(out, fmt.Sprintf("%s%s: only in %s", prefix, k, aName))
		case !inA:
			out = append(out, fmt.Sprintf("%s%s: only in %s", prefix, k, bName))
		default:
			for _, d := range Diff(x, y) {
				out = append(out, fmt.Sprintf("%s%s: %s: %s %s, %s %s", prefix, k, d.Path, aName, d.A, bName, d.B))
			}
		}
	}
	return out
}

// Difference is one field at which two values differ: its path
// (spec.template.spec.containers[0].args[2], metadata.labels["a.b/c"]) and
// each side's value, short, or "(absent)".
type Difference struct {
	Path, A, B string
}

// absent stands for a field that one side does not have.
const absent = "(absent)"

// Diff returns the paths at which a and b differ, in field order (map keys
// sorted, list items by index: a list's order matters).
func Diff(a, b any) []Difference {
	var out []Difference
	diff("", a, b, &out)
	return out
}

func diff(path string, a, b any, out *[]Difference) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			keys := slices.Sorted(maps.Keys(x))
			for k := range y {
				if _, ok := x[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				diffField(fieldPath(path, k), x, y, k, out)
			}
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			for i := range max(len(x), len(y)) {
				p := fmt.Sprintf("%s[%d]", path, i)
				switch {
				case i >= len(y):
					*out = append(*out, Difference{p, short(x[i]), absent})
				case i >= len(x):
					*out = append(*out, Difference{p, absent, short(y[i])})
				default:
					diff(p, x[i], y[i], out)
				}
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		sa, sb := shortPair(a, b)
		*out = append(*out, Difference{pathOrRoot(path), sa, sb})
	}
}

// diffField compares the field k of two maps, either of which may lack it.
func diffField(path string, x, y map[string]any, k string, out *[]Difference) {
	va, inA := x[k]
	vb, inB := y[k]
	switch {
	case !inB:
		*out = append(*out, Difference{path, short(va), absent})
	case !inA:
		*out = append(*out, Difference{path, absent, short(vb)})
	default:
		diff(path, va, vb, out)
	}
}

// plainKey is a map key a path can show after a dot.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func fieldPath(parent, k string) string {
	if !plainKey.MatchString(k) {
		return fmt.Sprintf("%s[%q]", parent, k)
	}
	if parent == "" {
		return k
	}
	return parent + "." + k
}

func pathOrRoot(p string) string {
	if p == "" {
		return "(object)"
	}
	return p
}

// maxShort is the most characters a value takes in a report.
const maxShort = 60

// short is a value as compact JSON, cut after maxShort characters.
func short(v any) string {
	if s, ok := v.(string); ok {
		return shortString(s, 0)
	}
	s := compactJSON(v)
	if r := []rune(s); len(r) > maxShort {
		return string(r[:maxShort]) + "…"
	}
	return s
}

// shortString is s quoted, from its rune from on, cut after maxShort
// runes; "…" marks what is left out at either end.
func shortString(s string, from int) string {
	r := []rune(s)[from:]
	head, tail := "", ""
	if from > 0 {
		head = "…"
	}
	if len(r) > maxShort {
		r, tail = r[:maxShort], "…"
	}
	q := compactJSON(string(r))
	return `"` + head + q[1:len(q)-1] + tail + `"`
}

// shortPair is short of two values, but two long strings that differ are
// both shown from a little before their first difference.
func shortPair(a, b any) (string, string) {
	x, okA := a.(string)
	y, okB := b.(string)
	if !okA || !okB {
		return short(a), short(b)
	}
	ra, rb := []rune(x), []rune(y)
	i := 0
	for i < len(ra) && i < len(rb) && ra[i] == rb[i] {
		i++
	}
	if i <= maxShort/2 {
		return short(a), short(b)
	}
	from := i - maxShort/3
	return shortString(x, from), shortString(y, from)
}

// compactJSON is v as JSON, without HTML escapes.
func compactJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
