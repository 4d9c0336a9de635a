package render

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
	sigsyaml "sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/overlay"
)

// TestEditedWritesWhatThePlainPatchesWrite holds the typed way of patching (patches
// folded into edits of the typed object, written in while it is written) to the plain
// way (the object's plain form patched in order, then written), byte for byte, on
// sequences of one to three random patches per object: map-only strategic merges and
// JSON 6902 adds, replaces and removes along random paths of every object of every tier
// (into structs, typed maps and lists, Helm values, status, what an earlier patch set),
// mixed. A sequence the plain way refuses must be refused the typed way too.
func TestEditedWritesWhatThePlainPatchesWrite(t *testing.T) {
	base := renderer(t)
	rng := rand.New(rand.NewPCG(16, 4))
	var cases, typed, refused int
	nulls := tenantFor("NULLTS", withValues("crm", map[string]any{"creationTimestamp": nil,
		"podTemplate": map[string]any{"metadata": map[string]any{"creationTimestamp": nil}}}))
	for _, tn := range append(syntheticTenants(8), nulls) {
		plain, err := base.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range plain.Objects() {
			id := overlay.IdentityOf(obj)
			target := &types.Selector{}
			target.Kind, target.Name, target.Namespace = id.Kind, id.Name, id.Namespace
			for range 30 {
				var patches []overlay.Patch
				var bodies []string
				for range 1 + rng.IntN(3) {
					var raw []byte
					if rng.IntN(2) == 0 {
						raw, err = sigsyaml.Marshal(randomPatch(rng, obj, 0))
					} else {
						raw, err = json.Marshal(randomOps(rng, obj))
					}
					if err != nil {
						t.Fatal(err)
					}
					p, err := overlay.ParsePatch("random", string(raw), target)
					if err != nil {
						continue
					}
					patches, bodies = append(patches, *p), append(bodies, string(raw))
				}
				if len(patches) == 0 {
					continue
				}
				env := *base.Env
				env.Patches = patches
				r := &Renderer{Catalog: base.Catalog, Env: &env}
				viaTyped, errTyped := r.Bundle(tn)
				viaPlain, errPlain := plainBundle(r, tn)
				if (errTyped == nil) != (errPlain == nil) {
					t.Fatalf("patches %s into %s: the typed way says %v, the plain way %v", bodies, overlay.Describe(id), errTyped, errPlain)
				}
				if errTyped != nil {
					refused++
					continue
				}
				cases++
				for _, o := range viaTyped.objects {
					if o.edits != nil {
						typed++
					}
				}
				got, err := viaTyped.Manifest()
				if err != nil {
					t.Fatalf("patches %s into %s: %v", bodies, overlay.Describe(id), err)
				}
				var want bytes.Buffer
				if err := manifest.EncodeDocuments(&want, viaPlain.Objects()); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("patches\n%s\ninto %s: the typed way writes\n%s\nthe plain way\n%s", strings.Join(bodies, "\n"), overlay.Describe(id), got, want.Bytes())
				}
			}
		}
	}
	t.Logf("%d patch sequences compared (%d the typed way), %d refused", cases, typed, refused)
	if typed < cases/4 || cases-typed < cases/10 || refused < cases/20 {
		t.Errorf("%d of %d sequences the typed way, %d refused: the random patches miss a path", typed, cases, refused)
	}
}

// plainBundle renders tn with every patch applied the plain way: each object converted
// to plain data, then patched in order (targets read off the unpatched object, as Bundle
// reads them).
func plainBundle(r *Renderer, tn *evav1.EvaTenant) (*Bundle, error) {
	plainEnv := *r.Env
	plainEnv.Patches = nil
	b, err := (&Renderer{Catalog: r.Catalog, Env: &plainEnv}).Bundle(tn)
	if err != nil {
		return nil, err
	}
	for i := range b.objects {
		o := &b.objects[i]
		id := overlay.IdentityOf(o.plainData(b.known))
		for j := range r.Env.Patches {
			p := &r.Env.Patches[j]
			if !p.Targets(id) {
				continue
			}
			if o.plain, err = p.Apply(o.plain); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// randomOps returns one or two JSON 6902 adds, replaces and removes along random paths
// of obj.
func randomOps(rng *rand.Rand, obj any) []map[string]any {
	var ops []map[string]any
	for range 1 + rng.IntN(2) {
		op := map[string]any{"op": []string{"add", "replace", "remove"}[rng.IntN(3)], "path": randomPointer(rng, obj)}
		if op["op"] != "remove" {
			op["value"] = []any{"1h", 3, true, map[string]any{"added": "value", "n": 2}, nil, []any{"x"}}[rng.IntN(6)]
		}
		ops = append(ops, op)
	}
	return ops
}

// randomPointer returns a JSON pointer into obj: existing keys and list positions, and
// now and then a new key or one the writers treat apart.
func randomPointer(rng *rand.Rand, obj any) string {
	var segs []string
	cur := obj
	for {
		switch x := cur.(type) {
		case map[string]any:
			if len(x) > 0 && rng.IntN(4) > 0 {
				keys := make([]string, 0, len(x))
				for k := range x {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				k := keys[rng.IntN(len(keys))]
				segs, cur = append(segs, k), x[k]
			} else {
				segs, cur = append(segs, []string{"status", "spec", "creationTimestamp", "values", "newField"}[rng.IntN(5)]), nil
			}
		case []any:
			i := rng.IntN(len(x) + 1)
			segs = append(segs, strconv.Itoa(i))
			if i < len(x) {
				cur = x[i]
			} else {
				cur = nil
			}
		default:
			cur = nil
		}
		if cur == nil || rng.IntN(3) == 0 {
			break
		}
	}
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
	}
	return "/" + strings.Join(segs, "/")
}

// TestShippedPatchesAreFoldedIntoEdits checks that the shipped environments' patches
// (prod's strategic merge, air-gap's JSON adds, into Helm values among them) are taken
// the typed way for every object they target, and write what the plain way writes.
func TestShippedPatchesAreFoldedIntoEdits(t *testing.T) {
	base := renderer(t)
	for _, name := range []string{"prod", "airgap"} {
		env, err := overlay.Load(filepath.Join("..", "..", "overlays"), name)
		if err != nil {
			t.Fatal(err)
		}
		r := &Renderer{Catalog: base.Catalog, Env: env}
		for _, tn := range syntheticTenants(6) {
			b, err := r.Bundle(tn)
			if err != nil {
				t.Fatal(err)
			}
			unpatched, err := plainBundle(&Renderer{Catalog: base.Catalog, Env: &overlay.Environment{Name: name, Settings: env.Settings}}, tn)
			if err != nil {
				t.Fatal(err)
			}
			targeted := 0
			for i, obj := range unpatched.Objects() {
				id := overlay.IdentityOf(obj)
				if !slices.ContainsFunc(env.Patches, func(p overlay.Patch) bool { return p.Targets(id) }) {
					continue
				}
				targeted++
				if o := b.objects[i]; o.edits == nil || o.plain != nil {
					t.Errorf("%s, %s: %s is patched the plain way", name, tn.Spec.CapsuleCode, overlay.Describe(id))
				}
			}
			if targeted == 0 {
				t.Fatalf("%s: no object of %s is patched", name, tn.Spec.CapsuleCode)
			}
			got, err := b.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			viaPlain, err := plainBundle(r, tn)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := manifest.EncodeDocuments(&want, viaPlain.Objects()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("%s, %s: the typed way writes\n%s\nthe plain way\n%s", name, tn.Spec.CapsuleCode, got, want.Bytes())
			}
		}
	}
}
