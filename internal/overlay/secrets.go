package overlay

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Secrets are an environment's settings for the tenants' SOPS-encrypted Secrets
// (tenants/<CODE>.<name>.sops.yaml). Every tenant has keys of its own: its Secrets are
// encrypted for its own age recipients, and only its own decryption Secret can read
// them, so a tenant's ciphertext copied into another tenant's files decrypts nowhere.
// In GitOps mode kustomize-controller decrypts with the Secret of the Flux namespace,
// in pure-cluster mode the operator with the Secret of the same name in its own
// namespace. The platform team creates those Secrets; Eva never sees a private key.
type Secrets struct {
	// KeySecretPrefix names each tenant's decryption Secret: the prefix followed by the
	// tenant's code in lower case (sops-age- gives sops-age-acmeco). Every value of that
	// Secret under a key ending in .agekey is an age private key of the tenant.
	KeySecretPrefix string `json:"keySecretPrefix"`
	// Recipients are each tenant's age public keys, by capsule code: the public halves
	// of the keys in its decryption Secret. A tenant's Secret must be encrypted for at
	// least one of its own and for none of another tenant's. Two during a rotation.
	Recipients map[string][]string `json:"recipients"`

	// owners indexes Recipients by recipient, built by check.
	owners map[string]string
}

// ageRecipientRE is an X25519 age recipient: "age1" and 58 bech32 characters.
var ageRecipientRE = regexp.MustCompile(`^age1[02-9ac-hj-np-z]{58}$`)

var capsuleCodeRE = regexp.MustCompile(evav1.CapsuleCodePattern)

// KeySecret is the name of the tenant's decryption Secret.
func (s *Secrets) KeySecret(code string) string {
	return s.KeySecretPrefix + strings.ToLower(code)
}

// RecipientsOf are the tenant's own age recipients; none for a tenant without keys.
func (s *Secrets) RecipientsOf(code string) []string {
	return s.Recipients[code]
}

// OwnerOf is the tenant whose recipient r is, or "" when it is no tenant's.
func (s *Secrets) OwnerOf(r string) string {
	if s.owners != nil {
		return s.owners[r]
	}
	for _, code := range sortedCodes(s.Recipients) {
		if slices.Contains(s.Recipients[code], r) {
			return code
		}
	}
	return ""
}

// CheckFor reports why a Secret of tenant code encrypted for recipients could not be
// published: the tenant has no keys, none of the recipients is the tenant's own (its
// decryption Secret could not read it), or one is another tenant's (a copy of the file
// would decrypt in that tenant's namespace). Empty when it can.
func (s *Secrets) CheckFor(code string, recipients []string) string {
	own := s.RecipientsOf(code)
	if len(own) == 0 {
		return fmt.Sprintf("tenant %s has no age recipients in this environment (secrets.recipients.%s): the platform team creates its key first", code, code)
	}
	for _, r := range recipients {
		if owner := s.OwnerOf(r); owner != "" && owner != code {
			return fmt.Sprintf("encrypted for %s, a recipient of tenant %s: a tenant's Secrets are encrypted for its own keys only", r, owner)
		}
	}
	if !slices.ContainsFunc(recipients, func(r string) bool { return slices.Contains(own, r) }) {
		return fmt.Sprintf("not encrypted for any age recipient of tenant %s (%s)", code, strings.Join(own, ", "))
	}
	return ""
}

// check refuses a prefix that makes no Secret name, a code that is not a capsule code,
// a malformed recipient, and a recipient two tenants share (their keys would read each
// other's Secrets). Messages start with the field's path below secrets.
func (s *Secrets) check() error {
	// The longest name is the prefix and six letters; a Secret name is a DNS subdomain.
	if msgs := validation.IsDNS1123Subdomain(s.KeySecretPrefix + "abcdef"); len(msgs) > 0 || !strings.HasSuffix(s.KeySecretPrefix, "-") {
		return fmt.Errorf("keySecretPrefix: %q: must be a Secret name prefix ending in '-' (the tenant's code in lower case follows)", s.KeySecretPrefix)
	}
	if len(s.Recipients) == 0 {
		return fmt.Errorf("recipients: at least one tenant's age public keys are required (recipients: {CODE: [age1...]})")
	}
	seen := map[string]string{}
	for _, code := range sortedCodes(s.Recipients) {
		if !capsuleCodeRE.MatchString(code) {
			return fmt.Errorf("recipients: %q is not a capsule code (six capital letters)", code)
		}
		if len(s.Recipients[code]) == 0 {
			return fmt.Errorf("recipients.%s: at least one age public key (age1...) is required", code)
		}
		for i, r := range s.Recipients[code] {
			if !ageRecipientRE.MatchString(r) {
				return fmt.Errorf("recipients.%s[%d]: %q is not an age public key (age1 followed by 58 bech32 characters)", code, i, r)
			}
			if other, ok := seen[r]; ok {
				return fmt.Errorf("recipients.%s[%d]: %s is also a recipient of %s: each tenant needs keys of its own", code, i, r, other)
			}
			seen[r] = code
		}
	}
	s.owners = seen
	return nil
}

// sortedCodes are the map's codes in order, so that checks and messages are stable.
func sortedCodes(m map[string][]string) []string {
	codes := make([]string, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes
}
