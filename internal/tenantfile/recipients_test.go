package tenantfile_test

import (
	"os"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenantfile"
)

// An external test: overlay reads environment files with tenantfile's decoder.

func readFixture(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("testdata/ACMECO.crm-database.sops.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCheckRecipients: a tenant's Secret is encrypted for its own recipients in the
// environment, never for another tenant's.
func TestCheckRecipients(t *testing.T) {
	s, problems := tenantfile.ParseSecret("tenants/ACMECO.crm-database.sops.yaml", []byte(readFixture(t)))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	own := func(recipients ...string) func(string, []string) string {
		return (&overlay.Secrets{KeySecretPrefix: "sops-age-", Recipients: map[string][]string{"ACMECO": recipients}}).CheckFor
	}
	if p := tenantfile.CheckRecipients([]*tenantfile.SecretFile{s}, own(s.Recipients...), "dev"); len(p) > 0 {
		t.Errorf("its own recipient: %v", p)
	}
	other := "age1" + strings.Repeat("q", 58)
	if p := tenantfile.CheckRecipients([]*tenantfile.SecretFile{s}, own(other), "prod"); len(p) != 1 ||
		!strings.Contains(p[0].Message, "environment prod: not encrypted for any age recipient of tenant ACMECO") || p[0].Field != "sops.age" {
		t.Errorf("another key of the tenant: %v", p)
	}
	globex := (&overlay.Secrets{KeySecretPrefix: "sops-age-", Recipients: map[string][]string{"ACMECO": {other}, "GLOBEX": s.Recipients}}).CheckFor
	if p := tenantfile.CheckRecipients([]*tenantfile.SecretFile{s}, globex, "dev"); len(p) != 1 || !strings.Contains(p[0].Message, "a recipient of tenant GLOBEX") {
		t.Errorf("encrypted for another tenant's key: %v", p)
	}
}
