package overlay

import (
	"testing"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"
)

// jsonPatches are JSON 6902 patches: the air-gap overlay's kind, and the edge cases of
// RFC 6902 positions and keys, some taken by the direct path, some handed to the library.
var jsonPatches = []string{
	// the air-gap overlay's
	"- op: add\n  path: /spec/chart/spec/interval\n  value: 1h\n",
	"- op: add\n  path: /spec/values/image\n  value:\n    repository: registry.eva.internal/aidonow/eva-crm\n    tag: \"1.4.0\"\n    digest: sha256:PLACEHOLDER\n",
	`[{"op": "replace", "path": "/spec/values/replicaCount", "value": 3}]`,
	`[{"op": "remove", "path": "/spec/values/debug"}, {"op": "add", "path": "/metadata/labels/x", "value": "1"}]`,
	`[{"op": "add", "path": "/spec/values/env/-", "value": {"name": "B"}}]`,
	`[{"op": "add", "path": "/spec/values/env/0", "value": {"name": "Z"}}]`,
	`[{"op": "add", "path": "/spec/values/env/1", "value": null}]`, // the library's: its null is its own
	`[{"op": "replace", "path": "/spec/values/env/0/value", "value": 2.5}]`,
	`[{"op": "remove", "path": "/spec/values/env/0"}]`,
	`[{"op": "add", "path": "/metadata/annotations/a~1b~0c", "value": "escaped"}]`,
	`[{"op": "add", "path": "/spec/values/", "value": "empty key"}]`,
	`[{"op": "add", "path": "/spec/values/new", "value": {"list": [1, {"x": true}]}}, {"op": "replace", "path": "/spec/values/new/list/1/x", "value": false}]`,
	// handed to the library: it applies or refuses them
	`[{"op": "replace", "path": "/spec/values/missing", "value": 1}]`,
	`[{"op": "remove", "path": "/spec/values/missing"}]`,
	`[{"op": "add", "path": "/spec/missing/deeper", "value": 1}]`,
	`[{"op": "add", "path": "/spec/values/env/-1", "value": 1}]`,
	`[{"op": "add", "path": "/spec/values/env/01", "value": 1}]`,
	`[{"op": "replace", "path": "/spec/values/env/1", "value": 1}]`,
	`[{"op": "add", "path": "/spec/values/env/5", "value": 1}]`,
	`[{"op": "add", "path": "/spec/releaseName/x", "value": 1}]`,
	`[{"op": "test", "path": "/spec/releaseName", "value": "crm"}, {"op": "add", "path": "/x", "value": 1}]`,
	`[{"op": "move", "from": "/spec/timeout", "path": "/spec/interval"}]`,
	`[{"op": "copy", "from": "/spec/timeout", "path": "/spec/x"}]`,
	`[{"op": "add", "path": "", "value": {"kind": "X"}}]`,
}

func TestJSONOpsMatchLibrary(t *testing.T) {
	direct := 0
	for _, body := range jsonPatches {
		p, err := ParsePatch("test", body, &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Kind: "HelmRelease"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range mergeObjects() {
			if assertSameAsLibrary(t, p, obj, body) {
				direct++
			}
		}
	}
	// Every patch above the library's own but the null value applies to the HelmRelease.
	if direct < 11 {
		t.Errorf("the direct path took %d patch applications, fewer than expected", direct)
	}
}

// assertSameAsLibrary applies p to obj on the direct path and through the json-patch
// library: when the direct path takes it, the two give the same object and obj is left
// as it was. It reports whether the direct path took it.
func assertSameAsLibrary(t *testing.T, p *Patch, obj map[string]any, body string) bool {
	t.Helper()
	if p.direct == nil {
		return false
	}
	before := asJSON(t, obj)
	fast, ok := applyOps(obj, p.direct)
	if !ok {
		return false
	}
	library := *p
	library.direct = nil
	slow, err := library.Apply(obj)
	if err != nil {
		t.Errorf("patch\n%s\non %s: the direct path applied it, the library refuses it: %v", body, obj["kind"], err)
		return true
	}
	if after := asJSON(t, obj); after != before {
		t.Errorf("patch\n%s\nchanged the object it was applied to:\n%s\n%s", body, before, after)
	}
	if a, b := asJSON(t, fast), asJSON(t, slow); a != b {
		t.Errorf("patch\n%s\non %s %s:\ndirect:  %s\nlibrary: %s", body, obj["kind"], before, a, b)
	}
	return true
}

// TestJSONOpsValuesAreNotShared: each object patched gets its own copy of the value, so
// changing one object's never reaches the next object patched.
func TestJSONOpsValuesAreNotShared(t *testing.T) {
	p, err := ParsePatch("test", jsonPatches[1], &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Kind: "HelmRelease"}}})
	if err != nil || p.direct == nil {
		t.Fatalf("%v %v", p, err)
	}
	first, err := p.Apply(mergeObjects()[0])
	if err != nil {
		t.Fatal(err)
	}
	first["spec"].(map[string]any)["values"].(map[string]any)["image"].(map[string]any)["tag"] = "changed"
	second, err := p.Apply(mergeObjects()[0])
	if err != nil {
		t.Fatal(err)
	}
	if tag := second["spec"].(map[string]any)["values"].(map[string]any)["image"].(map[string]any)["tag"]; tag != "1.4.0" {
		t.Errorf("the second object got tag %v", tag)
	}
}

// FuzzJSONOpsMatchLibrary: any JSON 6902 patch the direct path takes gives the same
// object as the json-patch library.
func FuzzJSONOpsMatchLibrary(f *testing.F) {
	for _, body := range jsonPatches {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := ParsePatch("fuzz", body, &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Kind: "HelmRelease"}}})
		if err != nil || p.direct == nil {
			return
		}
		for _, obj := range mergeObjects() {
			assertSameAsLibrary(t, p, obj, body)
		}
	})
}
