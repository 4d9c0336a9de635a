package tenantfile

import (
	"fmt"
	"path"
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

// secretNamePattern is the <name> of a Secret file: the Secret is <code>-<name>.
const secretNamePattern = `[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?`

var secretFileRE = regexp.MustCompile(`^([A-Z]{6})\.(` + secretNamePattern + `)\.sops\.yaml$`)

// SecretPathRegex is the sops creation rule's path_regex for tenant code's Secret
// files in dir or a folder below it, as Load reads them (dir: a slash path relative to
// the folder of .sops.yaml, "." for that folder itself): exactly the names ParseSecret
// accepts.
func SecretPathRegex(dir, code string) string {
	prefix := ""
	if dir = path.Clean(dir); dir != "." {
		prefix = regexp.QuoteMeta(dir) + "/"
	}
	return "^" + prefix + "([^/]+/)*" + regexp.QuoteMeta(code) + `\.` + secretNamePattern + `\.sops\.yaml$`
}

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

// CheckRecipients reports each secret file whose recipients the environment refuses:
// why(code, recipients) says why, or "" when the file's tenant can decrypt it and no
// other tenant can (overlay.Secrets.CheckFor).
func CheckRecipients(secrets []*SecretFile, why func(code string, recipients []string) string, env string) []Problem {
	var problems []Problem
	for _, s := range secrets {
		if reason := why(s.Code, s.Recipients); reason != "" {
			problems = append(problems, Problem{File: s.File, Line: 1, Column: 1, Field: "sops.age",
				Message: fmt.Sprintf("environment %s: %s; re-encrypt it for the tenant's own recipients (sops updatekeys)", env, reason)}.clean())
		}
	}
	return problems
}

// attachSecrets hands each tenant its encrypted Secret files as spec.secrets and checks
// the set: each file belongs to a tenant read with it, names no Secret the tenant file
// already holds inline, and each Secret a tenant's secretMounts hands to a module is
// one of the tenant's. Without this, a missing Secret would surface only as a pod that
// never starts, after publishing.
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
			problems = append(problems, secretMountProblems(t)...)
		}
	}
	return problems
}

// copiedSecrets refuses encrypted Secret files that carry what another tenant's
// file needs to decrypt (sopsdoc's fingerprints: a value's initialization vector, the
// data key's age stanza). kustomize-controller does not check SOPS' MAC; each tenant's
// own key already keeps a copy from decrypting in another namespace, and the copy is
// encrypted for the other tenant's key, which CheckRecipients refuses. This names both
// files, so the author learns which file was copied.
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

// secretMountProblems checks that every Secret the tenant's secretMounts hands to a
// module is one of its encrypted Secrets.
func secretMountProblems(t *Tenant) []Problem {
	code := t.Object.Spec.CapsuleCode
	var problems []Problem
	for i, m := range t.Object.Spec.SecretMounts {
		if !tenant.IsSecretName(m.Secret) {
			continue // refused by its own rule; naming a file for it would mislead
		}
		if slices.ContainsFunc(t.Object.Spec.Secrets, func(s evav1.EncryptedSecret) bool { return s.Name == m.Secret }) {
			continue
		}
		problems = append(problems, t.ProblemAt(fmt.Sprintf("spec.secretMounts[%d].secret", i), fmt.Sprintf(
			"no encrypted Secret provides %s: add %s.%s%s beside this file (encrypted with sops for the tenant's key)",
			tenant.SecretName(code, m.Secret), code, m.Secret, SecretFileSuffix)))
	}
	return problems
}
