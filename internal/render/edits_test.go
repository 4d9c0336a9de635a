package render

import (
	"bytes"
	"encoding/json"
	"fmt"
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
			for range 12 {
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
				switch compareWays(t, base, tn, patches, bodies) {
				case wayRefused:
					refused++
				case wayTyped:
					cases++
					typed++
				default:
					cases++
				}
			}
		}
	}
	t.Logf("%d patch sequences compared (%d the typed way), %d refused", cases, typed, refused)
	if typed < cases/4 || cases-typed < cases/10 || refused < cases/20 {
		t.Errorf("%d of %d sequences the typed way, %d refused: the random patches miss a path", typed, cases, refused)
	}
}

// The way a patch sequence went, as compareWays found it.
const (
	wayPlain = iota
	wayTyped
	wayRefused
)

// compareWays renders tn with the patches both ways and fails the test unless both
// refuse them or both write the same bytes; it says which way the render took.
func compareWays(t *testing.T, base *Renderer, tn *evav1.EvaTenant, patches []overlay.Patch, bodies []string) int {
	t.Helper()
	env := *base.Env
	env.Patches = patches
	r := &Renderer{Catalog: base.Catalog, Env: &env}
	viaTyped, errTyped := r.Bundle(tn)
	viaPlain, errPlain := plainBundle(r, tn)
	if (errTyped == nil) != (errPlain == nil) {
		t.Fatalf("patches %s: the typed way says %v, the plain way %v", bodies, errTyped, errPlain)
	}
	if errTyped != nil {
		return wayRefused
	}
	way := wayPlain
	for _, o := range viaTyped.objects {
		if o.edits != nil {
			way = wayTyped
		}
	}
	got, err := viaTyped.Manifest()
	if err != nil {
		t.Fatalf("patches %s: %v", bodies, err)
	}
	var want bytes.Buffer
	if err := manifest.EncodeDocuments(&want, viaPlain.Objects()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("patches\n%s\nthe typed way writes\n%s\nthe plain way\n%s", strings.Join(bodies, "\n"), got, want.Bytes())
	}
	return way
}

// TestEditedSequencesWriteWhatThePlainPatchesWrite runs the sequences the random test
// may miss, each compared both ways and each taken the typed way: a struct whose every
// field is removed, operations inside what a merge or an earlier operation set, a merge
// into what a remove left missing, and operations on Helm values after a merge.
func TestEditedSequencesWriteWhatThePlainPatchesWrite(t *testing.T) {
	base := renderer(t)
	enterprise := tenantFor("SEQNCE", withTier("Enterprise"), withValues("crm", map[string]any{"replicaCount": 2}))
	starter := tenantFor("SEQNCS", withTier("Starter"))
	for _, c := range []struct {
		kind, name string
		patches    []string
	}{
		{"ResourceQuota", "", []string{`[{"op":"remove","path":"/spec/hard"}]`}},
		{"HelmRelease", "", []string{"spec:\n  driftDetection:\n    mode: enabled\n", `[{"op":"add","path":"/spec/driftDetection/ignore","value":[{"paths":["/x"]}]}]`}},
		{"HelmRelease", "", []string{`[{"op":"add","path":"/spec/test","value":{"enable":true}}]`, `[{"op":"replace","path":"/spec/test/enable","value":false}]`}},
		{"HelmRelease", "", []string{`[{"op":"remove","path":"/spec/install"}]`, "spec:\n  install:\n    crds: Create\n"}},
		{"HelmRelease", "crm", []string{"spec:\n  upgrade:\n    crds: CreateReplace\n", `[{"op":"add","path":"/spec/values/image","value":{"tag":"1.0"}},{"op":"remove","path":"/spec/values/replicaCount"}]`}},
		{"HelmRelease", "", []string{`[{"op":"remove","path":"/spec/upgrade/remediation"},{"op":"remove","path":"/spec/upgrade/cleanupOnFail"}]`}},
		{"Job", "", []string{"spec:\n  ttlSecondsAfterFinished: 3600\n", `[{"op":"replace","path":"/spec/ttlSecondsAfterFinished","value":60}]`}},
	} {
		target := &types.Selector{}
		target.Kind, target.Name = c.kind, c.name
		tn := enterprise
		if c.kind == "ResourceQuota" {
			tn = starter // the tier with a quota
		}
		var patches []overlay.Patch
		for _, body := range c.patches {
			p, err := overlay.ParsePatch("sequence", body, target)
			if err != nil {
				t.Fatal(err)
			}
			patches = append(patches, *p)
		}
		if way := compareWays(t, base, tn, patches, c.patches); way != wayTyped {
			t.Errorf("%s %s: taken the %s way", c.kind, c.patches, map[int]string{wayPlain: "plain", wayRefused: "refused"}[way])
		}
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
