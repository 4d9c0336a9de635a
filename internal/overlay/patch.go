package overlay

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/filters/patchjson6902"
	"sigs.k8s.io/kustomize/api/filters/patchstrategicmerge"
	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Patch is one kustomize patch (strategic merge or JSON 6902) with its target.
type Patch struct {
	// Source names where the patch came from, for error messages.
	Source string
	target *selector
	smp    *kyaml.RNode
	json   string
}

type selector struct {
	group, version, kind string
	namespace, name      *regexp.Regexp
	labels, annotations  labels.Selector
}

// loadPatches reads the `patches` of dir/kustomization.yaml. A tenant overlay is a
// kustomize file holding patches only: anything else in it would change what a tenant
// is made of, which belongs in the renderer or the catalog.
func loadPatches(dir string) ([]Patch, error) {
	path := filepath.Join(dir, KustomizationFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var k types.Kustomization
	if err := sigsyaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(k.Resources)+len(k.Components)+len(k.PatchesStrategicMerge)+len(k.PatchesJson6902)+
		len(k.Images)+len(k.ConfigMapGenerator)+len(k.SecretGenerator)+len(k.HelmCharts) > 0 ||
		k.NamePrefix != "" || k.NameSuffix != "" || k.Namespace != "" {
		return nil, fmt.Errorf("%s: a tenant overlay may only hold `patches`", path)
	}
	var out []Patch
	for i, p := range k.Patches {
		src := fmt.Sprintf("%s: patches[%d]", path, i)
		body := p.Patch
		if p.Path != "" {
			if body != "" {
				return nil, fmt.Errorf("%s: set either path or patch, not both", src)
			}
			b, err := os.ReadFile(filepath.Join(dir, p.Path))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			body, src = string(b), filepath.Join(dir, p.Path)
		}
		patch, err := ParsePatch(src, body, p.Target)
		if err != nil {
			return nil, err
		}
		out = append(out, *patch)
	}
	return out, nil
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
		p.json = body
		// Check the operations now rather than once per object.
		if _, err := (patchjson6902.Filter{Patch: body}).Filter(nil); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
	} else {
		node, err := kyaml.Parse(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		p.smp = node
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

func (s *selector) matches(obj map[string]any) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	switch {
	case s.group != "" && s.group != group, s.version != "" && s.version != version,
		s.kind != "" && s.kind != kind,
		s.name != nil && !s.name.MatchString(name),
		s.namespace != nil && !s.namespace.MatchString(namespace):
		return false
	}
	if s.labels != nil && !s.labels.Matches(labels.Set(stringMap(meta["labels"]))) {
		return false
	}
	if s.annotations != nil && !s.annotations.Matches(labels.Set(stringMap(meta["annotations"]))) {
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
// targets are returned untouched (and without the cost of a YAML round trip).
func Apply(patches []Patch, objects []map[string]any) ([]map[string]any, error) {
	if len(patches) == 0 {
		return objects, nil
	}
	for i, obj := range objects {
		var node *kyaml.RNode
		for _, p := range patches {
			if !p.target.matches(obj) {
				continue
			}
			if node == nil {
				n, err := kyaml.FromMap(obj)
				if err != nil {
					return nil, fmt.Errorf("patching %s: %w", describe(obj), err)
				}
				node = n
			}
			var err error
			var out []*kyaml.RNode
			if p.smp != nil {
				out, err = patchstrategicmerge.Filter{Patch: p.smp.Copy()}.Filter([]*kyaml.RNode{node})
			} else {
				out, err = patchjson6902.Filter{Patch: p.json}.Filter([]*kyaml.RNode{node})
			}
			if err != nil {
				return nil, fmt.Errorf("%s: applying to %s: %w", p.Source, describe(obj), err)
			}
			if len(out) != 1 {
				return nil, fmt.Errorf("%s: patch deleted %s; a tenant overlay may not remove objects", p.Source, describe(obj))
			}
			node = out[0]
		}
		if node != nil {
			m, err := node.Map()
			if err != nil {
				return nil, fmt.Errorf("patching %s: %w", describe(objects[i]), err)
			}
			objects[i] = m
		}
	}
	return objects, nil
}

func describe(obj map[string]any) string {
	if obj == nil {
		return "object"
	}
	meta, _ := obj["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", obj["kind"], meta["namespace"], meta["name"])
}
