package manifest

import (
	"math"
	"unicode/utf8"
)

// KnownJSON maps raw JSON held by a typed object (Helm values, by the address of the
// raw bytes' first byte) to the plain data it was marshalled from, so that writing the
// object does not decode the JSON again. Only data JSONFaithful accepts may be put in:
// it writes exactly as its decoded JSON would.
type KnownJSON map[*byte]any

// decoded returns a copy of known plain data as decoding its JSON gives it: integers
// (and whole floats, which JSONFaithful bounds below 1e15) as int64, other numbers as
// float64, fresh maps and lists. v must be data JSONFaithful accepts.
func decoded(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case float64:
		if x == math.Trunc(x) {
			return int64(x)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[k] = decoded(item)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = decoded(item)
		}
		return out
	}
	return v
}

// lookup returns the plain data known for raw.
func (k KnownJSON) lookup(raw []byte) (any, bool) {
	if len(k) == 0 || len(raw) == 0 {
		return nil, false
	}
	v, ok := k[&raw[0]]
	return v, ok
}

// JSONFaithful reports whether plain data writes exactly as the result of marshalling
// it to JSON and decoding that back would: only the JSON data model's types (maps with
// string keys, lists, strings, booleans, nil, int, int64 and float64), no nil map or
// list (null once decoded), valid UTF-8 throughout (marshalling replaces what is not),
// no whole float of 1e15 or more (decoded back as an integer, written differently; the
// bound is conservative), and no null creationTimestamp (which writing, as ToMap,
// leaves out of decoded data).
func JSONFaithful(v any) bool {
	switch x := v.(type) {
	case nil, bool, int, int64:
		return true
	case string:
		return utf8.ValidString(x)
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0) && (x != math.Trunc(x) || math.Abs(x) < 1e15)
	case map[string]any:
		if x == nil {
			return false
		}
		for k, item := range x {
			if !utf8.ValidString(k) || !JSONFaithful(item) || item == nil && k == "creationTimestamp" {
				return false
			}
		}
		return true
	case []any:
		if x == nil {
			return false
		}
		for _, item := range x {
			if !JSONFaithful(item) {
				return false
			}
		}
		return true
	}
	return false
}
