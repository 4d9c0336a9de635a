package render

import (
	"bytes"

	"go.yaml.in/yaml/v3"

	"github.com/aidonow/eva/internal/tenant"
)

// OwnerOf reads who owns a published tenant from its foundation manifest
// (tenants/<code>/manifests.yaml, as Eva writes it): the owner annotation of its
// Namespace, tenant.AnnotationOwnerUID. Empty when the manifest has none (published
// before owners were recorded) or cannot be read.
func OwnerOf(foundation []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(foundation))
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
		}
		err := dec.Decode(&doc)
		if err != nil { // io.EOF included: no Namespace
			return ""
		}
		if doc.Kind == "Namespace" {
			return doc.Metadata.Annotations[tenant.AnnotationOwnerUID]
		}
	}
}
