package tenantfile

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Locate returns where the value of the field path (natsConsumer.subjects[1]) stands
// under root, or where the deepest part of it the file holds does (a required field
// left out: its object): for problems found after decoding, placed in the file.
func Locate(root *yaml.Node, path string) (line, col int) {
	n := root
	for _, part := range pathParts(path) {
		next := child(n, part)
		if next == nil {
			break
		}
		n = next
	}
	return max(n.Line, 1), max(n.Column, 1)
}

// pathParts splits natsConsumer.subjects[1] into natsConsumer, subjects, 1.
func pathParts(path string) []string {
	return strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
}

// child is the value of key part of a mapping, or item part of a list.
func child(n *yaml.Node, part string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}
