package manifest

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	obj := &withValues{Kind: "Test", Values: &apiextensionsv1.JSON{Raw: raw}}
	var a, b bytes.Buffer
	if err := EncodeTyped(&a, obj); err != nil {
		t.Fatal(err)
	}
	if err := EncodeTypedKnown(&b, obj, KnownJSON{&raw[0]: v}); err != nil {
		t.Fatal(err)
	}
	return a.Bytes(), b.Bytes()
}

// TestKnownValuesWriteAsDecodedJSON holds JSONFaithful to its promise: plain data it
// accepts writes, as known values, exactly as its JSON decoded would. The values are
// random trees of the JSON data model with the awkward leaves mixed in; each leaf the
// check refuses is shown to write differently indeed.
func TestKnownValuesWriteAsDecodedJSON(t *testing.T) {
	refused := []any{
		1e15, -3e17, float64(1 << 62), // whole floats that decode back as integers
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
	leaves := []any{nil, true, false, 0, -7, int64(1) << 40, 3.25, -0.0, 1e14, 999999999999999.0, 2.5e-7, 1.5e-300, math.MaxInt64,
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
				m[string(rune('a'+rng.IntN(5)))+leafKey(i)] = tree(depth + 1)
			}
			return m
		}
		return leaves[rng.IntN(len(leaves))]
	}
	for range 2000 {
		v := map[string]any{"root": tree(0)}
		if !JSONFaithful(v) {
			t.Fatalf("JSONFaithful refuses %#v, made only of faithful leaves", v)
		}
		if decoded, known := writeBothWays(t, v); !bytes.Equal(decoded, known) {
			t.Fatalf("known values write\n%s\ndecoded JSON writes\n%s", known, decoded)
		}
	}
}

func leafKey(i int) string { return []string{"", "-key", " spaced", "1"}[i%4] }
