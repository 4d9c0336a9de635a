package render

import (
	"bytes"
	"errors"
	"io"

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

// ManifestKinds lists the kinds of the objects in a published manifest stream, read as
// kustomize reads it (YAML documents; the items of a List counted by their own kinds).
// A stream that does not read as YAML documents is an error.
func ManifestKinds(manifest []byte) (map[string]bool, error) {
	kinds := map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc struct {
			Kind  string `yaml:"kind"`
			Items []struct {
				Kind string `yaml:"kind"`
			} `yaml:"items"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return kinds, nil
		}
		if err != nil {
			return nil, err
		}
		kinds[doc.Kind] = true
		for _, item := range doc.Items {
			kinds[item.Kind] = true
		}
	}
}
