package chartcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aidonow/eva/internal/didyoumean"
)

// Violation is one way a release's values fail its chart: a schema violation at a
// place in the values, or a template error (with no place).
type Violation struct {
	// Path is the place in the values, as JSON pointer tokens (nil for the root or
	// when unknown).
	Path []string
	// Message says what is wrong, on one line.
	Message string
	// Template is set for template errors, which Helm reports without a values path.
	Template bool
}

// schemaError marks a failure of values.schema.json validation, keeping Helm's text.
type schemaError struct{ err error }

func (e *schemaError) Error() string { return e.err.Error() }
func (e *schemaError) Unwrap() error { return e.err }

// templateError marks a failure while rendering the chart's templates.
type templateError struct{ err error }

func (e *templateError) Error() string { return e.err.Error() }
func (e *templateError) Unwrap() error { return e.err }

// Violations checks a release exactly as Check does (the same Helm SDK calls and the
// same cache per chart and values) and returns each problem on its own, with the
// values path of schema violations, so a caller can point at the line of a tenant file
// that set the value. It errs only when the release cannot be checked at all.
func (c *Checker) Violations(r Release) ([]Violation, error) {
	err := c.check(r)
	if err == nil {
		return nil, nil
	}
	var se *schemaError
	if errors.As(err, &se) {
		var schema []byte
		if ch, cerr := c.chartFor(r.Chart, r.Version); cerr == nil {
			schema = ch.Schema
		}
		return unknownKeys(parseSchemaError(se.err.Error()), schema), nil
	}
	var te *templateError
	if errors.As(err, &te) {
		return []Violation{{Message: oneLine(te.err.Error()), Template: true}}, nil
	}
	return nil, err
}

// schemaLineRE matches one line of a jsonschema (v6) validation error as Helm prints
// it: "- at '/image/repository': got number, want string". The pointer is quoted as
// the library quotes it: Go escapes, with ' escaped and " not.
var schemaLineRE = regexp.MustCompile(`^(?:- )?at '((?:[^'\\]|\\.)*)': (.*)$`)

// parseSchemaError splits Helm's schema error text into violations. Lines that do not
// name a place (the chart name, the summary) are kept as messages with no path only
// when nothing else was found, so no failure is ever lost.
func parseSchemaError(text string) []Violation {
	var out, rest []Violation
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasSuffix(line, "in the following chart(s):") {
			continue
		}
		m := schemaLineRE.FindStringSubmatch(line)
		if m == nil {
			rest = append(rest, Violation{Message: line})
			continue
		}
		ptr, ok := unquotePointer(m[1])
		if !ok {
			rest = append(rest, Violation{Message: line})
			continue
		}
		out = append(out, Violation{Path: splitPointer(ptr), Message: m[2]})
	}
	if len(out) == 0 {
		if len(rest) == 0 {
			return []Violation{{Message: oneLine(text)}}
		}
		return rest
	}
	return out
}

// unquotePointer undoes the library's quoting of a JSON pointer.
func unquotePointer(q string) (string, bool) {
	q = strings.ReplaceAll(q, `\'`, `'`)
	q = strings.ReplaceAll(q, `"`, `\"`)
	s, err := strconv.Unquote(`"` + q + `"`)
	return s, err == nil
}

// splitPointer splits a JSON pointer into unescaped tokens.
func splitPointer(ptr string) []string {
	if ptr == "" {
		return nil
	}
	tokens := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// additionalRE matches the schema library's message for keys a closed object does not
// allow: "additional properties 'replicaCont', 'x' not allowed".
var additionalRE = regexp.MustCompile(`^additional propert(?:y|ies) ((?:'(?:[^'\\]|\\.)*'(?:, )?)+) not allowed$`)

// quotedRE matches one quoted key of such a message.
var quotedRE = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)

// unknownKeys turns each "additional properties not allowed" violation, which the
// library reports at the enclosing object, into one violation per unknown key at the
// key itself, with the key the schema has that was most likely meant.
func unknownKeys(vs []Violation, schema []byte) []Violation {
	var out []Violation
	for _, v := range vs {
		m := additionalRE.FindStringSubmatch(v.Message)
		if m == nil {
			out = append(out, v)
			continue
		}
		known := schemaKeys(schema, v.Path)
		for _, q := range quotedRE.FindAllStringSubmatch(m[1], -1) {
			key, ok := unquotePointer(q[1])
			if !ok {
				key = q[1]
			}
			msg := "no such key"
			if near := didyoumean.Nearest(key, known); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			out = append(out, Violation{Path: append(slices.Clone(v.Path), key), Message: msg})
		}
	}
	return out
}

// schemaKeys lists the keys the schema's object at path declares (through properties
// and, for list indexes, items).
func schemaKeys(schema []byte, path []string) []string {
	var node map[string]any
	if json.Unmarshal(schema, &node) != nil {
		return nil
	}
	for _, token := range path {
		if _, err := strconv.Atoi(token); err == nil {
			if items, ok := node["items"].(map[string]any); ok {
				node = items
				continue
			}
		}
		props, _ := node["properties"].(map[string]any)
		next, ok := props[token].(map[string]any)
		if !ok {
			return nil
		}
		node = next
	}
	props, _ := node["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
