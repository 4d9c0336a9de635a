// Package sopsdoc checks a tenant's SOPS-encrypted Secret manifest without decrypting
// it: the rules that keep a tenant's Secret inside its tenant (name, namespace, type,
// labels) and that every value really is encrypted, for a key the cluster holds. Tenant
// files (internal/tenantfile) and EvaTenants applied to the cluster (internal/tenant)
// share it.
package sopsdoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// WatchLabel makes helm-controller reconcile a release as soon as a Secret it takes
// values from changes (secret rotation); without it the change waits for the release's
// interval. It is the one label a tenant Secret may carry.
const WatchLabel = "reconcile.fluxcd.io/watch"

// MaxBytes bounds an encrypted Secret manifest.
const MaxBytes = 64 << 10

// Secret is what a checked document says, none of it secret: SOPS leaves key names and
// metadata readable.
type Secret struct {
	// Name is the Secret's name.
	Name string
	// Keys are its data and stringData keys, sorted.
	Keys []string
	// Recipients are the age public keys it is encrypted for.
	Recipients []string
	// Fingerprints are what a copy of the document must carry to decrypt (see
	// fingerprints): two tenants' files sharing one are a copy.
	Fingerprints []string
	// Canonical is the document as Eva publishes it: what Check read, written by Eva's
	// encoder (see canonical), so that kustomize, sops and Eva read the same document.
	Canonical []byte
}

// Issue is one broken rule, at a line and column of the document (1-based; 1:1 when the
// document as a whole is at fault) and a field path within it.
type Issue struct {
	Line, Column int
	Field        string
	Message      string
}

var (
	// encryptedRE is a value SOPS encrypted with AES-GCM.
	encryptedRE  = regexp.MustCompile(`^ENC\[AES256_GCM,data:[A-Za-z0-9+/=]*,iv:[A-Za-z0-9+/=]+,tag:[A-Za-z0-9+/=]+,type:[a-z]+\]$`)
	secretKeyRE  = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	ageKeyRE     = regexp.MustCompile(`^age1[02-9ac-hj-np-z]{58}$`)
	topLevelKeys = []string{"apiVersion", "kind", "metadata", "type", "data", "stringData", "sops"}
)

