package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
)

// TestEncryptedSecretsArePublishedAsWritten renders a tenant with an encrypted Secret:
// the file is in the tree byte for byte (SOPS authenticates every value in document
// order), listed with the workloads, decrypted by the workloads Kustomization with the
// tenant's own key, and writable by the tenant's applier in its namespace only (a
// RoleBinding of the foundation, which is applied first). A
// tenant without Secrets gets none of it, and a Secret the tenant's key cannot decrypt,
// or another tenant's key could (a copy of that tenant's ciphertext), is refused.
func TestEncryptedSecretsArePublishedAsWritten(t *testing.T) {
	base := renderer(t)
	env := *base.Env
	const fixtureRecipient = "age100vamtj4ypar8tdvtralkclnhq0szhegad8pvvj2w7zlxrmz8s7snr94yr"
	other := "age1" + strings.Repeat("q", 58)
	env.Settings.Secrets = &overlay.Secrets{KeySecretPrefix: "sops-age-", Recipients: map[string][]string{"ACMECO": {fixtureRecipient}, "GLOBEX": {other}}}
	// What the sops CLI wrote (internal/tenantfile's fixture).
	encrypted, err := os.ReadFile(filepath.Join("..", "tenantfile", "testdata", "ACMECO.crm-database.sops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Renderer{Catalog: base.Catalog, Env: &env}
	withSecret := tenantFor("ACMECO")
	withSecret.Spec.Secrets = []evav1.EncryptedSecret{{Name: "crm-database", Sops: string(encrypted)}}

	files, err := r.TenantFiles(withSecret)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string][]byte{}
	for _, f := range files {
		byPath[f.Path] = f.Data
	}
	if got := byPath["tenants/acmeco/workloads/secrets/acmeco-crm-database.yaml"]; !bytes.Equal(got, encrypted) {
		t.Fatalf("the encrypted Secret is not published as written: %q (files: %v)", got, keys(byPath))
	}
	if k := string(byPath["tenants/acmeco/workloads/kustomization.yaml"]); !strings.Contains(k, "- secrets/acmeco-crm-database.yaml") {
		t.Errorf("the workloads do not list the Secret:\n%s", k)
	}
	flux := string(byPath["flux/acmeco.yaml"])
	if strings.Count(flux, "decryption:") != 1 || !strings.Contains(flux, "provider: sops") || !strings.Contains(flux, "name: sops-age-acmeco\n") {
		t.Errorf("want decryption on the workloads Kustomization only:\n%s", flux)
	}
	foundation := string(byPath["tenants/acmeco/manifests.yaml"])
	if !strings.Contains(foundation, "name: "+SecretsRoleBindingName) || !strings.Contains(foundation, "name: eva-tenant-secrets") {
		t.Errorf("no RoleBinding granting the applier the namespace's Secrets:\n%s", foundation)
	}

	plain, err := r.TenantFiles(tenantFor("GHIJKL"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plain {
		if strings.Contains(string(f.Data), "decryption:") || strings.Contains(string(f.Data), SecretsRoleBindingName) || strings.Contains(f.Path, "/secrets/") {
			t.Errorf("a tenant without Secrets got %s", f.Path)
		}
	}

	without := *base.Env
	without.Settings.Secrets = nil
	noKey := &Renderer{Catalog: base.Catalog, Env: &without}
	if _, err := noKey.TenantFiles(withSecret); err == nil || !strings.Contains(err.Error(), "no secrets settings") {
		t.Errorf("an environment without secrets settings: %v", err)
	}
	for name, recipients := range map[string]struct {
		keys map[string][]string
		want string
	}{
		"a tenant without keys":     {map[string][]string{"GLOBEX": {other}}, "ACMECO has no age recipients"},
		"another key of the tenant": {map[string][]string{"ACMECO": {other}}, "not encrypted for any age recipient of tenant ACMECO"},
		// GLOBEX's file copied as ACMECO's: GLOBEX's key is in it.
		"another tenant's key": {map[string][]string{"ACMECO": {other}, "GLOBEX": {fixtureRecipient}}, "a recipient of tenant GLOBEX"},
	} {
		e := *base.Env
		e.Settings.Secrets = &overlay.Secrets{KeySecretPrefix: "sops-age-", Recipients: recipients.keys}
		if _, err := (&Renderer{Catalog: base.Catalog, Env: &e}).TenantFiles(withSecret); err == nil || !strings.Contains(err.Error(), recipients.want) {
			t.Errorf("%s: got %v, want %q", name, err, recipients.want)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
