package render

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/overlay"
)

// TestTypedMergeWritesWhatThePlainMergeWrites holds the two ways a map-only
// strategic-merge patch reaches the output to the same bytes: merged into the typed
// object while it is written (Manifest, the render's path), and merged into the
// object's plain form then written (Objects, the path of everything else). Patches are
// random paths through every object of every tier's bundle: existing fields and new
// ones, scalars and maps, into structs, typed maps, lists, Helm values, status, an empty
// spec and creationTimestamp.
func TestTypedMergeWritesWhatThePlainMergeWrites(t *testing.T) {
	base := renderer(t)
	rng := rand.New(rand.NewPCG(16, 1))
	var cases, typed, refused int
	// A tenant whose values hold null creationTimestamps, which the plain form leaves out.
	nulls := tenantFor("NULLTS", withValues("crm", map[string]any{"creationTimestamp": nil,
		"podTemplate": map[string]any{"metadata": map[string]any{"creationTimestamp": nil}}}))
	for _, tn := range append(syntheticTenants(8), nulls) {
		plain, err := base.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range plain.Objects() {
			id := overlay.IdentityOf(obj)
			for range 15 {
				body := randomPatch(rng, obj, 0)
				raw, err := sigsyaml.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				target := &types.Selector{}
				target.Kind, target.Name, target.Namespace = id.Kind, id.Name, id.Namespace
				p, err := overlay.ParsePatch("random", string(raw), target)
				if err != nil || p.MergeMap() == nil {
					continue // not a map-only patch (a null): kustomize's path
				}
				env := *base.Env
				env.Patches = []overlay.Patch{*p}
				r := &Renderer{Catalog: base.Catalog, Env: &env}
				viaTyped, err := r.Bundle(tn)
				if err != nil {
					refused++ // the merge refuses it (a map meeting a scalar): kustomize says why
					continue
				}
				viaPlain, err := r.Bundle(tn)
				if err != nil {
					t.Fatal(err)
				}
				cases++
				for _, o := range viaTyped.objects {
					if o.edits != nil {
						typed++
					}
				}
				got, err := viaTyped.Manifest()
				if err != nil {
					t.Fatalf("%s into %s: %v", raw, overlay.Describe(id), err)
				}
				var want bytes.Buffer
				if err := manifest.EncodeDocuments(&want, viaPlain.Objects()); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("patch\n%s\ninto %s: the typed merge writes\n%s\nthe plain merge\n%s", raw, overlay.Describe(id), got, want.Bytes())
				}
			}
		}
	}
	t.Logf("%d patches compared (%d merged on the typed form), %d refused by the merge", cases, typed, refused)
	// The comparison means something only if both paths were taken often.
	if typed < cases/4 || cases-typed < cases/20 {
		t.Errorf("%d of %d patched bundles merged on the typed form: the random patches miss one of the two paths", typed, cases)
	}
	if refused == 0 {
		t.Error("no random patch was refused: the patches never meet a field they cannot merge into")
	}
}

// randomPatch returns a map-only patch along random paths of obj: each key an existing
// field or a new one, each value a scalar, a map of new fields, or (into a map) a
// patch one level down.
func randomPatch(rng *rand.Rand, obj any, depth int) map[string]any {
	m, _ := obj.(map[string]any)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := map[string]any{}
	for range 1 + rng.IntN(2) {
		var k string
		if len(keys) > 0 && rng.IntN(4) > 0 {
			k = keys[rng.IntN(len(keys))]
		} else if rng.IntN(3) == 0 {
			// Fields the writers treat apart, which the plain form (cleaned) never shows:
			// the top's status and (a Namespace's) empty spec, a null creationTimestamp.
			k = []string{"status", "spec", "creationTimestamp"}[rng.IntN(3)]
		} else {
			k = fmt.Sprintf("%cfield%d", "aknz"[rng.IntN(4)], rng.IntN(3))
		}
		switch x := m[k].(type) {
		case map[string]any:
			if depth < 4 && rng.IntN(5) > 0 {
				out[k] = randomPatch(rng, x, depth+1)
				continue
			}
		}
		switch rng.IntN(5) {
		case 0:
			out[k] = map[string]any{"added": "value", "count": 2}
		case 1:
			out[k] = 3
		case 2:
			out[k] = true
		case 3:
			out[k] = "1h"
		default:
			out[k] = "patched value: with a colon"
		}
	}
	return out
}