// Check checks one encrypted Secret manifest strictly: a document every YAML reader reads
// the same way (see strict), holding a single Secret named name, in
// namespace, of type Opaque, with every data and stringData value encrypted by SOPS for
// at least one age recipient, under a message authentication code that covers its name
// and namespace. Values are never echoed: a value that is not encrypted is named by its
// key only. A document with any issue returns a nil Secret.
func Check(data []byte, name, namespace string) (*Secret, []Issue) {
	var issues []Issue
	at := func(n *yaml.Node, field, format string, args ...any) {
		line, col := 1, 1
		if n != nil {
			line, col = max(n.Line, 1), max(n.Column, 1)
		}
		issues = append(issues, Issue{Line: line, Column: col, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if len(data) > MaxBytes {
		at(nil, "", "is %d bytes; an encrypted Secret may be at most %d", len(data), MaxBytes)
		return nil, issues
	}
	doc, root, err := single(data)
	if err != nil {
		at(nil, "", "%v", err)
		return nil, issues
	}
	// A document two readers may read two ways is refused before any rule is read off
	// it: the rules below take the first of duplicate keys, kustomize the last.
	strict(doc, at)
	checkSopsKeys(mapping(root)["sops"], at)
	if len(issues) > 0 {
		return nil, issues
	}
	s := &Secret{Name: name}
	fields := mapping(root)
	if field, n := wholeFileEncrypted(fields); n != nil {
		// One issue, not one per field: every rule below would fail, and none would
		// say what to do.
		at(n, field, "the whole file is encrypted; encrypt only data and stringData, as the "+
			"fleet's .sops.yaml says (sops --encrypted-regex '^(data|stringData)$'), "+
			"so that Eva and the cluster can read the Secret's name and namespace")
		return nil, issues
	}
	for _, k := range keysOf(root) {
		if !slices.Contains(topLevelKeys, k.Value) {
			at(k, bounded(k.Value), "not allowed in a tenant Secret (allowed: %s)", strings.Join(topLevelKeys, ", "))
		}
	}
	want := func(key, value string) {
		if n := fields[key]; n == nil || n.Kind != yaml.ScalarNode || n.Value != value {
			at(orNode(n, root), key, "must be %q", value)
		}
	}
	want("apiVersion", "v1")
	want("kind", "Secret")
	if t := fields["type"]; t != nil && (t.Kind != yaml.ScalarNode || t.Value != "Opaque") {
		at(t, "type", "must be Opaque or left out: other Secret types make Kubernetes act on the Secret (service account tokens, registry credentials)")
	}
	checkMetadata(fields["metadata"], root, name, namespace, at)
	for _, section := range []string{"data", "stringData"} {
		n := fields[section]
		if n == nil {
			continue
		}
		if n.Kind != yaml.MappingNode {
			at(n, section, "must be a mapping of keys to encrypted values")
			continue
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if !secretKeyRE.MatchString(k.Value) || k.Value == "." || k.Value == ".." {
				at(k, section, "key %q: a Secret key is letters, digits, '-', '_' and '.'", bounded(k.Value))
				continue
			}
			if v.Kind != yaml.ScalarNode || !encryptedRE.MatchString(v.Value) {
				at(v, section+"."+k.Value, "is not encrypted: encrypt the file with sops before committing it (the value is not shown)")
				continue
			}
			if slices.Contains(s.Keys, k.Value) {
				at(k, section+"."+k.Value, "is also a key of data: a Secret key is set once")
				continue
			}
			s.Keys = append(s.Keys, k.Value)
		}
	}
	if len(s.Keys) == 0 && len(issues) == 0 {
		at(root, "data", "the Secret holds no encrypted value")
	}
	s.Recipients = checkSops(fields["sops"], root, at)
	if len(issues) > 0 {
		return nil, issues
	}
	slices.Sort(s.Keys)
	s.Fingerprints = fingerprints(root)
	if s.Canonical, err = canonical(root); err != nil {
		at(nil, "", "%v", err)
		return nil, issues
	}
	return s, nil
}

// wholeFileEncrypted returns the field of a document SOPS encrypted whole (no
// --encrypted-regex, no .sops.yaml rule) that shows it: apiVersion or kind encrypted.
func wholeFileEncrypted(fields map[string]*yaml.Node) (string, *yaml.Node) {
	for _, key := range []string{"apiVersion", "kind"} {
		if n := fields[key]; n != nil && n.Kind == yaml.ScalarNode && encryptedRE.MatchString(n.Value) {
			return key, n
		}
	}
	return "", nil
}

// single decodes exactly one YAML mapping, and returns its document node too (which
// holds the comments before and after it).
func single(data []byte) (doc, root *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var d yaml.Node
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		docs = append(docs, &d)
	}
	if len(docs) != 1 || len(docs[0].Content) != 1 || docs[0].Content[0].Kind != yaml.MappingNode {
		return nil, nil, errors.New("an encrypted tenant Secret holds exactly one Secret manifest, encrypted as a whole by sops (kustomize-controller decrypts each manifest on its own)")
	}
	return docs[0], docs[0].Content[0], nil
}

// checkMetadata requires the name and namespace given, no annotations, and no label but
// WatchLabel: a label or annotation could hand the object to another controller or
// change how Flux applies it.
func checkMetadata(md, root *yaml.Node, name, namespace string, at func(*yaml.Node, string, string, ...any)) {
	if md == nil || md.Kind != yaml.MappingNode {
		at(orNode(md, root), "metadata", "must hold the Secret's name and namespace")
		return
	}
	fields := mapping(md)
	for _, k := range keysOf(md) {
		if k.Value != "name" && k.Value != "namespace" && k.Value != "labels" {
			at(k, "metadata."+bounded(k.Value), "not allowed in a tenant Secret (allowed: name, namespace, labels)")
		}
	}
	if n := fields["name"]; n == nil || n.Value != name {
		at(orNode(n, md), "metadata.name", "must be %s", name)
	}
	// The namespace is written in the document because SOPS' MAC covers it. Only a
	// reader that verifies the MAC refuses a file whose namespace was changed: the
	// operator's Decrypt does, kustomize-controller does not (its decryptor leaves the
	// MAC unchecked), so in GitOps mode another tenant's file, copied with its name and
	// namespace changed, decrypts with the environment's key until each tenant has a
	// key of its own.
	if n := fields["namespace"]; n == nil || n.Value != namespace {
		at(orNode(n, md), "metadata.namespace", "must be %s, the tenant's namespace", namespace)
	}
	if labels := fields["labels"]; labels != nil {
		if labels.Kind != yaml.MappingNode {
			at(labels, "metadata.labels", "must be a mapping of labels")
		}
		lf := mapping(labels)
		for _, k := range keysOf(labels) {
			if k.Value != WatchLabel || lf[k.Value].Value != "Enabled" {
				at(k, "metadata.labels", "label %q: the only label allowed is %s: Enabled", bounded(k.Value), WatchLabel)
			}
		}
	}
}

// checkSops requires SOPS metadata with age recipients and a message authentication
// code over every value: a document sops never encrypted, or encrypted only for keys
// the cluster does not hold, would fail in kustomize-controller instead of here.
func checkSops(n, root *yaml.Node, at func(*yaml.Node, string, string, ...any)) []string {
	if n == nil || n.Kind != yaml.MappingNode {
		at(orNode(n, root), "sops", "not encrypted with sops: run sops --encrypt --age <recipient> --encrypted-regex '^(data|stringData)$' --in-place on the file")
		return nil
	}
	fields := mapping(n)
	if mac := fields["mac"]; mac == nil || !encryptedRE.MatchString(mac.Value) {
		at(orNode(mac, n), "sops.mac", "missing or not an encrypted message authentication code: re-encrypt the file with sops")
	}
	// By default SOPS' MAC covers every value, the unencrypted name and namespace
	// included; with mac_only_encrypted it would not, and the operator's Decrypt (which
	// verifies the MAC) would take another tenant's file copied with its namespace
	// changed.
	if m := fields["mac_only_encrypted"]; m != nil && m.Value != "false" {
		at(m, "sops.mac_only_encrypted", "must not be set: the message authentication code must cover the Secret's name and namespace, or another tenant's encrypted file could be replayed here")
	}
	age := fields["age"]
	if age == nil || age.Kind != yaml.SequenceNode || len(age.Content) == 0 {
		at(orNode(age, n), "sops.age", "must be encrypted for an age recipient (the cluster decrypts with age)")
		return nil
	}
	var recipients []string
	for i, item := range age.Content {
		r := mapping(item)["recipient"]
		if r == nil || !ageKeyRE.MatchString(r.Value) {
			at(orNode(r, item), fmt.Sprintf("sops.age[%d].recipient", i), "not an age public key")
			continue
		}
		recipients = append(recipients, r.Value)
	}
	return recipients
}

// ForRecipients reports whether the Secret is encrypted for one of recipients.
func (s *Secret) ForRecipients(recipients []string) bool {
	return slices.ContainsFunc(s.Recipients, func(r string) bool { return slices.Contains(recipients, r) })
}

// mapping indexes a mapping node's values by key.
func mapping(n *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i+1]
	}
	return out
}

func keysOf(n *yaml.Node) []*yaml.Node {
	var keys []*yaml.Node
	for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i])
	}
	return keys
}

func orNode(n, fallback *yaml.Node) *yaml.Node {
	if n != nil {
		return n
	}
	return fallback
}

// bounded shortens a key name quoted in a message.
func bounded(k string) string {
	if len(k) > 64 {
		return k[:64] + "…"
	}
	return k
}
