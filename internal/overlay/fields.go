package overlay

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The fields a tenant overlay's kustomization.yaml may hold, and those of each of its
// patches. Every other kustomize field would change what a tenant is made of (that
// belongs in the renderer or the catalog) or would be read by kustomize and not by Eva,
// which applies the patches itself: it is refused, not ignored.
var (
	kustomizationFields = []string{"apiVersion", "kind", "patches"}
	patchFields         = []string{"path", "patch", "target"}
)

// at is a line and column in a file.
type at struct{ line, column int }

// checkFields refuses every field of a tenant overlay's kustomization that Eva does not
// apply, each with the file, line and column where it is set, and returns where each
// patch is written. The document's shape and the fields' values are checked by the
// strict decode that follows.
func checkFields(path string, data []byte) ([]at, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil, nil // the strict decode reports it, or the file is empty
	}
	var patches []at
	var errs []error
	refuse := func(n *yaml.Node, field, allowed string) {
		errs = append(errs, fmt.Errorf("%s:%d:%d: %s: not applied by Eva; %s", path, n.Line, n.Column, field, allowed))
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !slices.Contains(kustomizationFields, k.Value) {
			refuse(k, k.Value, "a tenant overlay may only hold `patches` (with apiVersion and kind)")
			continue
		}
		if k.Value == "kind" && v.Value != "Kustomization" {
			errs = append(errs, fmt.Errorf("%s:%d:%d: kind: %q: a tenant overlay is a Kustomization (kind: Kustomization)",
				path, v.Line, v.Column, v.Value))
		}
		if k.Value != "patches" || v.Kind != yaml.SequenceNode {
			continue
		}
		for j, p := range v.Content {
			patches = append(patches, at{p.Line, p.Column})
			if p.Kind != yaml.MappingNode {
				continue
			}
			for f := 0; f+1 < len(p.Content); f += 2 {
				if name := p.Content[f].Value; !slices.Contains(patchFields, name) {
					refuse(p.Content[f], fmt.Sprintf("patches[%d].%s", j, name), "a patch has "+strings.Join(patchFields, ", "))
				}
			}
		}
	}
	return patches, errors.Join(errs...)
}
