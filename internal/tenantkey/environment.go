// Package tenantkey adds a tenant's SOPS age key to a fleet: its public half to the
// environment's secrets.recipients and to the tenant's creation rule in .sops.yaml.
// Both are edits of files people keep: each changes the lines it must and keeps every
// other byte, comments included, and each result is read back the way Eva (or sops)
// reads the file before it is returned.
package tenantkey

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aidonow/eva/internal/overlay"
)

// DefaultKeySecretPrefix is the keySecretPrefix an environment without secrets
// settings is given: the tenant's decryption Secret is sops-age-<code>.
const DefaultKeySecretPrefix = "sops-age-"

// ErrHasKey is returned when the environment already lists recipients for the tenant.
var ErrHasKey = errors.New("the tenant already has an age key in this environment")

// AddRecipient returns the environment file data with recipient added as tenant
// code's age public key under secrets.recipients, creating the secrets settings (with
// DefaultKeySecretPrefix) when the file has none. It refuses a tenant that has a key
// already (ErrHasKey: a rotation adds the second key by hand, docs/tenants.md), settings
// written in YAML's flow style it would have to rewrite, and a file that does not read
// as an environment before or after the edit; the result reads as the same settings
// with one recipient more.
func AddRecipient(data []byte, code, recipient string) ([]byte, error) {
	before, err := overlay.ParseSettings(data)
	if err != nil {
		return nil, fmt.Errorf("the environment does not read before the edit (evactl validate says where): %w", err)
	}
	if before.Secrets != nil && len(before.Secrets.RecipientsOf(code)) > 0 {
		return nil, fmt.Errorf("%w: secrets.recipients.%s lists %s", ErrHasKey, code, strings.Join(before.Secrets.RecipientsOf(code), ", "))
	}
	doc, err := onlyDocument(data)
	if err != nil {
		return nil, err
	}
	edited, err := insertRecipient(data, doc, code, recipient)
	if err != nil {
		return nil, err
	}
	if err := sameButRecipient(before, edited, code, recipient); err != nil {
		return nil, err
	}
	return edited, nil
}

// insertRecipient inserts the lines that add the recipient, at the place the file's
// layout gives them.
func insertRecipient(data []byte, doc *yaml.Node, code, recipient string) ([]byte, error) {
	lines := splitLines(data)
	root := documentMapping(doc)
	_, secrets := lookup(root, "secrets")
	if secrets == nil || isEmpty(secrets) {
		block := fmt.Sprintf("secrets:\n  keySecretPrefix: %s\n  recipients:\n    %s:\n      - %s\n", DefaultKeySecretPrefix, code, recipient)
		if secrets != nil {
			// "secrets:" or "secrets: {}": that line gives way to the block.
			key, _ := lookup(root, "secrets")
			return join(replaceLine(lines, key.Line, block)), nil
		}
		return join(append(lines, block)), nil
	}
	if secrets.Kind != yaml.MappingNode || secrets.Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("line %d: secrets is not written as an indented block: add recipients.%s by hand", secrets.Line, code)
	}
	indent := strings.Repeat(" ", secrets.Content[0].Column-1)
	recipientsKey, recipients := lookup(secrets, "recipients")
	switch {
	case recipients == nil:
		entry := fmt.Sprintf("%srecipients:\n%s  %s:\n%s    - %s\n", indent, indent, code, indent, recipient)
		return join(insertAfter(lines, lastLine(secrets), entry)), nil
	case isEmpty(recipients):
		entry := fmt.Sprintf("%srecipients:\n%s  %s:\n%s    - %s\n", indent, indent, code, indent, recipient)
		return join(replaceLine(lines, recipientsKey.Line, entry)), nil
	case recipients.Kind != yaml.MappingNode || recipients.Style&yaml.FlowStyle != 0:
		return nil, fmt.Errorf("line %d: secrets.recipients is not written as an indented block: add %s by hand", recipients.Line, code)
	}
	return join(insertAfter(lines, lastLine(recipients), entryLike(recipients, code, recipient))), nil
}

