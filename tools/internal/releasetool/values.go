package releasetool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Setting is one value SetValues writes: Path is the dotted path of a key
// that the file already has (image.registry, manager.image.digest), Value
// the string it gets.
type Setting struct {
	Path  string
	Value string
}

// ParseSettings parses arguments PATH=VALUE.
func ParseSettings(args []string) ([]Setting, error) {
	settings := make([]Setting, 0, len(args))
	for _, a := range args {
		path, value, ok := strings.Cut(a, "=")
		if !ok || path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
			return nil, fmt.Errorf("%q is not KEY.PATH=VALUE", a)
		}
		settings = append(settings, Setting{Path: path, Value: value})
	}
	return settings, nil
}

// SetValues sets string values in a YAML file such as a Helm chart's
// values.yaml (make release pins the chart's images by digest this way),
// keeping its comments and order. Each path must name a key the file has,
// whose value is a scalar: a chart whose values were renamed fails here
// instead of being packaged without them.
func SetValues(file string, settings []Setting) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read values: %w", err)
	}
	out, err := setValues(data, settings)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return fmt.Errorf("write values: %w", err)
	}
	return nil
}

// setValues is SetValues on the file's content.
func setValues(data []byte, settings []Setting) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("not one YAML document")
	}
	var errs []error
	for _, s := range settings {
		node, err := lookup(doc.Content[0], strings.Split(s.Path, "."))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Path, err))
			continue
		}
		node.Kind, node.Tag, node.Value, node.Style = yaml.ScalarNode, "!!str", s.Value, yaml.DoubleQuotedStyle
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// lookup finds the scalar value of the key path below the mapping node.
func lookup(node *yaml.Node, path []string) (*yaml.Node, error) {
	for i, key := range path {
		if node.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s is not a mapping", strings.Join(path[:i], "."))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(node.Content); j += 2 {
			if node.Content[j].Value == key {
				next = node.Content[j+1]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no key %q", strings.Join(path[:i+1], "."))
		}
		node = next
	}
	if node.Kind != yaml.ScalarNode {
		return nil, errors.New("not a scalar value")
	}
	return node, nil
}
