package overlay

import (
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// A strategic-merge patch made only of maps and scalars (no list, no null, no empty
// map, no "$" directive) does the same to any object under kustomize's merge2 as a
// recursive map merge: a scalar replaces, a map merges into a map or fills a missing
// field, every other field is left alone. A map meeting a scalar or a list, or a
// scalar meeting a map or a list, is an error kustomize reports: such an object is
// handed to kustomize to report it. Such patches (the common "set this
// field on every HelmRelease" kind) are applied directly on the object's map, without
// the YAML node round trip that made a patched fleet render several times slower;
// every other patch goes through kustomize's filter. TestMapMergeMatchesKustomize and
// FuzzMapMergeMatchesKustomize hold the two paths to the same output.

// mapOnlyPatch returns the patch as plain data when it is made only of maps and
// scalars, and nil otherwise. kind, metadata.name and metadata.namespace are dropped:
// kustomize puts the object's own back after merging (Resource.ApplySmPatch), so in a
// patch they only say which object it is for. apiVersion is kept, as kustomize keeps it.
func mapOnlyPatch(node *kyaml.RNode) map[string]any {
	if !plainNode(node.YNode()) {
		return nil
	}
	m, err := node.Map()
	if err != nil || !mergeable(m) {
		return nil
	}
	meta, _ := m["metadata"].(map[string]any)
	for _, v := range []any{m["apiVersion"], m["kind"], meta["name"], meta["namespace"]} {
		if _, isString := v.(string); v != nil && !isString {
			return nil // kustomize reads these as strings, or refuses the patch
		}
	}
	out := copyMap(m)
	delete(out, "kind")
	if meta != nil {
		meta = copyMap(meta)
		delete(meta, "name")
		delete(meta, "namespace")
		if len(meta) == 0 {
			delete(out, "metadata")
		} else {
			out["metadata"] = meta
		}
	}
	return out
}

// plainNode says whether a YAML node is plain data: no anchor, alias or custom tag,
// and mapping keys that are plain strings.
func plainNode(n *kyaml.Node) bool {
	if n.Anchor != "" || n.Kind == kyaml.AliasNode {
		return false
	}
	switch n.Tag {
	case "", "!!str", "!!int", "!!bool", "!!float", "!!null", "!!map", "!!seq":
	default:
		return false
	}
	for i, c := range n.Content {
		if n.Kind == kyaml.MappingNode && i%2 == 0 && (c.Kind != kyaml.ScalarNode || c.Tag != "!!str") {
			return false
		}
		if !plainNode(c) {
			return false
		}
	}
	return true
}

// mergeable says whether a patch map holds only non-empty maps and non-null scalars,
// with no directive keys.
func mergeable(m map[string]any) bool {
	if len(m) == 0 {
		return false
	}
	for k, v := range m {
		if strings.HasPrefix(k, "$") {
			return false
		}
		switch v := v.(type) {
		case nil, []any:
			return false
		case map[string]any:
			if !mergeable(v) {
				return false
			}
		case map[any]any:
			return false
		}
	}
	return true
}

// mergeMaps returns obj with patch merged into it, or false when a map of the patch
// meets a field of obj that is neither a map nor missing (kustomize refuses that; the
// caller lets it say so). obj is not changed: the maps along the patched paths are
// copied, the rest is shared with obj.
func mergeMaps(obj, patch map[string]any) (map[string]any, bool) {
	out := copyMap(obj)
	for k, pv := range patch {
		pm, isMap := pv.(map[string]any)
		if !isMap {
			switch out[k].(type) {
			case map[string]any, []any:
				return nil, false // a scalar meeting a map or a list: kustomize refuses it
			}
			out[k] = pv
			continue
		}
		switch ov := out[k].(type) {
		case map[string]any:
			merged, ok := mergeMaps(ov, pm)
			if !ok {
				return nil, false
			}
			out[k] = merged
		case nil:
			out[k] = copyJSON(pm)
		default:
			return nil, false
		}
	}
	return out, true
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
