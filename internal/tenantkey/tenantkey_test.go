package tenantkey

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/aidonow/eva/internal/overlay"
)

func newRecipient(t *testing.T) string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id.Recipient().String()
}

// keepsEveryLine fails unless every line of before is in after, in order: an edit
// adds lines and loses none (comments included).
func keepsEveryLine(t *testing.T, before, after []byte) {
	t.Helper()
	rest := strings.Split(string(after), "\n")
	for _, l := range strings.Split(string(before), "\n") {
		i := 0
		for i < len(rest) && rest[i] != l {
			i++
		}
		if i == len(rest) {
			t.Fatalf("the edit lost the line %q:\n%s", l, after)
		}
		rest = rest[i+1:]
	}
}

const shippedEnv = "../../overlays/dev/tenant/environment.yaml"

// TestAddRecipientKeepsTheFile adds a tenant's key to environments written in each
// layout a platform team writes: every other line stays, comments included, the new
// entry is written as the others are, and the file reads as before with one recipient
// more.
func TestAddRecipientKeepsTheFile(t *testing.T) {
	shipped, err := os.ReadFile(shippedEnv)
	if err != nil {
		t.Fatal(err)
	}
	withoutSecrets := regexp.MustCompile(`(?s)secrets:\n.*?\n#`).ReplaceAllString(string(shipped), "#")
	flowLists := strings.NewReplacer("ACMECO:\n      - ", "ACMECO: [", "GLOBEX:\n      - ", "GLOBEX: [").Replace(string(shipped))
	flowLists = regexp.MustCompile(`(\[age1[0-9a-z]+)`).ReplaceAllString(flowLists, "$1]")
	for name, env := range map[string]string{
		"the shipped dev environment": string(shipped),
		"no secrets settings":         withoutSecrets,
		"no recipients yet":           strings.Replace(withoutSecrets, "#", "secrets:\n  keySecretPrefix: keys-\n#", 1),
		"flow lists":                  flowLists,
		"indented by four":            strings.NewReplacer("\n  keySecretPrefix", "\n    keySecretPrefix", "\n  recipients:", "\n    recipients:", "\n    ACMECO:", "\n        ACMECO:", "\n    GLOBEX:", "\n        GLOBEX:", "\n      - age", "\n          - age").Replace(string(shipped)),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "no recipients yet" {
				// check refuses secrets without recipients: that file does not read, so
				// the edit is refused rather than guessed.
				if _, err := AddRecipient([]byte(env), "NEWTEN", newRecipient(t)); err == nil || !strings.Contains(err.Error(), "does not read before the edit") {
					t.Fatalf("want a refusal, got %v", err)
				}
				return
			}
			r := newRecipient(t)
			out, err := AddRecipient([]byte(env), "NEWTEN", r)
			if err != nil {
				t.Fatal(err)
			}
			keepsEveryLine(t, []byte(env), out)
			s, err := overlay.ParseSettings(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Secrets.RecipientsOf("NEWTEN"); len(got) != 1 || got[0] != r {
				t.Fatalf("NEWTEN's recipients: %v\n%s", got, out)
			}
			if strings.Contains(env, "ACMECO: [") && !strings.Contains(string(out), "NEWTEN: ["+r+"]") {
				t.Errorf("the entry is not written as the others are:\n%s", out)
			}
		})
	}
}

// TestAddRecipientRefuses: a tenant that has a key (a rotation is done by hand), and
// settings in flow style the edit would have to rewrite.
func TestAddRecipientRefuses(t *testing.T) {
	shipped, err := os.ReadFile(shippedEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddRecipient(shipped, "ACMECO", newRecipient(t)); !errors.Is(err, ErrHasKey) {
		t.Errorf("a second key for ACMECO: %v, want ErrHasKey", err)
	}
	withoutSecrets := regexp.MustCompile(`(?s)secrets:\n.*?\n#`).ReplaceAllString(string(shipped), "#")
	if _, err := AddRecipient([]byte(withoutSecrets+"---\nkind: Other\n"), "NEWTEN", newRecipient(t)); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Errorf("a file of two documents: %v", err)
	}
	flow := regexp.MustCompile(`(?s)  recipients:\n.*?\n#`).ReplaceAllString(string(shipped), "  recipients: {ACMECO: ["+newRecipient(t)+"]}\n#")
	if _, err := AddRecipient([]byte(flow), "NEWTEN", newRecipient(t)); err == nil || !strings.Contains(err.Error(), "secrets.recipients is not written as an indented block") {
		t.Errorf("flow-style recipients: %v", err)
	}
}

// TestSetRulePutsTheTenantsRuleWhereSopsFindsIt: the rule is rewritten in place when
// only other tenants' rules come before it, and written first when it is new or any
// other rule comes before it (sops takes the first that matches); the other rules and
// the comments stay. A tenant's rule holding keys Eva does not write is refused.
func TestSetRulePutsTheTenantsRuleWhereSopsFindsIt(t *testing.T) {
	re := `^tenants/([^/]+/)*NEWTEN\.[a-z0-9]+\.sops\.yaml$`
	sibling := strings.Replace(re, "NEWTEN", "EXAMPL", 1)
	sample := "tenants/NEWTEN.db.sops.yaml"
	r1, r2 := newRecipient(t), newRecipient(t)
	own := "  - path_regex: '" + re + "'\n    age: " + r2 + "\n"
	other := "# the team's rules\ncreation_rules:\n  # the example\n  - path_regex: '" + sibling + "'\n    age: " + r2 + "\n"
	for name, tc := range map[string]struct {
		data, first string
	}{
		"no file":                      {"", SopsConfigHeader},
		"another tenant's":             {other, "# the team's rules\ncreation_rules:\n  # the example\n  - path_regex: '" + re + "'"},
		"its own, in place":            {other + own, other + "  - path_regex: '" + re + "'\n    encrypted_regex: '^(data|stringData)$'\n    age: " + r1 + "\n"},
		"shadowed by a catch-all":      {"creation_rules:\n  - path_regex: ''\n    age: " + r2 + "\n" + own, "creation_rules:\n  - path_regex: '" + re + "'"},
		"shadowed by a name-only rule": {"creation_rules:\n  - path_regex: db\\.sops\\.yaml$\n    age: " + r2 + "\n" + own, "creation_rules:\n  - path_regex: '" + re + "'"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := SetRule([]byte(tc.data), "NEWTEN", NewRule(re, []string{r1}), sample)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), tc.first) {
				t.Fatalf("want the file to start %q:\n%s", tc.first, out)
			}
			if strings.Count(string(out), re) != 1 || strings.Contains(string(out), "age: "+r2+"\n"+own) {
				t.Errorf("the tenant's rule is not there exactly once, rewritten:\n%s", out)
			}
		})
	}
	for name, data := range map[string]string{
		"flow style":             "creation_rules: [{path_regex: x}]\n",
		"no mapping":             filepath.Join("a", "b"),
		"a rule of its own keys": "creation_rules:\n  - path_regex: '" + re + "'\n    pgp: ABCDEF\n    age: " + r2 + "\n",
	} {
		if _, err := SetRule([]byte(data), "NEWTEN", NewRule(re, []string{r1}), sample); err == nil {
			t.Errorf("%s: edited", name)
		}
	}
}
