package tenantfile

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/aidonow/eva/internal/didyoumean"
	"github.com/aidonow/eva/internal/safetext"
)

// position is a place in a file.
type position struct{ line, column int }

// decoder walks a YAML node tree against a Go type, the way the API server's strict
// decoding would, but keeping positions: it reports unknown and duplicate fields and
// wrong types at their line and column, records where each field path stands, and
// builds a plain value holding only the well-typed parts, ready for encoding/json.
type decoder struct {
	problems []fieldProblem
	// values maps a field path to the position of its scalar value, keys to the
	// position of its key, and containers to the start of its object or list value.
	values     map[string]position
	keys       map[string]position
	containers map[string]position
	// broken holds paths whose value was dropped for a structural error, so semantic
	// validation does not report the same field again.
	broken map[string]bool
	// visited counts nodes walked, so aliases cannot expand a small file into an
	// enormous value ("billion laughs").
	visited  int
	overflow bool
}

// maxNodes bounds the nodes one document may expand to, aliases included.
const maxNodes = 200_000

// budget counts a node and reports whether the walk may go on.
func (d *decoder) budget(n *yaml.Node) bool {
	d.visited++
	if d.visited <= maxNodes {
		return true
	}
	if !d.overflow {
		d.overflow = true
		d.problems = append(d.problems, fieldProblem{pos: pos(n),
			message: fmt.Sprintf("document expands to more than %d values (too many aliases?)", maxNodes)})
	}
	return false
}

type fieldProblem struct {
	pos     position
	path    string
	message string
}

func newDecoder() *decoder {
	return &decoder{values: map[string]position{}, keys: map[string]position{},
		containers: map[string]position{}, broken: map[string]bool{}}
}

var (
	jsonValueType   = reflect.TypeFor[apiextensionsv1.JSON]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func pos(n *yaml.Node) position { return position{n.Line, n.Column} }

// record remembers where the value of p stands.
func (d *decoder) record(n *yaml.Node, p *field.Path) {
	if n.Kind == yaml.ScalarNode {
		d.values[p.String()] = pos(n)
	} else {
		d.containers[p.String()] = pos(n)
	}
}

func (d *decoder) fail(n *yaml.Node, p *field.Path, format string, args ...any) {
	path := ""
	if p != nil {
		path = p.String()
		if d.broken[path] {
			return // one problem per field is enough
		}
		d.broken[path] = true
	}
	d.problems = append(d.problems, fieldProblem{pos: pos(n), path: path, message: fmt.Sprintf(format, args...)})
}

// decode checks n against t and returns the plain value (map[string]any, []any,
// string, int64, float64, bool or nil) and whether the value is usable.
func (d *decoder) decode(n *yaml.Node, t reflect.Type, p *field.Path) (any, bool) {
	if !d.unshared(n, p) {
		return nil, false
	}
	if !d.budget(n) {
		return nil, false
	}
	d.record(n, p)
	if !d.knownTag(n, p) {
		return nil, false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true
	}
	switch {
	case t == jsonValueType:
		return d.decodeAny(n, p, 0)
	case reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textType):
		// Types with their own encoding (times, durations, quantities) take a scalar.
		if n.Kind != yaml.ScalarNode {
			d.fail(n, p, "expected a single value, got %s", describe(n))
			return nil, false
		}
		v, ok := scalarValue(n)
		if !ok {
			d.fail(n, p, "%s", unreadable(n))
		}
		return v, ok
	}
	switch t.Kind() {
	case reflect.Struct:
		return d.decodeStruct(n, t, p)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, p, "expected an object (key: value pairs), got %s", describe(n))
			return nil, false
		}
		out := map[string]any{}
		d.eachPair(n, p, func(key string, kn, vn *yaml.Node) {
			kp := p.Key(key)
			d.keys[kp.String()] = pos(kn)
			if v, ok := d.decode(vn, t.Elem(), kp); ok {
				out[key] = v
			}
		})
		return out, true
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, p, "expected a list, got %s", describe(n))
			return nil, false
		}
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			ip := p.Index(i)
			d.keys[ip.String()] = pos(item)
			if v, ok := d.decode(item, t.Elem(), ip); ok {
				out = append(out, v)
			}
		}
		return out, true
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(": quote it (%s)", safetext.Value(n.Value))
			}
			d.fail(n, p, "expected a string, got %s%s", describe(n), hint)
			return nil, false
		}
		return n.Value, true
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.fail(n, p, "expected true or false, got %s", describe(n))
			return nil, false
		}
		return scalarValue(n)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.fail(n, p, "expected an integer, got %s", describe(n))
			return nil, false
		}
		var v int64
		if err := n.Decode(&v); err != nil || reflect.New(t).Elem().OverflowInt(v) && t.Kind() <= reflect.Int64 {
			d.fail(n, p, "integer %s is out of range", safetext.Limit(n.Value, safetext.MaxValue))
			return nil, false
		}
		return v, true
	case reflect.Float32, reflect.Float64:
		// Tenant files hold none; the other files DecodeStrict reads may.
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" && n.Tag != "!!float" {
			d.fail(n, p, "expected a number, got %s", describe(n))
			return nil, false
		}
		v, ok := scalarValue(n)
		if !ok {
			d.fail(n, p, "%s", unreadable(n))
		}
		return v, ok
	case reflect.Interface:
		return d.decodeAny(n, p, 0)
	}
	d.fail(n, p, "cannot decode a value of Go type %s", t)
	return nil, false
}

