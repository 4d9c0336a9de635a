package manifest

// This file converts typed objects into the JSON data model (what unstructured objects
// hold and Encode writes): toPlain, by the field plans of fields.go.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// toPlain converts a typed struct into the JSON data model: the same maps
// runtime.DefaultUnstructuredConverter builds (integers as int64, floating-point
// numbers as float64, byte slices in base64, what a type's own JSON encoding writes
// decoded as the converter decodes it), with cached field plans instead of the
// converter's generic reflection, which dominated rendering. The top-level status is
// left out, as Clean would drop it. FuzzToMapMatchesConverter holds the two to the same
// maps. One difference is deliberate, on a kind of field no rendered type has: an
// unsigned integer field is int64 here, where the converter keeps a uint64 that
// runtime.DeepCopyJSON (and so Unstructured.DeepCopy) panics on.
func toPlain(v reflect.Value) (map[string]any, error) {
	return plainStruct(v, true)
}

// plainStruct is a struct's JSON fields as a map.
func plainStruct(v reflect.Value, top bool) (map[string]any, error) {
	fields := fieldsOf(v.Type())
	m := make(map[string]any, kept(v, fields))
	if err := addFields(m, v, fields, top); err != nil {
		return nil, err
	}
	return m, nil
}

// kept counts the fields of v that omitempty and omitzero keep (an inline struct as
// one): the size of its map, which sized for every field of a large struct (a PodSpec's
// forty) would be mostly empty space.
func kept(v reflect.Value, fields []fieldInfo) int {
	n := 0
	for i := range fields {
		if !fields[i].omits(v.Field(fields[i].index)) {
			n++
		}
	}
	return n
}

// addFields adds a struct's JSON fields to m, an inline struct's among them.
func addFields(m map[string]any, v reflect.Value, fields []fieldInfo, top bool) error {
	for i := range fields {
		f := &fields[i]
		fv := v.Field(f.index)
		if f.omits(fv) {
			continue
		}
		if f.inline {
			if inner, ok := inlined(fv); ok {
				if err := addFields(m, inner, fieldsOf(inner.Type()), top); err != nil {
					return err
				}
			}
			continue
		}
		if top && f.name == "status" {
			continue
		}
		var p any
		var err error
		switch {
		case fv.Kind() != reflect.Pointer:
			p, err = plainValue(fv, f.kind)
		case !fv.IsNil():
			p, err = plainValue(fv.Elem(), f.elemKind)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		m[f.name] = p
	}
	return nil
}

// plainValue is a value in the JSON data model; k is how v's type converts (kindOf).
func plainValue(v reflect.Value, k typeKind) (any, error) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		// As the converter: nil is null, anything else converts as what it points to
		// (a MarshalJSON on either receiver included).
		if v.IsNil() {
			return nil, nil
		}
		v = v.Elem()
		return plainValue(v, kindOf(v.Type()))
	}
	if k != kindPlain {
		return plainOwnJSON(v, k)
	}
	switch v.Kind() {
	case reflect.Struct:
		return plainStruct(v, false)
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map with %s keys has no JSON form", v.Type().Key())
		}
		ek := kindOf(v.Type().Elem())
		m := make(map[string]any, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			p, err := plainValue(iter.Value(), ek)
			if err != nil {
				return nil, err
			}
			m[iter.Key().String()] = p
		}
		return m, nil
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return base64.StdEncoding.EncodeToString(v.Bytes()), nil
		}
		ek := kindOf(v.Type().Elem())
		list := make([]any, v.Len())
		for i := range list {
			p, err := plainValue(v.Index(i), ek)
			if err != nil {
				return nil, err
			}
			list[i] = p
		}
		return list, nil
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return v.Float(), nil
	}
	// An array among them: the converter has no form for one either.
	return nil, fmt.Errorf("cannot convert a value of type %s", v.Type())
}

// plainOwnJSON is the plain form of a value (not a pointer) whose type has its own JSON
// encoding: what its MarshalJSON writes (null: nil), decoded as the converter decodes
// it. The common types are converted directly, as the converter converts them with
// their ToUnstructured.
func plainOwnJSON(v reflect.Value, k typeKind) (any, error) {
	if !v.CanInterface() {
		return nil, fmt.Errorf("cannot convert a %s reached through an unexported field", v.Type())
	}
	switch k {
	case kindQuantity:
		q := v.Interface().(resource.Quantity)
		return q.String(), nil
	case kindDuration:
		return time.Duration(v.Field(0).Int()).String(), nil
	case kindIntOrString:
		x := v.Interface().(intstr.IntOrString)
		if x.Type == intstr.Int {
			return int64(x.IntVal), nil
		}
		if utf8.ValidString(x.StrVal) {
			return x.StrVal, nil
		}
		// Not UTF-8: through its MarshalJSON, as the converter does, which replaces each
		// invalid byte with U+FFFD.
	case kindTime:
		x := v.Interface().(metav1.Time)
		if x.IsZero() {
			return nil, nil
		}
		return x.UTC().Format(time.RFC3339), nil
	case kindRawJSON:
		// Its MarshalJSON writes Raw, or null when empty: Raw is decoded without the
		// encoder's copy and validation pass (the decoder validates it too).
		raw := v.Interface().(apiextensionsv1.JSON).Raw
		if len(raw) == 0 {
			return nil, nil
		}
		return decodeJSON(raw)
	}
	m := v.Interface()
	if k == kindPtrMarshaler {
		if !v.CanAddr() {
			c := reflect.New(v.Type())
			c.Elem().Set(v)
			v = c.Elem()
		}
		m = v.Addr().Interface()
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return decodeJSON(raw)
}

// decodeJSON decodes JSON as the converter decodes what a MarshalJSON wrote: whole
// numbers as int64, other numbers as float64.
func decodeJSON(raw []byte) (any, error) {
	var plain any
	if err := utiljson.Unmarshal(raw, &plain); err != nil {
		return nil, err
	}
	return plain, nil
}
