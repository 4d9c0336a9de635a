package manifest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestEncodeStyle(t *testing.T) {
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "x", "labels": map[string]any{"eva.aidonow.com/capsule": "DEVUSR"}},
		"data":       map[string]any{"b": "1.4", "a": "true", "c": "", "d": "line1\nline2", "e": "a: b", "f": "<html>&"},
		"list":       []any{map[string]any{"name": "n", "port": int64(80)}, "s", []any{int64(1), int64(2)}, map[string]any{}},
		"empty":      []any{},
		"obj":        map[string]any{},
		"float":      0.5,
		"int":        float64(3),
		"null":       nil,
	}
	var buf bytes.Buffer
	if err := Encode(&buf, obj); err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: v1
data:
  a: "true"
  b: "1.4"
  c: ""
  d: "line1\nline2"
  e: "a: b"
  f: "<html>&"
empty: []
float: 0.5
int: 3
kind: ConfigMap
list:
- name: "n"
  port: 80
- s
-
  - 1
  - 2
- {}
metadata:
  labels:
    eva.aidonow.com/capsule: DEVUSR
  name: x
"null": null
obj: {}
`
	if got := buf.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// roundTrip encodes v and decodes it with two independent YAML parsers; both must give
// back the same data.
func roundTrip(t *testing.T, obj map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, obj); err != nil {
		return // values with no JSON form are refused, not mangled
	}
	want, _ := json.Marshal(obj)
	var v3 any
	if err := yaml.Unmarshal(buf.Bytes(), &v3); err != nil {
		t.Fatalf("yaml.v3 cannot read the output: %v\n%s", err, buf.String())
	}
	got3, _ := json.Marshal(v3)
	gotK8s, err := sigsyaml.YAMLToJSON(buf.Bytes())
	if err != nil {
		t.Fatalf("sigs.k8s.io/yaml cannot read the output: %v\n%s", err, buf.String())
	}
	if !jsonEqual(want, got3) || !jsonEqual(want, gotK8s) {
		t.Fatalf("round trip changed the data:\n in: %s\nv3: %s\nk8s: %s\nyaml:\n%s", want, got3, gotK8s, buf.String())
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, s := range []string{"yes", "No", "off", "~", "null", "0x1F", "1e3", "1_000", "12:30", "2026-11-22",
		".inf", "-", "-a", "?x", "a #b", "a:", "a:b", "http://x/y", "@x", "`x", "'q'", "\"q\"", "é", "a\tb",
		"*x", "&x", "!x", "%x", "{a}", "[a]", ">", "|", "a,b", "  lead", "trail  ", "\u2028", "v1.4.0", "1.4.0"} {
		roundTrip(t, map[string]any{"k": s, s: "v", "list": []any{s}})
	}
}

func FuzzEncode(f *testing.F) {
	f.Add(`{"a":{"b":[1,"x",{"c":null}]},"d":"yes"}`)
	f.Add(`{"":[[]],"-":{"?":"a: b"}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var obj map[string]any
		if json.Unmarshal([]byte(doc), &obj) != nil || obj == nil {
			return
		}
		roundTrip(t, obj)
	})
}

func TestEncodeControlCharacters(t *testing.T) {
	for _, s := range []string{"\x7f", "a\u0085b", "\u009f", "\ufeffx", "\x01\x1f", "tab\there", "\u2029"} {
		roundTrip(t, map[string]any{"k": s})
	}
}