// structFields maps the JSON names of t's fields (following inline embedded structs)
// to their types, and lists the names in declaration order for suggestions.
// The result is computed once per type (fieldsCache) and shared: callers only read it.
func structFields(t reflect.Type) (map[string]reflect.Type, []string) {
	if cached, ok := fieldsCache.Load(t); ok {
		c := cached.(structFieldSet)
		return c.fields, c.names
	}
	fields, names := listStructFields(t)
	fieldsCache.Store(t, structFieldSet{fields, names})
	return fields, names
}

// structFieldSet is structFields' result for one type.
type structFieldSet struct {
	fields map[string]reflect.Type
	names  []string
}

// fieldsCache maps a struct type to its structFieldSet.
var fieldsCache sync.Map

func listStructFields(t reflect.Type) (map[string]reflect.Type, []string) {
	fields := map[string]reflect.Type{}
	var names []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields[name] = f.Type
			names = append(names, name)
		}
	}
	walk(t)
	return fields, names
}

func (d *decoder) decodeStruct(n *yaml.Node, t reflect.Type, p *field.Path) (any, bool) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, p, "expected an object (key: value pairs), got %s", describe(n))
		return nil, false
	}
	fields, names := structFields(t)
	out := map[string]any{}
	d.eachPair(n, p, func(key string, kn, vn *yaml.Node) {
		kp := childOf(p, key)
		d.keys[kp.String()] = pos(kn)
		ft, ok := fields[key]
		if !ok {
			msg := "unknown field"
			if s := didyoumean.Nearest(key, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.fail(kn, kp, "%s", msg)
			return
		}
		if v, ok := d.decode(vn, ft, kp); ok {
			out[key] = v
		}
	})
	return out, true
}

// eachPair calls fn for every key/value pair of a mapping, reporting non-string,
// merge and duplicate keys.
func (d *decoder) eachPair(n *yaml.Node, p *field.Path, fn func(key string, kn, vn *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		switch {
		case kn.Kind != yaml.ScalarNode:
			d.fail(kn, p, "keys must be plain strings, got %s", describe(kn))
			continue
		case kn.Anchor != "":
			d.fail(kn, p, "YAML anchors (&%s) are not allowed in tenant files", safetext.Limit(kn.Anchor, safetext.MaxValue))
			continue
		case kn.Tag == "!!merge":
			d.fail(kn, p, "YAML merge keys (<<) are not supported in tenant files")
			continue
		case kn.Tag != "!!str":
			d.fail(kn, childOf(p, kn.Value), "keys must be strings, got %s: quote it", describe(kn))
			continue
		}
		if line, dup := seen[kn.Value]; dup {
			d.fail(kn, childOf(p, kn.Value), "duplicate key (first set on line %d)", line)
			continue
		}
		seen[kn.Value] = kn.Line
		fn(kn.Value, kn, vn)
	}
}

// unshared refuses YAML anchors and aliases: a value written once and read in several
// places is a second reading of the file that other YAML readers may not share, and
// every value of a tenant file has one place.
func (d *decoder) unshared(n *yaml.Node, p *field.Path) bool {
	switch {
	case n.Kind == yaml.AliasNode:
		d.fail(n, p, "YAML aliases (*%s) are not allowed in tenant files: write the value out", safetext.Limit(n.Value, safetext.MaxValue))
		return false
	case n.Anchor != "":
		d.fail(n, p, "YAML anchors (&%s) are not allowed in tenant files", safetext.Limit(n.Anchor, safetext.MaxValue))
		return false
	}
	return true
}

