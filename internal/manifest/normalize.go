package manifest

// This file turns objects into the plain data a manifest is written from (ToMap, Clean)
// and writes a typed object that way (EncodeObject).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// ToMap converts an object into the JSON data model, a copy of its own, and strips what
// a rendered manifest must not carry (Clean). For a typed object it builds what
// runtime.DefaultUnstructuredConverter builds (see toPlain).
func ToMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		// A copy through JSON: whole numbers come back as int64 whatever their Go type
		// (runtime.DeepCopyJSON panics on an int), and what has no JSON form is an error.
		raw, err := json.Marshal(u.UnstructuredContent())
		if err != nil {
			return nil, fmt.Errorf("converting %T: %w", obj, err)
		}
		m := map[string]any{}
		if err := utiljson.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("converting %T: %w", obj, err)
		}
		Clean(m)
		return m, nil
	}
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("converting %T: not a struct", obj)
	}
	m, err := toPlain(v)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	Clean(m)
	return m, nil
}

// EncodeObject writes a typed object as Encode writes its plain form (ToMap): the one
// way an object Eva builds is written.
func EncodeObject(buf *bytes.Buffer, obj runtime.Object) error {
	m, err := ToMap(obj)
	if err != nil {
		return err
	}
	return Encode(buf, m)
}

// Clean removes from an object, in place, what a rendered manifest must not carry: its
// status, every null creationTimestamp (the object's own and those of the object
// templates it holds, a Job's pod template's among them), and then a spec left empty
// (a Namespace's), which says nothing.
func Clean(m map[string]any) {
	delete(m, "status")
	dropNullTimestamps(m)
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
}

// dropNullTimestamps removes every null creationTimestamp from plain data.
func dropNullTimestamps(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, item := range x {
			if k == "creationTimestamp" && item == nil {
				delete(x, k)
				continue
			}
			dropNullTimestamps(item)
		}
	case []any:
		for _, item := range x {
			dropNullTimestamps(item)
		}
	}
}
