package overlay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/filters/patchstrategicmerge"
	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Patch is one kustomize patch (strategic merge or JSON 6902) with its target.
type Patch struct {
	// Source names where the patch came from, for error messages.
	Source string
	// File, Line and Column are where the patch is written in an overlay's
	// kustomization.yaml (its entry under patches); empty for a patch parsed alone.
	File         string
	Line, Column int
	target       *selector
	smp          *kyaml.RNode
	// merge is the strategic-merge patch as plain data when it is made only of maps
	// and scalars (see merge.go): applied without kustomize's YAML node round trip.
	merge map[string]any
	ops   jsonpatch.Patch
	// direct are ops when they are all adds, replaces and removes (see jsonops.go):
	// applied on the object's map without the JSON round trip.
	direct []jsonOp
}

type selector struct {
	group, version, kind string
	namespace, name      *regexp.Regexp
	labels, annotations  labels.Selector
}

// loadPatches reads the `patches` of the overlay's kustomization.yaml. A tenant overlay
// is a kustomize file holding patches only (checkFields). Patch files are read inside
// the overlay folder (see overlayDir).
func loadPatches(dir *overlayDir, read func([]byte)) ([]Patch, error) {
	path := dir.join(KustomizationFile)
	data, err := dir.read(KustomizationFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	read(data)
	if err := singleDocument(path, data); err != nil {
		return nil, err
	}
	positions, err := checkFields(path, data)
	if err != nil {
		return nil, err
	}
	var k types.Kustomization
	if err := sigsyaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Patch
	for i, p := range k.Patches {
		patch, err := loadPatch(dir, path, i, p, read)
		if err != nil {
			return nil, err
		}
		patch.File = path
		if i < len(positions) {
			patch.Line, patch.Column = positions[i].line, positions[i].column
		}
		out = append(out, *patch)
	}
	return out, nil
}

// loadPatch parses the i-th patch of the kustomization at path, reading its file when
// it names one.
func loadPatch(dir *overlayDir, path string, i int, p types.Patch, read func([]byte)) (*Patch, error) {
	src := fmt.Sprintf("%s: patches[%d]", path, i)
	if p.Path == "" {
		return ParsePatch(src, p.Patch, p.Target)
	}
	field := fmt.Sprintf("%s: patches[%d].path: %q", path, i, p.Path)
	if p.Patch != "" {
		return nil, fmt.Errorf("%s: set either path or patch, not both", src)
	}
	b, err := dir.read(p.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	read(b)
	patch, err := ParsePatch(dir.join(p.Path), string(b), p.Target)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return patch, nil
}

// ParsePatch parses a patch body the way kustomize does: a YAML list is a JSON 6902
// patch (which needs a target); anything else is a strategic-merge patch, targeted by
// its own kind and name when no target is given.
func ParsePatch(source, body string, target *types.Selector) (*Patch, error) {
	p := &Patch{Source: source}
	trimmed := strings.TrimSpace(body)
	if trimmed == "" {
		return nil, fmt.Errorf("%s: empty patch", source)
	}
	if strings.HasPrefix(trimmed, "-") || strings.HasPrefix(trimmed, "[") {
		if target == nil {
			return nil, fmt.Errorf("%s: a JSON 6902 patch needs a target", source)
		}
		// Decoded as kustomize's JSON 6902 filter decodes it (YAML to JSON, then the
		// same json-patch library), once rather than once per object.
		raw := []byte(trimmed)
		if !strings.HasPrefix(trimmed, "[") {
			var err error
			if raw, err = sigsyaml.YAMLToJSON(raw); err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
		}
		ops, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		for i, op := range ops {
			switch op.Kind() {
			case "add", "remove", "replace", "move", "copy", "test":
			default:
				// The op is not quoted: a patch may come from a file, whose content
				// never appears in a message.
				return nil, fmt.Errorf("%s: operation %d: unknown op (want add, remove, replace, move, copy or test)", source, i)
			}
		}
		p.ops = ops
		p.direct = directOps(ops)
	} else {
		node, err := kyaml.Parse(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		// Anything but a mapping fails later, in kustomize, with the patch's text in
		// the message; a patch file's content must never be echoed.
		if node.YNode().Kind != kyaml.MappingNode {
			return nil, fmt.Errorf("%s: a strategic-merge patch is not a YAML mapping", source)
		}
		p.smp = node
		p.merge = mapOnlyPatch(node)
		if target == nil {
			meta, err := node.GetMeta()
			if err != nil || meta.Kind == "" {
				return nil, fmt.Errorf("%s: a strategic-merge patch without a target needs apiVersion, kind and metadata.name", source)
			}
			group, version, _ := strings.Cut(meta.APIVersion, "/")
			if version == "" {
				group, version = "", group
			}
			target = &types.Selector{}
			target.Group, target.Version, target.Kind, target.Name = group, version, meta.Kind, meta.Name
		}
	}
	sel, err := compileSelector(target)
	if err != nil {
		return nil, fmt.Errorf("%s: target: %w", source, err)
	}
	p.target = sel
	return p, nil
}

func compileSelector(t *types.Selector) (*selector, error) {
	s := &selector{group: t.Group, version: t.Version, kind: t.Kind}
	var err error
	anchored := func(expr string) (*regexp.Regexp, error) {
		if expr == "" {
			return nil, nil
		}
		return regexp.Compile("^(?:" + expr + ")$")
	}
	if s.name, err = anchored(t.Name); err != nil {
		return nil, err
	}
	if s.namespace, err = anchored(t.Namespace); err != nil {
		return nil, err
	}
	if t.LabelSelector != "" {
		if s.labels, err = labels.Parse(t.LabelSelector); err != nil {
			return nil, err
		}
	}
	if t.AnnotationSelector != "" {
		if s.annotations, err = labels.Parse(t.AnnotationSelector); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Identity is what a patch target selects on.
type Identity struct {
	APIVersion, Kind, Name, Namespace string
	Labels, Annotations               map[string]string
}

// IdentityOf reads the identity of an object in the JSON data model.
func IdentityOf(obj map[string]any) Identity {
	meta, _ := obj["metadata"].(map[string]any)
	id := Identity{Labels: stringMap(meta["labels"]), Annotations: stringMap(meta["annotations"])}
	id.APIVersion, _ = obj["apiVersion"].(string)
	id.Kind, _ = obj["kind"].(string)
	id.Name, _ = meta["name"].(string)
	id.Namespace, _ = meta["namespace"].(string)
	return id
}

// Targets reports whether the patch applies to an object.
func (p *Patch) Targets(id Identity) bool {
	s := p.target
	group, version, found := strings.Cut(id.APIVersion, "/")
	if !found {
		group, version = "", id.APIVersion
	}
	switch {
	case s.group != "" && s.group != group, s.version != "" && s.version != version,
		s.kind != "" && s.kind != id.Kind,
		s.name != nil && !s.name.MatchString(id.Name),
		s.namespace != nil && !s.namespace.MatchString(id.Namespace):
		return false
	}
	if s.labels != nil && !s.labels.Matches(labels.Set(id.Labels)) {
		return false
	}
	if s.annotations != nil && !s.annotations.Matches(labels.Set(id.Annotations)) {
		return false
	}
	return true
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k], _ = x.(string)
	}
	return out
}

// Apply applies the patches, in order, to every object they target. Objects no patch
// targets are returned untouched. JSON 6902 patches of adds, replaces and removes run
// directly on the object's map (jsonops.go); any other runs on the object's JSON exactly
// as kustomize's patchjson6902 filter runs it, without its YAML node round trip.
// Strategic-merge patches of maps and scalars merge directly (merge.go); any other goes
// through kustomize's filter.
func Apply(patches []Patch, objects []map[string]any) ([]map[string]any, error) {
	for i, obj := range objects {
		for _, p := range patches {
			if !p.Targets(IdentityOf(objects[i])) {
				continue
			}
			patched, err := p.Apply(objects[i])
			if err != nil {
				return nil, fmt.Errorf("%s: applying to %s: %w", p.Source, Describe(IdentityOf(obj)), err)
			}
			objects[i] = patched
		}
	}
	return objects, nil
}

// Apply applies the patch to one object.
func (p *Patch) Apply(obj map[string]any) (map[string]any, error) {
	if p.ops != nil {
		if p.direct != nil {
			if out, ok := applyOps(obj, p.direct); ok {
				return out, nil
			}
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if raw, err = p.ops.Apply(raw); err != nil {
			return nil, err
		}
		out := map[string]any{}
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, err
		}
		return out, nil
	}
	if p.merge != nil {
		if out, ok := mergeMaps(obj, p.merge); ok {
			return out, nil
		}
	}
	return p.applyStrategicMerge(obj)
}

// applyStrategicMerge applies a strategic-merge patch through kustomize's filter, and,
// as kustomize does (Resource.ApplySmPatch), keeps the object's kind, name and
// namespace: a targeted patch names its object only to be a valid manifest.
func (p *Patch) applyStrategicMerge(obj map[string]any) (map[string]any, error) {
	node, err := kyaml.FromMap(obj)
	if err != nil {
		return nil, err
	}
	id := IdentityOf(obj)
	res, err := patchstrategicmerge.Filter{Patch: p.smp.Copy()}.Filter([]*kyaml.RNode{node})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("the patch deletes the object; a tenant overlay may not remove objects")
	}
	out, err := res[0].Map()
	if err != nil {
		return nil, err
	}
	out["kind"] = id.Kind
	meta, _ := out["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		out["metadata"] = meta
	}
	meta["name"] = id.Name
	if id.Namespace == "" {
		delete(meta, "namespace")
	} else {
		meta["namespace"] = id.Namespace
	}
	return out, nil
}

// Describe names an object in messages.
func Describe(id Identity) string {
	if id.Namespace == "" {
		return id.Kind + " " + id.Name
	}
	return id.Kind + " " + id.Namespace + "/" + id.Name
}
