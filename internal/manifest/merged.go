package manifest

import (
	"bytes"
	"fmt"
	"reflect"
)

// A map-only merge patch (maps and scalars, see overlay's merge.go) applied to a typed
// object: the common "set this field on every HelmRelease" patch of an environment. The
// object is written straight from its typed form with the patch merged in while writing,
// byte for byte what Encode writes for the patch merged into ToMap(obj) by a recursive
// map merge (a scalar replaces, a map merges into a map or fills a missing field). The
// plain form and its encoding, most of a patched fleet's render otherwise, are skipped.
//
// Only merges whose outcome can be read off the typed fields are taken here: a patch map
// meeting a struct or a missing (or null) field, a patch scalar meeting a scalar or a
// missing field. A patch reaching into a typed map or a list, or into plain data (Helm
// values), is left to the caller's plain path (CanMergeTyped says false); so is a
// patch map meeting a scalar, which the merge refuses.

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

// CanMergeTyped reports whether EncodeTypedMerged can write obj with patch merged in.
// It looks only along the patch's paths.
func CanMergeTyped(obj any, patch map[string]any) bool {
	v, err := structOf(obj)
	if err != nil || len(patch) == 0 {
		return false
	}
	e := getArena(nil)
	defer e.release()
	ok, err := e.canMerge(v, true, patch)
	return err == nil && ok
}

func (e *arena) canMerge(v reflect.Value, top bool, patch map[string]any) (bool, error) {
	for k, pv := range patch {
		val, found, err := e.field(v, top, k)
		if err != nil || !found {
			if err != nil {
				return false, err
			}
			continue // a missing field is filled
		}
		switch mergeStepOf(val, pv) {
		case mergeRefused:
			return false, nil
		case mergeInto:
			if ok, err := e.canMerge(val.v, false, pv.(map[string]any)); err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
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
			for fv.Kind() == reflect.Pointer && !fv.IsNil() {
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				if val, found, err := e.field(fv, top, name); err != nil || found {
					return val, found, err
				}
			}
			continue
		}
		if f.name != name || f.omitempty && isEmpty(fv) || f.omitzero && fv.IsZero() {
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

// EncodeTypedMerged writes a typed object with a map-only merge patch merged in, as
// Encode writes the merged plain form. The patch must be one CanMergeTyped accepts, or
// nil. known is as for EncodeTypedKnown.
func EncodeTypedMerged(buf *bytes.Buffer, obj any, patch map[string]any, known KnownJSON) error {
	v, err := structOf(obj)
	if err != nil {
		return err
	}
	e := getArena(known)
	defer e.release()
	fields, err := e.collect(v, true)
	if err != nil {
		return err
	}
	if len(fields) == 0 && len(patch) == 0 {
		buf.WriteString("{}\n")
		return nil
	}
	return e.writeMerged(buf, fields, patch, 0)
}

// writeMerged writes a struct's fields and a patch map's keys in sorted order, merging
// where both have a key.
func (e *arena) writeMerged(buf *bytes.Buffer, fields []namedValue, patch map[string]any, depth int) error {
	keys := sortedKeys(patch)
	for i, j := 0, 0; i < len(fields) || j < len(keys); {
		indent(buf, depth)
		switch {
		case j == len(keys) || i < len(fields) && fields[i].name < keys[j]:
			if err := e.writeTypedEntry(buf, fields[i].name, fields[i].value, depth); err != nil {
				return err
			}
			i++
		case i == len(fields) || keys[j] < fields[i].name:
			if err := writeEntry(buf, keys[j], patch[keys[j]], depth); err != nil {
				return err
			}
			j++
		default:
			if err := e.writeMergedEntry(buf, keys[j], fields[i].value, patch[keys[j]], depth); err != nil {
				return err
			}
			i++
			j++
		}
	}
	return nil
}

func (e *arena) writeMergedEntry(buf *bytes.Buffer, key string, val value, pv any, depth int) error {
	switch mergeStepOf(val, pv) {
	case mergeReplace:
		return writeEntry(buf, key, pv, depth)
	case mergeInto:
		mark := len(e.items)
		defer func() { e.items = e.items[:mark] }()
		fields, err := e.collect(val.v, false)
		if err != nil {
			return err
		}
		writeString(buf, key)
		buf.WriteString(":\n")
		return e.writeMerged(buf, fields, pv.(map[string]any), depth+1)
	}
	return fmt.Errorf("%s: the patch cannot be merged into the typed object (CanMergeTyped was not asked)", key)
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
