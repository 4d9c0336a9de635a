package manifest

import (
	"fmt"
	"reflect"
)

// The rules of a map-only strategic-merge patch (maps and scalars, see overlay's
// merge.go) on a typed object's fields, for Edits: what overlay's map merge does on the
// object's plain form (a scalar replaces, a map merges into a map or fills a missing
// field), read off the typed fields. Only what the typed form decides is taken: a patch
// map meeting a struct or a missing (or null) field, a patch scalar meeting a scalar or
// a missing field. A patch reaching into a typed map or a list, or into plain data (Helm
// values), and a patch map meeting a scalar (which the merge refuses) are left to the
// plain path.

// mergeStep is what a patch value does to a field.
type mergeStep int

const (
	mergeRefused mergeStep = iota // not decided on the typed form: take the plain path
	mergeReplace                  // the patch value is written in place of the field
	mergeInto                     // a patch map merges into a struct's fields
)

// mergeStepOf says what patch value pv does to a field holding val, mirroring the map
// merge on val's plain form.
func mergeStepOf(val value, pv any) mergeStep {
	_, patchIsMap := pv.(map[string]any)
	if val.isPlain {
		if val.plain == nil {
			return mergeReplace // a null field is filled, whatever the patch holds
		}
		switch val.plain.(type) {
		case map[string]any, []any:
			return mergeRefused
		}
		if patchIsMap {
			return mergeRefused
		}
		return mergeReplace
	}
	v := val.v
	switch v.Kind() {
	case reflect.Struct:
		if patchIsMap {
			return mergeInto
		}
		return mergeRefused
	case reflect.Map, reflect.Slice:
		if v.IsNil() {
			return mergeReplace // null in the plain form
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 && !patchIsMap {
			return mergeReplace // base64, a string
		}
		return mergeRefused
	case reflect.Array:
		return mergeRefused
	}
	if patchIsMap {
		return mergeRefused
	}
	return mergeReplace
}

// field is the value collect would list for the struct field named name (found false
// when collect leaves it out, but for an empty spec at the top), resolving that field
// alone: the other fields, Helm values among them, are not decoded.
func (e *arena) field(v reflect.Value, top bool, name string) (value, bool, error) {
	if top && name == "status" {
		return value{}, false, nil
	}
	fields := fieldsOf(v.Type())
	for i := range fields {
		f := &fields[i]
		fv := v.Field(f.index)
		if f.inline {
			if inner, ok := inlined(fv); ok {
				if val, found, err := e.field(inner, top, name); err != nil || found {
					return val, found, err
				}
			}
			continue
		}
		if f.name != name || f.omits(fv) {
			continue
		}
		r, err := e.resolveField(fv, f)
		if err != nil {
			return value{}, false, fmt.Errorf("%s: %w", name, err)
		}
		if name == "creationTimestamp" && isNull(r) {
			return value{}, false, nil
		}
		// An empty spec, which collect leaves out at the top, is found here as a
		// struct: a patch scalar meeting it is refused rather than merged (the plain
		// path decides), a patch map merges into it as it would fill it.
		return r, true, nil
	}
	return value{}, false, nil
}

func structOf(obj any) (reflect.Value, error) {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}, fmt.Errorf("nil object")
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("EncodeTyped needs a struct, got %s", v.Type())
	}
	return v, nil
}
