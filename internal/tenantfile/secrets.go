package tenantfile

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/sopsdoc"
	"github.com/aidonow/eva/internal/tenant"
)

// SecretFileSuffix marks a tenant's SOPS-encrypted Secret, kept beside its tenant file:
// tenants/<CODE>.<name>.sops.yaml holds the Secret <code>-<name> of the tenant's
// namespace. Load hands it to the tenant as one of its spec.secrets, byte for byte; it
// reaches the cluster still encrypted and is decrypted by kustomize-controller (the
// tenant Kustomization's decryption settings). The plaintext never passes through Eva.
const SecretFileSuffix = ".sops.yaml"

// SecretFile is one tenant's SOPS-encrypted Secret file.
type SecretFile struct {
	// File is the path it was read from.
	File string
	// Code is the capsule code of the tenant it belongs to.
	Code string
	// Short is the name after the tenant's prefix; the Secret is <code>-<Short>.
	Short string
	// Secret is what the checked document says (name, keys, recipients).
	sopsdoc.Secret
	// Data is the file as written: SOPS' message authentication code covers every value
	// in document order, so it is published byte for byte, never re-encoded.
	Data []byte
}

// IsSecretFile reports whether path names a tenant's encrypted Secret rather than a
// tenant file.
func IsSecretFile(path string) bool {
	return strings.HasSuffix(strings.ToLower(filepath.Base(path)), SecretFileSuffix)
}

var secretFileRE = regexp.MustCompile(`^([A-Z]{6})\.([a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?)\.sops\.yaml$`)

// ParseSecret checks one encrypted Secret file: named <CODE>.<name>.sops.yaml, and a
// document sopsdoc.Check accepts for the Secret <code>-<name> of the tenant's namespace.
// A file that breaks a rule is refused as a whole (nil SecretFile), so nothing of it is
// published; no problem quotes a secret value.
func ParseSecret(file string, data []byte) (*SecretFile, []Problem) {
	m := secretFileRE.FindStringSubmatch(filepath.Base(file))
	if m == nil {
		return nil, []Problem{Problem{File: file, Line: 1, Column: 1, Message: fmt.Sprintf(
			"an encrypted tenant Secret is named <CODE>.<name>%s (<name>: lower-case letters, digits and '-', at most 32), holding the Secret <code>-<name>",
			SecretFileSuffix)}.clean()}
	}
	code, short := m[1], m[2]
	s, issues := sopsdoc.Check(data, tenant.SecretName(code, short), tenant.Namespace(code))
	if len(issues) > 0 {
		problems := make([]Problem, 0, len(issues))
		for _, is := range issues {
			problems = append(problems, Problem{File: file, Line: is.Line, Column: is.Column, Field: is.Field, Message: is.Message}.clean())
		}
		return nil, problems
	}
	return &SecretFile{File: file, Code: code, Short: short, Secret: *s, Data: data}, nil
}

// CheckRecipients reports each secret file not encrypted for any of the environment's
// age recipients (the public keys of the private key the cluster decrypts with).
func CheckRecipients(secrets []*SecretFile, recipients []string, env string) []Problem {
	var problems []Problem
	for _, s := range secrets {
		if !s.ForRecipients(recipients) {
			problems = append(problems, Problem{File: s.File, Line: 1, Column: 1, Field: "sops.age",
				Message: fmt.Sprintf("not encrypted for environment %s: add one of its age recipients (%s) with sops updatekeys or re-encrypt", env, strings.Join(recipients, ", "))}.clean())
		}
	}
	return problems
}

