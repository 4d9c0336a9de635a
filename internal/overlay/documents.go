package overlay

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// singleDocument refuses a file holding more than one YAML document: the decoders that
// read a kustomization or the settings take the first and drop the rest without a word,
// so what a second document says would look applied and not be. A document is counted
// when it holds something (a lone separator at the end is not one). It names the file
// and the line where the second document starts; a file that does not parse is left to
// the decode that follows.
func singleDocument(path string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	seen := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err != nil {
			return nil // the end, or a file the decode that follows reports on
		}
		if len(doc.Content) == 0 || empty(doc.Content[0]) {
			continue
		}
		if seen++; seen > 1 {
			return fmt.Errorf("%s:%d:%d: a second YAML document: this file holds one, and what follows the first would be ignored", path, doc.Content[0].Line, doc.Content[0].Column)
		}
	}
}

// empty reports whether a document's root is nothing at all (what a lone separator
// decodes to).
func empty(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == ""
}