// maxAnyDepth bounds recursion into free-form values so a hostile file cannot exhaust
// the stack; semantic validation applies the real (smaller) nesting limit.
const maxAnyDepth = 64

// decodeAny decodes a free-form value (Helm values), recording positions.
func (d *decoder) decodeAny(n *yaml.Node, p *field.Path, depth int) (any, bool) {
	if !d.unshared(n, p) {
		return nil, false
	}
	if !d.budget(n) {
		return nil, false
	}
	d.record(n, p)
	if !d.knownTag(n, p) {
		return nil, false
	}
	if depth > maxAnyDepth {
		d.fail(n, p, "values nested deeper than %d levels", maxAnyDepth)
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		d.eachPair(n, p, func(key string, kn, vn *yaml.Node) {
			kp := p.Child(key)
			d.keys[kp.String()] = pos(kn)
			if v, ok := d.decodeAny(vn, kp, depth+1); ok {
				out[key] = v
			}
		})
		return out, true
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			if v, ok := d.decodeAny(item, p.Index(i), depth+1); ok {
				out = append(out, v)
			}
		}
		return out, true
	case yaml.ScalarNode:
		v, ok := scalarValue(n)
		if !ok {
			d.fail(n, p, "%s", unreadable(n))
		}
		return v, ok
	}
	d.fail(n, p, "unexpected %s", describe(n))
	return nil, false
}

// scalarValue converts a scalar node to a JSON-compatible value. Timestamps and
// other non-JSON scalars stay strings, as Kubernetes' YAML decoding keeps them.
func scalarValue(n *yaml.Node) (any, bool) {
	switch n.Tag {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, true
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		return b, n.Decode(&b) == nil
	case "!!int":
		// An integer beyond 64 bits would become an imprecise float in JSON and fail
		// later (in render, in the chart, in the API server) far from the file.
		var i int64
		return i, n.Decode(&i) == nil
	case "!!float":
		if intLiteralRE.MatchString(n.Value) {
			return nil, false // an integer too big for 64 bits, which YAML resolves as a float
		}
		var f float64
		if err := n.Decode(&f); err != nil || f != f || f > 1e308 || f < -1e308 {
			return nil, false // NaN and infinities have no JSON form
		}
		return f, true
	}
	return n.Value, true
}

// childOf extends a path by a struct field, allowing a nil root.
func childOf(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

// describe names a node's kind for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := safetext.Limit(n.Value, safetext.MaxValue)
		switch n.Tag {
		case "!!str":
			return "the string " + safetext.Value(n.Value)
		case "!!int", "!!float":
			return "the number " + v
		case "!!bool":
			return "the boolean " + v
		case "!!null":
			return "null"
		case "!!timestamp":
			return "the date " + v
		}
		return safetext.Value(n.Value)
	}
	return "an unexpected YAML node"
}

// standardTags are the YAML tags with a JSON meaning (plus timestamps, which stay
// strings as in Kubernetes). Anything else (!vault, !!set, !!binary, !!python/...) is
// an instruction for some other tool that Kubernetes would silently drop or mangle, so
// it is refused where it stands rather than rendered as a plain string.
// intLiteralRE matches integer literals (decimal, with YAML 1.1 underscores, hex,
// octal and binary forms).
var intLiteralRE = regexp.MustCompile(`^[-+]?([0-9_]+|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+)$`)

var standardTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true,
	"!!timestamp": true, "!!map": true, "!!seq": true,
}

// knownTag reports whether n carries a standard tag, reporting it otherwise.
func (d *decoder) knownTag(n *yaml.Node, p *field.Path) bool {
	if standardTags[n.Tag] {
		return true
	}
	d.fail(n, p, "YAML tag %s is not supported in tenant files: write a plain value (a secret belongs in a Secret handed to a module by spec.secretMounts)",
		safetext.Limit(n.Tag, safetext.MaxValue))
	return false
}

// unreadable explains why a scalar has no JSON value.
func unreadable(n *yaml.Node) string {
	v := safetext.Limit(n.Value, safetext.MaxValue)
	switch n.Tag {
	case "!!int":
		return fmt.Sprintf("integer %s does not fit in 64 bits: quote it if it is text", v)
	case "!!float":
		if intLiteralRE.MatchString(n.Value) {
			return fmt.Sprintf("integer %s does not fit in 64 bits: quote it if it is text", v)
		}
		return fmt.Sprintf("number %s has no JSON form (NaN, infinity or out of range): quote it if it is text", v)
	}
	return "cannot read value " + safetext.Value(n.Value)
}
