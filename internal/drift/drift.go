// Package drift tells whether an object in the cluster still holds what the operator
// applied to it, from a copy of it (the operator's informer cache's, or one read from the
// API server when the cache keeps less than is applied), so that an Active tenant whose
// objects nobody touched costs no API write at its periodic check.
//
// The comparison is exact and therefore safe: an object equal to what is applied needs
// no apply. It is not complete: fields the API server adds (defaults) make an untouched
// object differ. The caller settles those cases with a server-side dry run of the apply
// (what the object would become) compared the same way.
package drift

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Find returns the path of the first field (keys in sorted order) where live does not
// hold exactly what desired holds ("spec.hard.cpu", "metadata.labels.tier",
// "spec.ingress[0].from"), or "" when it does. Both are objects in their JSON form
// (unstructured maps), best made canonical by Canonical first.
//
// apiVersion, kind (the caller found live by them) and status are not compared. Of the
// metadata, only labels and annotations are, and live may carry more of them than
// desired (other controllers' own). Everything else must be equal: a map with the same
// keys, a list with the same items in order. Numbers of different Go types are equal
// when their values are.
func Find(desired, live map[string]any) string {
	for _, k := range slices.Sorted(maps.Keys(desired)) {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			if p := metadata(desired[k], live[k]); p != "" {
				return p
			}
			continue
		}
		if p := value(k, desired[k], live[k]); p != "" {
			return p
		}
	}
	for _, k := range slices.Sorted(maps.Keys(live)) {
		switch k {
		case "apiVersion", "kind", "status", "metadata":
			continue
		}
		if _, ok := desired[k]; !ok {
			return k
		}
	}
	return ""
}

// metadata compares labels and annotations: every desired one present in live with the
// same value.
func metadata(desired, live any) string {
	d, _ := desired.(map[string]any)
	l, _ := live.(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		dm, _ := d[field].(map[string]any)
		lm, _ := l[field].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(dm)) {
			if lv, ok := lm[k]; !ok || lv != dm[k] {
				return "metadata." + field + "." + k
			}
		}
	}
	return ""
}

// value compares one value exactly.
func value(path string, desired, live any) string {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok || len(l) != len(d) {
			return path
		}
		for _, k := range slices.Sorted(maps.Keys(d)) {
			lv, ok := l[k]
			if !ok {
				return path + "." + k
			}
			if p := value(path+"."+k, d[k], lv); p != "" {
				return p
			}
		}
		return ""
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return path
		}
		for i := range d {
			if p := value(path+"["+strconv.Itoa(i)+"]", d[i], l[i]); p != "" {
				return p
			}
		}
		return ""
	}
	if desired == live {
		return ""
	}
	if dn, ok := number(desired); ok {
		if ln, ok := number(live); ok && dn == ln {
			return ""
		}
	}
	return path
}

// number returns v as a float64 when it is a Go number (JSON decoders give int64 or
// float64; typed conversions int32 and the like).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		if math.IsNaN(n) {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// Canonical returns obj as the Go type of its kind prints it: quantities, durations and
// the like in canonical form, empty optional fields left out. A rendered object and the
// cache's copy of it (read through the same type, see AsRead) then compare by meaning,
// not by notation. ok is false when the scheme has no type for gvk, or obj does not fit it
// or holds a field the type does not know (an environment patch can add one): a copy read
// through the type would not show that field, so it must be compared as it is.
func Canonical(s *runtime.Scheme, gvk schema.GroupVersionKind, obj map[string]any) (map[string]any, bool) {
	return throughType(s, gvk, obj, true)
}

// AsRead returns an object the API server returned as the cache holds it: read through
// its kind's Go type, fields the type does not know dropped. ok is false when the scheme
// has no type for gvk or obj does not fit it; obj is then returned as it is.
func AsRead(s *runtime.Scheme, gvk schema.GroupVersionKind, obj map[string]any) (map[string]any, bool) {
	return throughType(s, gvk, obj, false)
}

func throughType(s *runtime.Scheme, gvk schema.GroupVersionKind, obj map[string]any, strict bool) (map[string]any, bool) {
	typed, err := s.New(gvk)
	if err != nil {
		return obj, false
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, typed, strict); err != nil {
		return obj, false
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return obj, false
	}
	return out, true
}
