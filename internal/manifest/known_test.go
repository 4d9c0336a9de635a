package manifest

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type withValues struct {
	Kind   string                `json:"kind"`
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// writeBothWays writes an object holding v as raw JSON, once decoding the JSON and once
// from v known as plain data.
func writeBothWays(t *testing.T, v any) (decoded, known []byte) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	obj := &typedWithValues{withValues: withValues{Kind: "Test", Values: &apiextensionsv1.JSON{Raw: raw}}}
	return encodeKnown(t, obj, nil), encodeKnown(t, obj, KnownJSON{&raw[0]: v})
}

// encodeKnown writes obj as the renderer does, with the raw JSON in known as plain data.
func encodeKnown(t *testing.T, obj runtime.Object, known KnownJSON) []byte {
	t.Helper()
	m, err := ToMapKnown(obj, known)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestKnownValuesWriteAsDecodedJSON holds JSONFaithful to its promise: plain data it
// accepts writes, as known values, exactly as its JSON decoded would. The values are
// random trees of the JSON data model with the awkward leaves mixed in; each leaf the
// check refuses is shown to write differently indeed.
func TestKnownValuesWriteAsDecodedJSON(t *testing.T) {
	// Whole floats of 1e15 and more and null creationTimestamps, which JSONFaithful
	// refuses too, convert the same both ways: the copy of known values holds whole
	// numbers as int64, and Clean drops the nulls.
	refused := []any{
		"caf\xe9",                       // invalid UTF-8, replaced when marshalled
		map[string]any(nil), []any(nil), // null once decoded
		[]string{"a", "b"}, // not the data model: written as JSON flow
		map[string]any{"k\xff": 1},
	}
	for _, v := range refused {
		if JSONFaithful(v) {
			t.Errorf("JSONFaithful(%#v) is true", v)
			continue
		}
		if decoded, known := writeBothWays(t, map[string]any{"x": v}); bytes.Equal(decoded, known) {
			t.Errorf("%#v writes the same both ways: the check refuses it for nothing", v)
		}
	}
	leaves := []any{nil, true, false, 0, -7, int64(1) << 40, 3.25, math.Copysign(0, -1), 1e14, 999999999999999.0, 2.5e-7, 1.5e-300, math.MaxInt64,
		"", "plain", "needs: quoting", "yes", "1.0", "ünïcode ✓", "line\nbreak", "tab\there", "\u2028", "q\"uote"}
	rng := rand.New(rand.NewPCG(16, 2))
	var tree func(depth int) any
	tree = func(depth int) any {
		switch n := rng.IntN(6); {
		case depth < 4 && n == 0:
			list := []any{}
			for range rng.IntN(4) {
				list = append(list, tree(depth+1))
			}
			return list
		case depth < 4 && n <= 2:
			m := map[string]any{}
			for i := range rng.IntN(4) {
				if rng.IntN(8) == 0 {
					m["creationTimestamp"] = tree(depth + 1)
					continue
				}
				m[string(rune('a'+rng.IntN(5)))+leafKey(i)] = tree(depth + 1)
			}
			return m
		}
		return leaves[rng.IntN(len(leaves))]
	}
	faithful := 0
	for range 3000 {
		v := map[string]any{"root": tree(0)}
		if !JSONFaithful(v) {
			continue // a null creationTimestamp somewhere
		}
		faithful++
		if decoded, known := writeBothWays(t, v); !bytes.Equal(decoded, known) {
			t.Fatalf("known values write\n%s\ndecoded JSON writes\n%s", known, decoded)
		}
		plainBothWays(t, v)
	}
	if faithful < 1000 {
		t.Errorf("only %d of 3,000 random trees were faithful", faithful)
	}
}

// plainBothWays checks that the plain form of an object holding v as raw JSON is the
// same, Go types included, whether the JSON is decoded or v is known, and that the known
// form is a copy of its own.
func plainBothWays(t *testing.T, v map[string]any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	obj := &typedWithValues{withValues: withValues{Kind: "Test", Values: &apiextensionsv1.JSON{Raw: raw}}}
	viaJSON, err := ToMap(obj)
	if err != nil {
		t.Fatal(err)
	}
	viaKnown, err := ToMapKnown(obj, KnownJSON{&raw[0]: v})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viaJSON, viaKnown) {
		t.Fatalf("plain form from known values\n%#v\nfrom the decoded JSON\n%#v", viaKnown, viaJSON)
	}
	viaKnown["values"].(map[string]any)["root"] = "changed"
	if v["root"] == "changed" {
		t.Fatal("the plain form shares its maps with the known values")
	}
}

// typedWithValues is withValues as a runtime.Object, for ToMap.
type typedWithValues struct{ withValues }

func (o *typedWithValues) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (o *typedWithValues) DeepCopyObject() runtime.Object   { c := *o; return &c }

func leafKey(i int) string { return []string{"", "-key", " spaced", "1"}[i%4] }

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
	if out := encodeKnown(t, obj, nil); bytes.Contains(out, []byte("creationTimestamp")) || bytes.Contains(out, []byte("spec")) {
		t.Errorf("a null creationTimestamp or an empty spec is written:\n%s", out)
	}
}
