// Package yamldoc splits a YAML stream into its documents, keeping the node tree (lines,
// columns, key order) that strict readers of user files report positions from.
package yamldoc

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// Documents returns the root node of every non-empty document of data, in order; a
// document holding only null (an empty one between separators) is skipped. The error
// is the YAML parser's, with its line.
func Documents(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(doc.Content) == 0 {
			continue
		}
		n := doc.Content[0]
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			continue // an empty document between separators
		}
		docs = append(docs, n)
	}
}
