package manifest

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// nullsInTypes holds null creationTimestamps the ways a typed object can: a nil typed map
// as a field, and nil maps and slices as values of typed maps.
type nullsInTypes struct {
	Kind string `json:"kind"`
	Meta struct {
		CreationTimestamp map[string]string `json:"creationTimestamp"`
		Name              string            `json:"name"`
	} `json:"metadata"`
	Data  map[string][]byte `json:"data"`
	Extra map[string]any    `json:"extra"`
	Spec  struct {
		CreationTimestamp []string `json:"creationTimestamp"`
	} `json:"spec"`
}

func (o *nullsInTypes) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (o *nullsInTypes) DeepCopyObject() runtime.Object   { c := *o; return &c }

// TestToMapLeavesOutNullCreationTimestamps checks ToMap where a null creationTimestamp
// is a nil typed map or slice, not a nil plain value; and that a top-level spec holding
// nothing else is left out.
func TestToMapLeavesOutNullCreationTimestamps(t *testing.T) {
	obj := &nullsInTypes{Kind: "Test",
		Data:  map[string][]byte{"creationTimestamp": nil, "key": []byte("v")},
		Extra: map[string]any{"creationTimestamp": map[string]any(nil), "other": []any(nil)}}
	obj.Meta.Name = "n"
	var buf bytes.Buffer
	if err := EncodeObject(&buf, obj); err != nil {
		t.Fatal(err)
	}
	if out := buf.Bytes(); bytes.Contains(out, []byte("creationTimestamp")) || bytes.Contains(out, []byte("spec")) {
		t.Errorf("a null creationTimestamp or an empty spec is written:\n%s", out)
	}
}
