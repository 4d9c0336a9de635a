package overlay

import (
	"strings"
	"testing"
)

// Three well-formed age recipients (their private halves were never made).
// minimalSettings are the settings every environment needs, before its secrets.
const minimalSettings = "domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\n"

var (
	recipientA = "age1" + strings.Repeat("q", 58)
	recipientB = "age1" + strings.Repeat("p", 58)
	recipientC = "age1" + strings.Repeat("z", 58)
)

// TestSecretsSettingsAreRefused: settings under which one tenant's key could read
// another's Secrets, or no Secret could be named, are refused with the field.
func TestSecretsSettingsAreRefused(t *testing.T) {
	for name, c := range map[string]struct {
		settings string
		want     string
	}{
		"a recipient two tenants share": {"{keySecretPrefix: sops-age-, recipients: {ACMECO: [" + recipientA + "], GLOBEX: [" + recipientB + ", " + recipientA + "]}}",
			"secrets.recipients.GLOBEX[1]: " + recipientA + " is also a recipient of ACMECO: each tenant needs keys of its own"},
		"not a capsule code":    {"{keySecretPrefix: sops-age-, recipients: {acmeco: [" + recipientA + "]}}", `secrets.recipients: "acmeco" is not a capsule code`},
		"no key":                {"{keySecretPrefix: sops-age-, recipients: {ACMECO: []}}", "secrets.recipients.ACMECO: at least one age public key"},
		"no tenant":             {"{keySecretPrefix: sops-age-}", "secrets.recipients: at least one tenant's age public keys are required"},
		"not a recipient":       {"{keySecretPrefix: sops-age-, recipients: {ACMECO: [age1x]}}", `secrets.recipients.ACMECO[0]: "age1x" is not an age public key`},
		"a prefix without '-'":  {"{keySecretPrefix: sops-age, recipients: {ACMECO: [" + recipientA + "]}}", `secrets.keySecretPrefix: "sops-age": must be a Secret name prefix ending in '-'`},
		"a prefix in capitals":  {"{keySecretPrefix: SOPS-, recipients: {ACMECO: [" + recipientA + "]}}", `secrets.keySecretPrefix: "SOPS-"`},
		"the shared key of old": {"{decryptionSecret: sops-age, ageRecipients: [" + recipientA + "]}", `unknown field "ageRecipients"`},
	} {
		_, err := ParseSettings([]byte(minimalSettings + "secrets: " + c.settings + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
}

// TestSecretsKeysPerTenantAndRotation: a tenant's Secret must be encrypted for one of its
// own recipients and for no other tenant's; during a rotation the tenant lists both
// keys, a file encrypted for either passes, and once the old key is dropped a file
// encrypted for it alone is refused.
func TestSecretsKeysPerTenantAndRotation(t *testing.T) {
	s, err := ParseSettings([]byte(minimalSettings + "secrets: {keySecretPrefix: sops-age-, recipients: {ACMECO: [" +
		recipientB + ", " + recipientA + "], GLOBEX: [" + recipientC + "]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	keys := s.Secrets
	if got := keys.KeySecret("ACMECO"); got != "sops-age-acmeco" {
		t.Errorf("ACMECO's decryption Secret: %q", got)
	}
	for name, c := range map[string]struct {
		code       string
		recipients []string
		want       string
	}{
		"the old key, during the rotation":  {"ACMECO", []string{recipientA}, ""},
		"the new key":                       {"ACMECO", []string{recipientB}, ""},
		"both":                              {"ACMECO", []string{recipientA, recipientB}, ""},
		"a key of no tenant beside its own": {"ACMECO", []string{recipientB, "age1" + strings.Repeat("y", 58)}, ""},
		"GLOBEX's key":                      {"ACMECO", []string{recipientC}, "encrypted for " + recipientC + ", a recipient of tenant GLOBEX"},
		"its own and GLOBEX's":              {"ACMECO", []string{recipientA, recipientC}, "a recipient of tenant GLOBEX"},
		"a tenant without keys":             {"DEVUSR", []string{recipientA}, "tenant DEVUSR has no age recipients in this environment (secrets.recipients.DEVUSR)"},
	} {
		if got := keys.CheckFor(c.code, c.recipients); !strings.Contains(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}

	// The rotation done: the old key is gone.
	keys.Recipients["ACMECO"] = []string{recipientB}
	keys.owners = nil
	if got := keys.CheckFor("ACMECO", []string{recipientA}); !strings.Contains(got, "not encrypted for any age recipient of tenant ACMECO") {
		t.Errorf("a file for the dropped key: %q", got)
	}
}
