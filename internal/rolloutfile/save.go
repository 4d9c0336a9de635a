package rolloutfile

import (
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Save writes the release's status and creation time back into its file. The rest of
// the document, the release manager's comments included, stays as written. The file
// is replaced whole (written aside, then renamed), so a failure leaves the old one.
func (f *File) Save() error {
	root := f.doc.Content[0]
	if ts := f.Rollout.CreationTimestamp; !ts.IsZero() {
		meta := child(root, "metadata")
		if meta == nil {
			return fmt.Errorf("%s: no metadata", f.Path)
		}
		if err := setKey(meta, "creationTimestamp", ts.UTC()); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	if err := setKey(root, "status", f.Rollout.Status); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	data, err := yaml.Marshal(f.doc)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".rollout-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.Path)
}

// setKey sets key of a mapping node to v, encoded as Kubernetes encodes it (its JSON
// field names), replacing the value in place or appending the key.
func setKey(m *yaml.Node, key string, v any) error {
	data, err := sigsyaml.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	value := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return nil
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
	return nil
}
