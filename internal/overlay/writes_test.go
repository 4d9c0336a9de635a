package overlay

import (
	"testing"

	"sigs.k8s.io/kustomize/api/types"
)

// TestPatchWrites: a patch writes a field when it sets it or a field that holds it, on
// an object it targets; removing a field, or setting a neighbour, is not writing it.
func TestPatchWrites(t *testing.T) {
	crm := Identity{APIVersion: "helm.toolkit.fluxcd.io/v2", Kind: "HelmRelease", Name: "crm"}
	other := crm
	other.Name = "itsm"
	target := &types.Selector{ResId: resID("HelmRelease", "crm")}
	digest := []string{"spec", "values", "image", "digest"}
	cases := []struct {
		name, body string
		target     *types.Selector
		id         Identity
		want       bool
	}{
		{"add of the holder", "- op: add\n  path: /spec/values/image\n  value: {digest: x}\n", target, crm, true},
		{"replace of the field", "- op: replace\n  path: /spec/values/image/digest\n  value: x\n", target, crm, true},
		{"a neighbour", "- op: add\n  path: /spec/values/image/tag\n  value: x\n", target, crm, false},
		{"a field below it", "- op: add\n  path: /spec/values/image/digest/x\n  value: x\n", target, crm, false},
		{"remove", "- op: remove\n  path: /spec/values/image\n", target, crm, false},
		{"another object", "- op: add\n  path: /spec/values/image\n  value: {digest: x}\n", target, other, false},
		{"merge down to it", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: crm}\nspec: {values: {image: {digest: x}}}\n", nil, crm, true},
		{"merge of a neighbour", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: crm}\nspec: {values: {image: {tag: x}}}\n", nil, crm, false},
		{"merge with a list", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: crm}\nspec: {values: {image: {digest: x}, args: [a]}}\n", nil, crm, true},
	}
	for _, c := range cases {
		p, err := ParsePatch(c.name, c.body, c.target)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := p.Writes(c.id, digest); got != c.want {
			t.Errorf("%s: Writes = %v, want %v", c.name, got, c.want)
		}
	}
}