// entryLike writes the tenant's entry as the first entry of recipients is written: a
// flow list on the key's line, or a block list indented as that one is.
func entryLike(recipients *yaml.Node, code, recipient string) string {
	indent := strings.Repeat(" ", recipients.Content[0].Column-1)
	first := recipients.Content[1]
	if first.Kind == yaml.SequenceNode && first.Style&yaml.FlowStyle != 0 {
		return fmt.Sprintf("%s%s: [%s]\n", indent, code, recipient)
	}
	item := indent + "  "
	if first.Kind == yaml.SequenceNode && len(first.Content) > 0 {
		item = strings.Repeat(" ", max(first.Content[0].Column-3, 0))
	}
	return fmt.Sprintf("%s%s:\n%s- %s\n", indent, code, item, recipient)
}

// sameButRecipient refuses an edit whose result does not read as the settings before
// it with the recipient added and nothing else changed.
func sameButRecipient(before *overlay.Settings, edited []byte, code, recipient string) error {
	after, err := overlay.ParseSettings(edited)
	if err != nil {
		return fmt.Errorf("the edited environment does not read (nothing was written): %w", err)
	}
	if _, err := onlyDocument(edited); err != nil || after.Secrets == nil {
		return fmt.Errorf("the edited environment holds no secrets settings (nothing was written)")
	}
	if got := after.Secrets.RecipientsOf(code); !slices.Equal(got, []string{recipient}) {
		return fmt.Errorf("the edited environment lists %v for %s, not the new key (nothing was written)", got, code)
	}
	want := maps(before)
	want[code] = []string{recipient}
	if !reflect.DeepEqual(maps(after), want) {
		return fmt.Errorf("the edit would change other tenants' recipients (nothing was written)")
	}
	b, a := *before, *after
	b.Secrets, a.Secrets = nil, nil
	if !reflect.DeepEqual(b, a) || (before.Secrets != nil && before.Secrets.KeySecretPrefix != after.Secrets.KeySecretPrefix) {
		return fmt.Errorf("the edit would change other settings (nothing was written)")
	}
	return nil
}

// maps copies the settings' recipients (none without secrets settings).
func maps(s *overlay.Settings) map[string][]string {
	out := map[string][]string{}
	if s.Secrets != nil {
		for code, rs := range s.Secrets.Recipients {
			out[code] = rs
		}
	}
	return out
}

// onlyDocument parses data as one YAML document, refusing a file of several: an edit
// appended after a "---" would land in a document nobody reads.
func onlyDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("holds more than one YAML document: add the key by hand")
	}
	if bytes.Contains(data, []byte("\r\n")) {
		return nil, fmt.Errorf("has Windows line endings: add the key by hand")
	}
	return &doc, nil
}

// documentMapping is the document's top mapping (nil for an empty document).
func documentMapping(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		return doc.Content[0]
	}
	return nil
}

// lookup finds key in a mapping node: its key node and value node.
func lookup(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// isEmpty reports a null value or an empty mapping ("key:" or "key: {}").
func isEmpty(n *yaml.Node) bool {
	return n.Tag == "!!null" || (n.Kind == yaml.MappingNode && len(n.Content) == 0)
}

// lastLine is the last line a node's content is on.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

// splitLines splits data into its lines, each with its line ending; a last line
// without one is given one.
func splitLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, string(data)+"\n")
			break
		}
		lines = append(lines, string(data[:i+1]))
		data = data[i+1:]
	}
	return lines
}

// insertAfter inserts text after line n (1-based).
func insertAfter(lines []string, n int, text string) []string {
	return slices.Insert(lines, min(n, len(lines)), text)
}

// replaceLine replaces line n (1-based) with text.
func replaceLine(lines []string, n int, text string) []string {
	out := slices.Clone(lines)
	out[n-1] = text
	return out
}

// join puts lines back together.
func join(lines []string) []byte { return []byte(strings.Join(lines, "")) }