// attachSecrets hands each tenant its encrypted Secret files as spec.secrets and checks
// the set: each file belongs to a tenant read with it, names no Secret the tenant file
// already holds inline, and each Secret a tenant's valuesFrom requires (not optional)
// is one of the tenant's, with the key the reference reads. Without this, a missing
// Secret would surface only in helm-controller, after publishing.
func attachSecrets(tenants []*Tenant, files []*SecretFile) []Problem {
	var problems []Problem
	var byCode map[string]*Tenant
	if len(files) > 0 {
		byCode = make(map[string]*Tenant, len(tenants))
		for _, t := range tenants {
			if t.Object != nil {
				byCode[t.Object.Spec.CapsuleCode] = t
			}
		}
	}
	problems = append(problems, copiedSecrets(files)...)
	for _, f := range files {
		t := byCode[f.Code]
		if t == nil {
			problems = append(problems, Problem{File: f.File, Line: 1, Column: 1,
				Message: fmt.Sprintf("belongs to tenant %s, whose tenant file %s.yaml was not read with it", f.Code, f.Code)}.clean())
			continue
		}
		if slices.ContainsFunc(t.Object.Spec.Secrets, func(s evav1.EncryptedSecret) bool { return s.Name == f.Short }) {
			problems = append(problems, t.ProblemAt("spec.secrets", fmt.Sprintf("Secret %s is both inline here and in %s; keep one", f.Name, f.File)))
			continue
		}
		t.Object.Spec.Secrets = append(t.Object.Spec.Secrets, evav1.EncryptedSecret{Name: f.Short, Sops: string(f.Data)})
	}
	for _, t := range tenants {
		if t.Object != nil {
			problems = append(problems, valuesFromProblems(t)...)
		}
	}
	return problems
}

// copiedSecrets refuses encrypted Secret files that carry what another tenant's
// file needs to decrypt (sopsdoc's fingerprints: a value's initialization vector, the
// data key's age stanza). kustomize-controller does not check SOPS' MAC, so a copy of
// another tenant's file with its name and namespace changed would decrypt into this
// tenant's namespace with the environment's key.
func copiedSecrets(files []*SecretFile) []Problem {
	holders := map[string][]*SecretFile{}
	for _, f := range files {
		for _, fp := range f.Fingerprints {
			holders[fp] = append(holders[fp], f)
		}
	}
	var problems []Problem
	for _, f := range files { // in file order, one problem per file at most
		var other *SecretFile
		for _, fp := range f.Fingerprints {
			if i := slices.IndexFunc(holders[fp], func(h *SecretFile) bool { return h.Code != f.Code }); i >= 0 {
				other = holders[fp][i]
				break
			}
		}
		if other != nil {
			// Which of the two is the copy is not Eva's to tell: both are refused.
			problems = append(problems, Problem{File: f.File, Line: 1, Column: 1, Field: "sops",
				Message: fmt.Sprintf("carries ciphertext of %s, a Secret of tenant %s: one of the two files is a copy of the other; each tenant encrypts its own values with sops",
					other.File, other.Code)}.clean())
		}
	}
	return problems
}

// valuesFromProblems checks that every Secret the tenant's valuesFrom requires is one of
// its encrypted Secrets and holds the key read.
func valuesFromProblems(t *Tenant) []Problem {
	code := t.Object.Spec.CapsuleCode
	keys := map[string][]string{}
	for _, s := range t.Object.Spec.Secrets {
		name := tenant.SecretName(code, s.Name)
		if doc, _ := sopsdoc.Check([]byte(s.Sops), name, tenant.Namespace(code)); doc != nil {
			keys[name] = doc.Keys
		}
	}
	var problems []Problem
	prefix := strings.ToLower(code) + "-"
	for i, ref := range t.Object.Spec.ValuesFrom {
		if ref.Kind != "Secret" || ref.Optional {
			continue
		}
		key := ref.ValuesKey
		if key == "" {
			key = "values.yaml"
		}
		field := fmt.Sprintf("spec.valuesFrom[%d].name", i)
		have, ok := keys[ref.Name]
		switch {
		case !ok && !strings.HasPrefix(ref.Name, prefix):
			problems = append(problems, t.ProblemAt(field, fmt.Sprintf(
				"no encrypted Secret provides %s: a tenant's Secrets are named %s<name>, each in a file %s.<name>%s beside this file (or mark the reference optional)",
				ref.Name, prefix, code, SecretFileSuffix)))
		case !ok:
			problems = append(problems, t.ProblemAt(field, fmt.Sprintf(
				"no encrypted Secret provides %s: add %s.%s%s beside this file (encrypted with sops), or mark the reference optional",
				ref.Name, code, strings.TrimPrefix(ref.Name, prefix), SecretFileSuffix)))
		case !slices.Contains(have, key):
			problems = append(problems, t.ProblemAt(fmt.Sprintf("spec.valuesFrom[%d].valuesKey", i), fmt.Sprintf(
				"Secret %s has no key %s (it has: %s)", ref.Name, key, strings.Join(have, ", "))))
		}
	}
	return problems
}
