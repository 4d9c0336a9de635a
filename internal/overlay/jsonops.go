package overlay

import (
	"encoding/json"
	"strconv"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// A JSON 6902 patch made only of add, replace and remove operations is applied directly
// on the object's map: the maps and lists along each path are copied (the rest is
// shared with the object, which is not changed) and the operation is done there, without
// encoding the object to JSON for the json-patch library and decoding its answer, which
// made an environment with a few JSON patches (the air-gap one) render twice as slowly
// as one without. The library stays the reference: an operation the direct path does
// not take (move, copy, test) is never applied directly, and any case it does not
// handle (a missing parent or key, a position out of range or negative, the document
// root) is handed to the library, which applies or reports it as before.
// TestJSONOpsMatchLibrary and FuzzJSONOpsMatchLibrary hold the two paths to the same
// JSON. One difference is deliberate: the numbers a patch does not touch keep their Go
// type (int64 from the typed object), where the library's JSON round trip turns them all
// into float64, which loses integers above 2^53 and is written in exponent form from
// 1e15 on.

// jsonOp is one add, replace or remove operation, decoded once.
type jsonOp struct {
	kind string
	// path is the operation's JSON pointer, split and unescaped.
	path []string
	// value is the operation's value as JSON data (add and replace).
	value any
}

// directOps returns the operations of a patch the direct path applies, or nil when one
// of them is not an add, replace or remove of a path below the document root.
func directOps(ops jsonpatch.Patch) []jsonOp {
	out := make([]jsonOp, 0, len(ops))
	for _, op := range ops {
		kind := op.Kind()
		if kind != "add" && kind != "replace" && kind != "remove" {
			return nil
		}
		pointer, err := op.Path()
		if err != nil || !strings.HasPrefix(pointer, "/") {
			return nil
		}
		o := jsonOp{kind: kind, path: splitPointer(pointer)}
		if kind != "remove" {
			raw, ok := op["value"]
			if !ok || raw == nil {
				return nil // the library reports a missing value
			}
			if err := json.Unmarshal(*raw, &o.value); err != nil {
				return nil
			}
		}
		out = append(out, o)
	}
	return out
}

// splitPointer splits a JSON pointer below the document root ("/a/b~1c") into its
// unescaped keys.
func splitPointer(pointer string) []string {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, part := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return parts
}

// applyOps applies the operations to obj, or returns false when one of them does not
// apply as the direct path takes it (the library is then asked).
func applyOps(obj map[string]any, ops []jsonOp) (map[string]any, bool) {
	var doc any = obj
	for i := range ops {
		var ok bool
		if doc, ok = applyOp(doc, ops[i].path, &ops[i]); !ok {
			return nil, false
		}
	}
	out, ok := doc.(map[string]any)
	return out, ok
}

// applyOp returns doc with op applied at path (relative to doc), copying what it changes.
func applyOp(doc any, path []string, op *jsonOp) (any, bool) {
	key, last := path[0], len(path) == 1
	switch c := doc.(type) {
	case map[string]any:
		if c == nil {
			return nil, false // null in JSON: the library refuses it
		}
		cur, exists := c[key]
		if !last {
			if !exists {
				return nil, false
			}
			child, ok := applyOp(cur, path[1:], op)
			if !ok {
				return nil, false
			}
			out := copyMap(c)
			out[key] = child
			return out, true
		}
		if !exists && op.kind != "add" {
			return nil, false
		}
		out := copyMap(c)
		if op.kind == "remove" {
			delete(out, key)
		} else {
			out[key] = copyJSON(op.value)
		}
		return out, true
	case []any:
		if c == nil {
			return nil, false
		}
		i, ok := position(key, len(c), last && op.kind == "add")
		if !ok {
			return nil, false
		}
		if !last {
			child, ok := applyOp(c[i], path[1:], op)
			if !ok {
				return nil, false
			}
			out := append([]any(nil), c...)
			out[i] = child
			return out, true
		}
		out := make([]any, 0, len(c)+1)
		switch op.kind {
		case "add":
			out = append(append(append(out, c[:i]...), copyJSON(op.value)), c[i:]...)
		case "replace":
			out = append(append(append(out, c[:i]...), copyJSON(op.value)), c[i+1:]...)
		case "remove":
			out = append(append(out, c[:i]...), c[i+1:]...)
		}
		return out, true
	}
	return nil, false
}

// position reads a list position of a JSON pointer: digits without a leading zero,
// within the list (or at its end, or "-", where an add inserts).
func position(key string, n int, insert bool) (int, bool) {
	if key == "-" {
		return n, insert
	}
	if key == "" || (len(key) > 1 && key[0] == '0') || strings.TrimLeft(key, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.Atoi(key)
	if err != nil || i > n || (i == n && !insert) {
		return 0, false
	}
	return i, true
}

// copyJSON copies the maps and lists of a JSON value, so objects patched with the same
// value never share it.
func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyJSON(e)
		}
		return out
	}
	return v
}
