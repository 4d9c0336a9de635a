package sopsdoc

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// sopsKeys are the fields of SOPS' metadata a tenant Secret may hold: the age stanzas,
// the message authentication code and what it is bound to, the version, and the rule
// that says which values are encrypted (sops decrypts by it, so it is kept as written).
var sopsKeys = []string{
	"age", "lastmodified", "mac", "version", "mac_only_encrypted",
	"encrypted_regex", "unencrypted_regex", "encrypted_suffix", "unencrypted_suffix",
	"encrypted_comment_regex", "unencrypted_comment_regex",
}

// keyServices are the other key services' lists in SOPS' metadata. Older sops versions
// write them empty, which says nothing and is dropped; a key in one of them is refused,
// since the cluster decrypts with age alone.
var keyServices = []string{"kms", "gcp_kms", "azure_kv", "hc_vault", "pgp", "hckms"}

// strict reports every construct of the document that two YAML readers may read two
// ways, or that Eva would not write itself: anchors, aliases, explicit or custom tags,
// merge keys, duplicate keys, non-string keys, comments, and scalars other than strings
// (SOPS' own metadata aside). kustomize resolves aliases and merge keys, keeps the last
// of duplicate keys and may read a tagged scalar otherwise: a document free of them
// reads the same to Eva, kustomize and sops.
func strict(root *yaml.Node, at func(*yaml.Node, string, string, ...any)) {
	comments := func(n *yaml.Node, path string) {
		if n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" {
			at(n, path, "comments are not allowed in an encrypted Secret file: Eva publishes the document it read, and sops may encrypt comments")
		}
	}
	var walk func(n *yaml.Node, path string, inSops bool)
	walk = func(n *yaml.Node, path string, inSops bool) {
		comments(n, path)
		switch {
		case n.Kind == yaml.AliasNode:
			at(n, path, "YAML aliases (*%s) are not allowed in an encrypted Secret file", bounded(n.Value))
			return
		case n.Anchor != "":
			at(n, path, "YAML anchors (&%s) are not allowed in an encrypted Secret file", bounded(n.Anchor))
		case n.Style&yaml.TaggedStyle != 0 || strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"):
			at(n, path, "YAML tags (%s) are not allowed in an encrypted Secret file", bounded(n.Tag))
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, inSops)
			}
		case yaml.MappingNode:
			seen := map[string]int{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				child := join(path, k.Value)
				comments(k, child)
				if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || k.Anchor != "" || k.Style&yaml.TaggedStyle != 0 {
					at(k, path, "keys must be plain strings (no aliases, anchors, tags or merge keys <<)")
					continue
				}
				if line, dup := seen[k.Value]; dup {
					at(k, child, "duplicate key (first set on line %d)", line)
					continue
				}
				seen[k.Value] = k.Line
				walk(v, child, inSops || path == "" && k.Value == "sops")
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				walk(item, fmt.Sprintf("%s[%d]", path, i), inSops)
			}
		case yaml.ScalarNode:
			if n.Tag != "!!str" && !(inSops && n.Tag == "!!bool" && path == "sops.mac_only_encrypted") {
				at(n, path, "must be a string (got %s): quote it", strings.TrimPrefix(n.Tag, "!!"))
			}
		}
	}
	walk(root, "", false)
}

// checkSopsKeys allows only the SOPS metadata fields a tenant Secret needs: a field
// sops does not know, or another key service, would change nothing Eva checks but could
// change what a newer sops does.
func checkSopsKeys(n *yaml.Node, at func(*yaml.Node, string, string, ...any)) {
	for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case slices.Contains(sopsKeys, k.Value):
		case slices.Contains(keyServices, k.Value):
			if v.Kind != yaml.SequenceNode || len(v.Content) > 0 {
				at(k, "sops."+k.Value, "must be empty or left out: the cluster decrypts with age only")
			}
		default:
			at(k, "sops."+bounded(k.Value), "not allowed in a tenant Secret's sops metadata (allowed: %s)", strings.Join(sopsKeys, ", "))
		}
	}
	age := mapping(n)["age"]
	for i := 0; age != nil && age.Kind == yaml.SequenceNode && i < len(age.Content); i++ {
		item := age.Content[i]
		if item.Kind != yaml.MappingNode {
			at(item, fmt.Sprintf("sops.age[%d]", i), "must be a mapping of recipient and enc")
			continue
		}
		for _, k := range keysOf(item) {
			if k.Value != "recipient" && k.Value != "enc" {
				at(k, fmt.Sprintf("sops.age[%d].%s", i, bounded(k.Value)), "not allowed (allowed: recipient, enc)")
			}
		}
	}
}

// canonical writes the document as Eva publishes it: every key and value of the checked
// document in its order (SOPS' message authentication code covers the values in
// document order, and each encrypted value is bound to its key path), with no comment,
// anchor, tag or style of the author's, and without SOPS metadata that says nothing
// (empty key-service lists, mac_only_encrypted: false). It is called only on a document
// strict and Check accepted, so every scalar is a string (or that one bool).
func canonical(root *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4) // as sops writes it
	if err := enc.Encode(copyNode(root, "")); err != nil {
		return nil, fmt.Errorf("writing the encrypted Secret: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing the encrypted Secret: %w", err)
	}
	return buf.Bytes(), nil
}

// copyNode copies n into fresh nodes that carry only kinds, string tags and values.
func copyNode(n *yaml.Node, path string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := join(path, k.Value)
			if path == "sops" && (slices.Contains(keyServices, k.Value) || k.Value == "mac_only_encrypted" && v.Value == "false") {
				continue
			}
			out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.Value}, copyNode(v, child))
		}
		return out
	case yaml.SequenceNode:
		out := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, item := range n.Content {
			out.Content = append(out.Content, copyNode(item, path))
		}
		return out
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: n.Tag, Value: n.Value}
	}
}

func join(path, key string) string {
	if path == "" {
		return bounded(key)
	}
	return path + "." + bounded(key)
}
