package manifest

import (
	"bytes"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// ToMap converts a typed object into the JSON data model and strips what a rendered
// manifest must not carry: status, an empty creationTimestamp.
// It builds what runtime.DefaultUnstructuredConverter builds, with cached field plans
// (see toPlain).
func ToMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		m := runtime.DeepCopyJSON(u.UnstructuredContent())
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

// Clean removes status and null creationTimestamp from an object in place.
func Clean(m map[string]any) {
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec") // an empty spec (a Namespace's) says nothing
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		if ts, ok := meta["creationTimestamp"]; ok && ts == nil {
			delete(meta, "creationTimestamp")
		}
	}
	cleanTemplates(m)
}

// cleanTemplates removes null creationTimestamp from nested object templates (a Job's
// pod template carries its own metadata).
func cleanTemplates(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, item := range x {
			if k == "creationTimestamp" && item == nil {
				delete(x, k)
				continue
			}
			cleanTemplates(item)
		}
	case []any:
		for _, item := range x {
			cleanTemplates(item)
		}
	}
}
