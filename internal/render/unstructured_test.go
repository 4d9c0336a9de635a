package render

import (
	"testing"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/aidonow/eva/internal/overlay"
)

// TestUnstructuredHoldsJSONNumbers renders with an environment patch that sets whole
// numbers (YAML's int once parsed) and deep-copies every object the way a Kubernetes
// client may: runtime.DeepCopyJSON panics on an int.
func TestUnstructuredHoldsJSONNumbers(t *testing.T) {
	base := renderer(t)
	target := &types.Selector{}
	target.Kind = "HelmRelease"
	merge, err := overlay.ParsePatch("merge", "spec:\n  maxHistory: 10\n  values:\n    replicas: 3\n", target)
	if err != nil {
		t.Fatal(err)
	}
	list, err := overlay.ParsePatch("list", "spec:\n  valuesFrom:\n  - kind: ConfigMap\n    name: extra\n    optional: true\n  values:\n    ports: [80, 443]\n", target)
	if err != nil {
		t.Fatal(err)
	}
	for _, patches := range [][]overlay.Patch{{*merge}, {*list}} {
		env := *base.Env
		env.Patches = patches
		r := &Renderer{Catalog: base.Catalog, Env: &env}
		b, err := r.Bundle(tenantFor("NUMBRS", withTier("Enterprise")))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range b.Unstructured() {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s %s (patch %s): deep copy panics: %v", u.GetKind(), u.GetName(), patches[0].Source, p)
					}
				}()
				_ = u.DeepCopy()
			}()
		}
	}
}
