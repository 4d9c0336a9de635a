package rolloutfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Save writes the release's status and creation time back into its file. Every other
// line, the release manager's comments and layout included, stays byte for byte: the
// status block (at the end, where Save puts it) is replaced, and metadata gets a
// creationTimestamp line. A file in flow style (JSON) is written again whole. The file
// is replaced at once (written aside, then renamed), so a failure leaves the old one.
func (f *File) Save() error {
	data, err := f.render()
	if err != nil {
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	if err := writeAtomically(f.Path, data); err != nil {
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	return nil
}

// Restore writes the file back as it was read.
func (f *File) Restore() error {
	if err := writeAtomically(f.Path, f.raw); err != nil {
		return fmt.Errorf("restoring %s: %w", f.Path, err)
	}
	return nil
}

// edit replaces lines [from, to) (0-based) with text.
type edit struct {
	from, to int
	text     string
}

func (f *File) render() ([]byte, error) {
	root := f.doc.Content[0]
	meta := child(root, "metadata")
	if root.Style&yaml.FlowStyle != 0 || meta == nil || meta.Style&yaml.FlowStyle != 0 || len(meta.Content) == 0 {
		return f.reencode()
	}
	lines := strings.SplitAfter(string(f.raw), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
		lines[n-1] += "\n"
	}
	var edits []edit
	status, err := block("status", f.Rollout.Status)
	if err != nil {
		return nil, err
	}
	if from, to, ok := keyLines(root, "status", len(lines)); ok {
		edits = append(edits, edit{from, to, status})
	} else {
		edits = append(edits, edit{len(lines), len(lines), status})
	}
	if ts := f.Rollout.CreationTimestamp; !ts.IsZero() {
		first := meta.Content[0]
		line := fmt.Sprintf("%screationTimestamp: %q\n", strings.Repeat(" ", first.Column-1), ts.UTC().Format("2006-01-02T15:04:05Z"))
		if from, to, ok := keyLines(meta, "creationTimestamp", len(lines)); ok {
			edits = append(edits, edit{from, to, line})
		} else {
			edits = append(edits, edit{first.Line - 1, first.Line - 1, line})
		}
	}
	// From the bottom up, so each edit's line numbers still hold.
	sort.Slice(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
	for _, e := range edits {
		tail := append([]string{e.text}, lines[e.to:]...)
		lines = append(lines[:e.from], tail...)
	}
	return []byte(strings.Join(lines, "")), nil
}

// keyLines returns the lines [from, to) that a key of a block mapping and its value
// span: up to the next key of the mapping, or the end of the document for the last.
func keyLines(m *yaml.Node, key string, end int) (int, int, bool) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		from, to := m.Content[i].Line-1, end
		if i+2 < len(m.Content) {
			to = m.Content[i+2].Line - 1
		} else if m.Content[i+1].Kind == yaml.ScalarNode {
			to = m.Content[i+1].Line // a scalar ends on its line
		}
		return from, to, true
	}
	return 0, 0, false
}

// block is key: and v as Kubernetes encodes it (its JSON field names), indented under it.
func block(key string, v any) (string, error) {
	data, err := sigsyaml.Marshal(v)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(key + ":\n")
	for _, l := range strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n") {
		b.WriteString("  " + strings.TrimSuffix(l, "\n") + "\n")
	}
	return b.String(), nil
}

// reencode writes the whole document again (two-space indent), for a file whose
// layout lines cannot be edited in (flow style).
func (f *File) reencode() ([]byte, error) {
	root := f.doc.Content[0]
	if ts := f.Rollout.CreationTimestamp; !ts.IsZero() {
		meta := child(root, "metadata")
		if meta == nil {
			return nil, fmt.Errorf("no metadata")
		}
		if err := setKey(meta, "creationTimestamp", ts.UTC()); err != nil {
			return nil, err
		}
	}
	if err := setKey(root, "status", f.Rollout.Status); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f.doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// setKey sets key of a mapping node to v, encoded as Kubernetes encodes it, replacing
// the value in place or appending the key.
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
	value.Style = 0 // block style, whatever the document's
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return nil
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
	return nil
}

func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rollout-*")
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
	return os.Rename(tmp.Name(), path)
}
