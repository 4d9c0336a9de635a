package manifest

import (
	"encoding/base64"
	"fmt"
	"reflect"
)

// toPlain converts a typed struct into the JSON data model with cached field plans: the
// same maps runtime.DefaultUnstructuredConverter builds (numbers as int64 where integral,
// float64 otherwise; byte slices base64), without the converter's generic reflection,
// which dominated rendering an environment's patches.
func toPlain(v reflect.Value) (map[string]any, error) {
	e := getArena()
	defer e.release()
	return e.plainStruct(v, true)
}

// plainStruct is a struct's fields as a map, with what collect leaves out left out.
func (e *arena) plainStruct(v reflect.Value, top bool) (map[string]any, error) {
	mark := len(e.items)
	defer func() { e.items = e.items[:mark] }()
	fields, err := e.collect(v, top)
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, len(fields))
	for _, f := range fields {
		p, err := e.plainOf(f.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		m[f.name] = p
	}
	return m, nil
}

// plainOf is a resolved value in the JSON data model.
func (e *arena) plainOf(val value) (any, error) {
	if val.isPlain {
		return val.plain, nil
	}
	v := val.v
	switch v.Kind() {
	case reflect.Struct:
		return e.plainStruct(v, false)
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map with %s keys has no JSON form", v.Type().Key())
		}
		m := make(map[string]any, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			p, err := e.plainElem(iter.Value())
			if err != nil {
				return nil, err
			}
			m[iter.Key().String()] = p
		}
		return m, nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return base64.StdEncoding.EncodeToString(v.Bytes()), nil
		}
		list := make([]any, v.Len())
		for i := range list {
			p, err := e.plainElem(v.Index(i))
			if err != nil {
				return nil, err
			}
			list[i] = p
		}
		return list, nil
	}
	return scalarOf(v)
}

// plainElem is a map value or list item in the JSON data model.
func (e *arena) plainElem(v reflect.Value) (any, error) {
	r, err := e.resolve(v)
	if err != nil {
		return nil, err
	}
	return e.plainOf(r)
}
