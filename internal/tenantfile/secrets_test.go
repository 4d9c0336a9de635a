package tenantfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// encryptedFixture is a Secret encrypted by the real sops CLI (hack/e2e-binaries.sh
// builds it) for a throwaway age recipient whose private key was never kept:
//
//	sops --encrypt --age <recipient> --encrypted-regex '^(data|stringData)$' ...
const encryptedFixture = "testdata/ACMECO.crm-database.sops.yaml"

func fixture(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(encryptedFixture)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseSecretAcceptsWhatSopsWrote(t *testing.T) {
	s, problems := ParseSecret("tenants/ACMECO.crm-database.sops.yaml", []byte(fixture(t)))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if s.Name != "acmeco-crm-database" || s.Code != "ACMECO" || strings.Join(s.Keys, ",") != "password" || len(s.Recipients) != 1 {
		t.Fatalf("parsed %+v", s)
	}
}

// TestParseSecretRefuses changes one thing at a time in what sops wrote; each change is
// refused with the field at fault, and no message quotes a secret value.
func TestParseSecretRefuses(t *testing.T) {
	const plaintext = "hunter2-do-not-print"
	cases := map[string]struct {
		file          string
		edit          func(string) string
		field, phrase string
	}{
		"a value left in plaintext": {edit: func(s string) string {
			return replaceLine(s, "password:", "    password: "+plaintext)
		}, field: "stringData.password", phrase: "is not encrypted"},
		"another tenant's namespace": {edit: func(s string) string {
			return strings.Replace(s, "namespace: eva-tenant-acmeco", "namespace: eva-tenant-globex", 1)
		}, field: "metadata.namespace", phrase: "must be eva-tenant-acmeco"},
		"a name the file does not promise": {edit: func(s string) string {
			return strings.Replace(s, "name: acmeco-crm-database", "name: globex-crm-database", 1)
		}, field: "metadata.name", phrase: "must be acmeco-crm-database"},
		"a file named for no tenant": {file: "tenants/acmeco.db.sops.yaml", edit: func(s string) string { return s },
			phrase: "<CODE>.<name>.sops.yaml"},
		"a service account token": {edit: func(s string) string {
			return strings.Replace(s, "kind: Secret", "kind: Secret\ntype: kubernetes.io/service-account-token", 1)
		}, field: "type", phrase: "must be Opaque"},
		"an annotation": {edit: func(s string) string {
			return strings.Replace(s, "metadata:", "metadata:\n    annotations:\n        kustomize.toolkit.fluxcd.io/ssa: Merge", 1)
		}, field: "metadata.annotations", phrase: "not allowed"},
		"a label other than the watch label": {edit: func(s string) string {
			return strings.Replace(s, "reconcile.fluxcd.io/watch: Enabled", "app.kubernetes.io/managed-by: Helm", 1)
		}, field: "metadata.labels", phrase: "the only label allowed"},
		"never encrypted": {edit: func(s string) string {
			return "apiVersion: v1\nkind: Secret\nmetadata:\n    name: acmeco-crm-database\n    namespace: eva-tenant-acmeco\nstringData:\n    password: " + plaintext + "\n"
		}, field: "stringData.password", phrase: "is not encrypted"},
		"two manifests in one file": {edit: func(s string) string { return s + "---\n" + s },
			phrase: "exactly one Secret manifest"},
		"a MAC that leaves the namespace out": {edit: func(s string) string {
			return strings.Replace(s, "sops:", "sops:\n    mac_only_encrypted: true", 1)
		}, field: "sops.mac_only_encrypted", phrase: "must not be set"},
		"another kind": {edit: func(s string) string { return strings.Replace(s, "kind: Secret", "kind: ConfigMap", 1) },
			field: "kind", phrase: `must be "Secret"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := c.file
			if file == "" {
				file = "tenants/ACMECO.crm-database.sops.yaml"
			}
			s, problems := ParseSecret(file, []byte(c.edit(fixture(t))))
			if s != nil {
				t.Fatalf("accepted: %+v", s)
			}
			found := false
			for _, p := range problems {
				if strings.Contains(p.String(), plaintext) {
					t.Errorf("a message quotes the secret value: %s", p)
				}
				if p.Field == c.field && strings.Contains(p.Message, c.phrase) {
					found = true
				}
			}
			if !found {
				t.Errorf("want a problem at %q saying %q, got %v", c.field, c.phrase, problems)
			}
		})
	}
}

func replaceLine(s, prefix, with string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			lines[i] = with
			break
		}
	}
	return strings.Join(lines, "\n")
}

// TestLoadRequiresTheSecretsMountsName loads a Customer tenant whose secretMounts hands
// acmeco-crm-database to crm: without its encrypted file the mount is refused at the
// line of its secret; with it (also when the tenant file is named on its own) it loads;
// a second mount of a Secret no file provides, and a secret file of no tenant read, are
// refused.
func TestLoadRequiresTheSecretsMountsName(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	tenantFile, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "tenants", "ACMECO.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The line of the example's mount, where the problem must point.
	mountLine := 0
	for i, l := range strings.Split(string(tenantFile), "\n") {
		if strings.TrimSpace(l) == "secret: crm-database" {
			mountLine = i + 1
		}
	}
	if mountLine == 0 {
		t.Fatal("tenants/ACMECO.yaml mounts no crm-database: the test needs it")
	}
	write := func(dir, name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	load := func(paths ...string) *Result {
		res, err := Load(paths, catalog)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// want finds a problem at field and line (0: any line after the first) saying phrase.
	want := func(res *Result, field string, line int, phrase string) {
		t.Helper()
		for _, p := range res.Problems {
			if p.Field == field && strings.Contains(p.Message, phrase) && (p.Line == line || line == 0 && p.Line > 1 == (field != "")) {
				return
			}
		}
		t.Errorf("want a problem at %q, line %d, saying %q, got %v", field, line, phrase, res.Problems)
	}

	dir := t.TempDir()
	write(dir, "ACMECO.yaml", string(tenantFile))
	res := load(dir)
	want(res, "spec.secretMounts[0].secret", mountLine, "no encrypted Secret provides acmeco-crm-database: add ACMECO.crm-database.sops.yaml beside this file")
	if len(res.Problems) != 1 {
		t.Errorf("want one problem, got %v", res.Problems)
	}

	write(dir, "ACMECO.crm-database.sops.yaml", fixture(t))
	if res := load(dir); !res.Valid() || len(res.Tenants[0].Object.Spec.Secrets) != 1 {
		t.Fatalf("with the encrypted Secret: %v, %d secrets", res.Problems, len(res.Secrets))
	}
	if res := load(filepath.Join(dir, "ACMECO.yaml")); !res.Valid() || len(res.Secrets) != 1 {
		t.Fatalf("the tenant file named on its own: %v, %d secrets", res.Problems, len(res.Secrets))
	}

	write(dir, "ACMECO.yaml", strings.TrimRight(string(tenantFile), "\n")+"\n    - module: whisper\n      secret: whisper-token\n")
	res = load(dir)
	want(res, "spec.secretMounts[1].secret", mountLine+2, "no encrypted Secret provides acmeco-whisper-token: add ACMECO.whisper-token.sops.yaml")
	if len(res.Problems) != 1 {
		t.Errorf("only the mount without its file is refused, got %v", res.Problems)
	}

	write(dir, "ACMECO.yaml", string(tenantFile))
	write(dir, "GLOBEX.crm-database.sops.yaml", strings.ReplaceAll(strings.ReplaceAll(fixture(t), "acmeco", "globex"), "ACMECO", "GLOBEX"))
	want(load(dir), "", 0, "belongs to tenant GLOBEX")
}
