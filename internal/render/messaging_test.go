package render

import (
	"bytes"
	"path/filepath"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/tenant"
)

// TestNATSAccountsRenderReferencesOnly: in an environment with natsAccounts, a tenant's
// foundation holds its NACK Account (the Secret of its credentials, by name, on NACK's
// own servers), both its Streams name it, and every module release mounts the
// credentials beside the tenant's own Secrets; the tree holds no key material. Without
// natsAccounts, none of it is rendered.
func TestNATSAccountsRenderReferencesOnly(t *testing.T) {
	acmeco := tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database"))
	charts, err := chartcheck.Load(filepath.Join("..", "..", "charts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, accounts := range []bool{false, true} {
		r := renderer(t)
		r.Env.Settings.NATSAccounts = accounts
		b, err := r.Bundle(acmeco)
		if err != nil {
			t.Fatal(err)
		}
		var nackAccounts, streams, releases int
		for _, o := range b.Objects() {
			spec, _ := o["spec"].(map[string]any)
			switch o["kind"] {
			case "Account":
				nackAccounts++
				creds, _ := spec["creds"].(map[string]any)
				secret, _ := creds["secret"].(map[string]any)
				if o["metadata"].(map[string]any)["name"] != tenant.NATSAccountObject || len(spec) != 1 ||
					secret["name"] != tenant.NATSCredsSecret("ACMECO") || creds["file"] != tenant.NATSCredsKey {
					t.Errorf("NACK Account %v, want %s with creds %s/%s alone", o, tenant.NATSAccountObject, tenant.NATSCredsSecret("ACMECO"), tenant.NATSCredsKey)
				}
			case "Stream":
				streams++
				if got, want := spec["account"], map[bool]any{true: tenant.NATSAccountObject}[accounts]; got != want {
					t.Errorf("natsAccounts %v: Stream %s names account %v, want %v", accounts, spec["name"], got, want)
				}
			case "HelmRelease":
				releases++
				values, _ := spec["values"].(map[string]any)
				mounts, _ := values[tenant.SecretMountsValuesKey].([]any)
				if got := hasMount(mounts, tenant.NATSMount, tenant.NATSCredsSecret("ACMECO")); got != accounts {
					t.Errorf("natsAccounts %v: release %v mounts the NATS credentials: %v (mounts %v)", accounts, o["metadata"], got, mounts)
				}
				if module := o["metadata"].(map[string]any)["name"]; module == "crm" && !hasMount(mounts, "crm-database", "acmeco-crm-database") {
					t.Errorf("natsAccounts %v: crm lost the tenant's own mount: %v", accounts, mounts)
				}
			}
		}
		if want := map[bool]int{true: 1}[accounts]; nackAccounts != want || streams != 2 || releases == 0 {
			t.Errorf("natsAccounts %v: %d NACK Accounts, %d Streams, %d releases; want %d, 2 and some", accounts, nackAccounts, streams, releases, want)
		}
		// The charts as published take the values: their schema holds every mount to a
		// Secret of the tenant's and a revision of sixteen hex digits.
		for _, rel := range chartcheck.ReleasesIn("ACMECO", b.Objects()) {
			if err := charts.Check(rel); err != nil {
				t.Errorf("natsAccounts %v: %s: %v", accounts, rel.Module, err)
			}
		}
		files, err := r.TenantFiles(acmeco)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			for _, marker := range []string{"NATS USER JWT", "USER NKEY SEED"} {
				if bytes.Contains(f.Data, []byte(marker)) {
					t.Errorf("%s holds %q", f.Path, marker)
				}
			}
		}
	}
}

func hasMount(mounts []any, name, secret string) bool {
	for _, m := range mounts {
		if m, _ := m.(map[string]any); m["name"] == name && m["secretName"] == secret {
			return true
		}
	}
	return false
}
