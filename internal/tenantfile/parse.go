package tenantfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/yamldoc"
)

// MaxFileBytes bounds the size of one tenant file: a tenant's values are capped far
// lower (tenant.MaxTotalValuesBytes), so anything bigger is a mistake or an attack, and
// is refused before it is parsed.
const MaxFileBytes = 256 << 10

// Tenant is one decoded tenant file.
type Tenant struct {
	// File is the path the tenant was read from, as given.
	File string
	// Object is the decoded tenant; nil when the file could not be decoded at all.
	Object *evav1.EvaTenant
	// Sum is the SHA-256 of the file as read: what a render cache keys the tenant on.
	Sum [sha256.Size]byte
	// Reused marks a stub: a file a previous valid load decoded (LoadOptions.Previous)
	// and that has not changed since. Its Object holds only the name, namespace and
	// capsule code; decode it with Reload before using anything else.
	Reused bool
	// known is the file's identity on disk when it was read.
	known *Known
	dec   *decoder
	doc   position
}

// Position returns the line and column of a field path (for example
// "spec.versions[crm]") in the file, falling back to the nearest enclosing field that
// is present, then to the start of the document.
func (t *Tenant) Position(path string) (line, column int) {
	if t.dec != nil {
		for p := path; p != ""; p = parentPath(p) {
			// A bad scalar is pointed at itself; an object or list at the key naming it.
			for _, m := range []map[string]position{t.dec.values, t.dec.keys, t.dec.containers} {
				if pos, ok := m[p]; ok {
					return pos.line, pos.column
				}
			}
		}
	}
	return t.doc.line, t.doc.column
}

// parentPath strips the last element of a field path: "a.b[c]" → "a.b" → "a" → "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// Parse decodes one tenant file strictly and validates it against the catalog. It
// returns the tenant (nil when nothing could be decoded) and every problem found.
func Parse(file string, data []byte, catalog *tenant.Catalog) (*Tenant, []Problem) {
	t, problems := parse(file, data, catalog)
	for i := range problems {
		problems[i] = problems[i].clean()
	}
	return t, problems
}

func parse(file string, data []byte, catalog *tenant.Catalog) (*Tenant, []Problem) {
	at := func(line, col int, fieldPath, format string, args ...any) Problem {
		return Problem{File: file, Line: max(line, 1), Column: max(col, 1), Field: fieldPath, Message: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileBytes {
		return nil, []Problem{at(1, 1, "", "%s", tooBig(int64(len(data))))}
	}
	docs, err := yamldoc.Documents(data)
	if err != nil {
		line := syntaxErrorLine(data, err)
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.TrimSpace(yamlLineRE.ReplaceAllString(msg, ""))
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, ":"), " ")
		return nil, []Problem{at(line, 1, "", "invalid YAML: %s", msg)}
	}
	if len(docs) == 0 {
		return nil, []Problem{at(1, 1, "", "file is empty: expected one EvaTenant")}
	}
	var problems []Problem
	for _, extra := range docs[1:] {
		problems = append(problems, at(extra.Line, extra.Column, "",
			"a tenant file holds exactly one EvaTenant; found another document here (split it into its own <CODE>.yaml)"))
	}
	root := docs[0]
	t := &Tenant{File: file, Sum: sha256.Sum256(data), dec: newDecoder(), doc: pos(root)}
	if root.Kind != yaml.MappingNode {
		return nil, append(problems, at(root.Line, root.Column, "", "expected an EvaTenant object, got %s", describe(root)))
	}
	t.checkFileOnlyRules(root)
	value, _ := t.dec.decode(root, reflect.TypeFor[evav1.EvaTenant](), nil)

	obj := &evav1.EvaTenant{}
	raw, err := json.Marshal(value)
	if err == nil {
		err = json.Unmarshal(raw, obj)
	}
	if err != nil {
		// The decoder only keeps well-typed values, so this means a bug, not bad input.
		problems = append(problems, at(root.Line, root.Column, "", "internal decoding error: %v", err))
		return nil, append(problems, t.structural()...)
	}
	t.Object = obj
	problems = append(problems, t.structural()...)
	for _, e := range catalog.Validate(obj) {
		if t.isBroken(e.Field) {
			continue // already reported as a structural problem
		}
		line, col := t.Position(e.Field)
		problems = append(problems, at(line, col, e.Field, "%s", errorDetail(e)))
	}
	return t, problems
}

func (t *Tenant) structural() []Problem {
	out := make([]Problem, 0, len(t.dec.problems))
	for _, p := range t.dec.problems {
		out = append(out, Problem{File: t.File, Line: max(p.pos.line, 1), Column: max(p.pos.column, 1), Field: p.path, Message: p.message})
	}
	return out
}

// isBroken reports whether a path, or one of its parents, was dropped for a
// structural problem.
func (t *Tenant) isBroken(path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if t.dec.broken[p] {
			return true
		}
	}
	return false
}

// errorDetail renders a field error without repeating its path.
func errorDetail(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeRequired:
		return "required: " + e.Detail
	case field.ErrorTypeNotSupported:
		return fmt.Sprintf("unsupported value %s: %s", valueText(e.BadValue), e.Detail)
	case field.ErrorTypeDuplicate:
		return "duplicate: " + e.Detail
	case field.ErrorTypeTooLong:
		return e.ErrorBody()
	case field.ErrorTypeForbidden:
		return e.Detail
	}
	if _, omitted := e.BadValue.(field.OmitValueType); omitted || e.BadValue == "" || e.BadValue == nil {
		return e.Detail
	}
	return fmt.Sprintf("%s: %s", valueText(e.BadValue), e.Detail)
}

// valueText shows a rejected value in a message: quoted, escaped and shortened, since
// it comes from the file and may be hostile.
func valueText(v any) string {
	switch x := v.(type) {
	case string:
		return safetext.Value(x)
	case fmt.Stringer:
		return safetext.Value(x.String())
	}
	if reflect.ValueOf(v).Kind() == reflect.String {
		return safetext.Value(fmt.Sprint(v))
	}
	return safetext.Limit(fmt.Sprint(v), safetext.MaxValue)
}

// syntaxErrorLine finds the line of a YAML syntax error. The parser's own line number
// is sometimes that of the enclosing construct, so the line is the first one at which
// the file's prefix fails to parse with the same message; the parser's number is the
// fallback.
func syntaxErrorLine(data []byte, err error) int {
	reported := 1
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		reported, _ = strconv.Atoi(m[1])
	}
	want := yamlLineRE.ReplaceAllString(err.Error(), "")
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 2000 {
		return reported // not worth quadratic work on a huge broken file
	}
	var prefix []byte
	for i, l := range lines {
		prefix = append(prefix, l...)
		if _, perr := yamldoc.Documents(prefix); perr != nil && yamlLineRE.ReplaceAllString(perr.Error(), "") == want {
			return i + 1
		}
	}
	return reported
}

// ProblemAt builds a problem about a field of the tenant (for checks made outside this
// package, such as the chart schemas), positioned at the field or the nearest
// enclosing one the file sets, and made safe to print like every other problem.
func (t *Tenant) ProblemAt(fieldPath, message string) Problem {
	line, col := t.Position(fieldPath)
	return Problem{File: t.File, Line: max(line, 1), Column: max(col, 1), Field: fieldPath, Message: message}.clean()
}
