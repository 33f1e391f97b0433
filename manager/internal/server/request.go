package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
)

// call is one checked /v1 request: its names, query and body.
type call struct {
	pool, name string
	// user is the authorised caller, set before the handler runs.
	user *review.User
	// remote is the node of a caller bound to another node, whose volume
	// writes may change only multihost volumes (see Backend); "" for this
	// node's callers.
	remote string
	// create is the body of PUT .../volumes/{name}, clone that of PUT
	// .../volumes/{name}/clone, and mode the mode either asks for.
	create managerapi.CreateVolumeRequest
	clone  managerapi.CloneVolumeRequest
	mode   fs.FileMode
	// setOwner is the body of PUT .../volumes/{name}/owner.
	setOwner managerapi.SetOwnerRequest
	// setSize is the body of PUT .../volumes/{name}/size.
	setSize managerapi.SetSizeRequest
	// del is the query of DELETE .../volumes/{name}.
	del managerapi.DeleteOptions
	// list is the query of GET .../volumes, its Limit set.
	list managerapi.ListOptions
}

// parser checks a route's request. A nil query means the route takes no
// query parameters; a nil body means its body is not read.
type parser struct {
	query func(q url.Values, c *call) error
	body  func(data []byte, c *call) error
}

// check validates the path's names and the query: cheap checks, done
// before the request takes a slot or costs a review.
func (p parser) check(r *http.Request) (*call, error) {
	c := &call{pool: r.PathValue("pool"), name: r.PathValue("name")}
	if strings.Contains(r.Pattern, "{pool}") {
		if err := managerapi.ValidatePoolName(c.pool); err != nil {
			return nil, err
		}
	}
	if strings.Contains(r.Pattern, "{name}") {
		if err := managerapi.ValidateVolumeName(c.name); err != nil {
			return nil, err
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("invalid query: %w", err)
	}
	if p.query == nil {
		if len(q) > 0 {
			return nil, fmt.Errorf("%s takes no query parameters, got %q", r.Pattern, r.URL.RawQuery)
		}
		return c, nil
	}
	if err := p.query(q, c); err != nil {
		return nil, err
	}
	return c, nil
}

// readBody reads and decodes the body, if the route takes one.
func (p parser) readBody(r *http.Request, c *call) error {
	if p.body == nil {
		return nil
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	if err := p.body(data, c); err != nil {
		return fmt.Errorf("invalid request body: %w", err)
	}
	return nil
}

// checkQuery fails unless each parameter of q is one of the two keys the
// route takes, given once.
func checkQuery(q url.Values, route, key1, key2 string) error {
	for key, values := range q {
		if key != key1 && key != key2 {
			return fmt.Errorf("unknown query parameter %q: %s takes %s and %s", key, route, key1, key2)
		}
		if len(values) != 1 {
			return fmt.Errorf("query parameter %q is given %d times", key, len(values))
		}
	}
	return nil
}

// parseDelete reads DELETE's query: owner (required) and ifEmpty.
func parseDelete(q url.Values, c *call) error {
	if err := checkQuery(q, "DELETE", "owner", "ifEmpty"); err != nil {
		return err
	}
	c.del.Owner = q.Get("owner")
	if err := managerapi.ValidateOwner(c.del.Owner); err != nil {
		return fmt.Errorf("query parameter owner: %w", err)
	}
	switch v, ok := q["ifEmpty"]; {
	case !ok || v[0] == "false":
	case v[0] == "true":
		c.del.IfEmpty = true
	default:
		return fmt.Errorf("query parameter ifEmpty is %q, want true or false", v[0])
	}
	return nil
}

// parseList reads GET .../volumes's query: limit (a decimal number from 1
// to managerapi.MaxListLimit; managerapi.DefaultListLimit when not given) and
// continue (a volume name, the continue of the previous page), each at
// most once; anything else is 400.
func parseList(q url.Values, c *call) error {
	if err := checkQuery(q, "GET .../volumes", "limit", "continue"); err != nil {
		return err
	}
	c.list.Limit = managerapi.DefaultListLimit
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > managerapi.MaxListLimit || strconv.Itoa(n) != v[0] {
			return fmt.Errorf("query parameter limit is %q, want a number from 1 to %d", v[0], managerapi.MaxListLimit)
		}
		c.list.Limit = n
	}
	if v, ok := q["continue"]; ok {
		if err := managerapi.ValidateVolumeName(v[0]); err != nil {
			return fmt.Errorf("query parameter continue is %q, want the continue of the previous page (a volume name): %w", v[0], err)
		}
		c.list.Continue = v[0]
	}
	return nil
}

// parseCreate reads PUT .../volumes/{name}'s body and checks it
// (managerapi.CreateVolumeRequest.Validate).
func parseCreate(data []byte, c *call) error {
	if err := decodeStrict(data, &c.create); err != nil {
		return err
	}
	mode, err := c.create.Validate()
	c.mode = mode
	return err
}

// parseClone reads PUT .../volumes/{name}/clone's body and checks it
// (managerapi.CloneVolumeRequest.Validate).
func parseClone(data []byte, c *call) error {
	if err := decodeStrict(data, &c.clone); err != nil {
		return err
	}
	mode, err := c.clone.Validate(c.pool, c.name)
	c.mode = mode
	return err
}

// parseSetOwner reads PUT .../volumes/{name}/owner's body and checks it
// (managerapi.SetOwnerRequest.Validate).
func parseSetOwner(data []byte, c *call) error {
	if err := decodeStrict(data, &c.setOwner); err != nil {
		return err
	}
	return c.setOwner.Validate()
}

// parseSetSize reads PUT .../volumes/{name}/size's body and checks it
// (managerapi.SetSizeRequest.Validate).
func parseSetSize(data []byte, c *call) error {
	if err := decodeStrict(data, &c.setSize); err != nil {
		return err
	}
	return c.setSize.Validate()
}

// decodeStrict decodes data, one JSON object, into the struct v points
// at. Stricter than encoding/json: every key must be exactly a field's
// JSON name (Go would also take "OWNER" for "owner"), no key may repeat
// (Go would keep the last), and nothing may follow the object (Decoder.More
// misses a stray "}").
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the body is empty, want a JSON object")
	}
	if err := checkKeys(data, jsonFields(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// checkKeys checks the top-level keys of the JSON object in data: each
// one of fields, none twice.
func checkKeys(data []byte, fields []string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return err
	} else if tok != json.Delim('{') {
		return fmt.Errorf("the body is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if !slices.Contains(fields, key) {
			i := slices.IndexFunc(fields, func(f string) bool { return strings.EqualFold(f, key) })
			if i >= 0 {
				return fmt.Errorf("unknown field %q: field names are case-sensitive, did you mean %q?", key, fields[i])
			}
			return fmt.Errorf("unknown field %q: want %s", key, strings.Join(fields, ", "))
		}
		if seen[key] {
			return fmt.Errorf("field %q is given twice", key)
		}
		seen[key] = true
		if err := dec.Decode(&json.RawMessage{}); err != nil {
			return err
		}
	}
	return nil
}

// jsonFields lists the JSON names of the fields of the struct v points at.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v).Elem()
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			// encoding/json inlines an untagged embedded struct's fields.
			names = append(names, jsonFields(reflect.New(f.Type).Interface())...)
		case name == "-" || !f.IsExported():
		case name == "":
			names = append(names, f.Name)
		default:
			names = append(names, name)
		}
	}
	return names
}
