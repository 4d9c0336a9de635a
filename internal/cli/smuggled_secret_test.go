package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmuggledSecretObjectsAreRefused is issue 32's critical finding as the CLI meets
// it: a tenant Secret file that kustomize would read as other objects (alias keys naming
// a List, a second kind, a merge key, a token Secret) is refused by validate at its file,
// line and field, and render publishes nothing. The example's own file, as sops wrote
// it, is published unchanged (Eva's form of it is the same bytes).
func TestSmuggledSecretObjectsAreRefused(t *testing.T) {
	secretFile := filepath.Join(repoRoot, "tenants", exampleSecret)
	example, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(example)
	cases := map[string]struct {
		doc  string
		want string // file-relative "line:col: field" of the first problem
	}{
		"alias keys make a List": {strings.Replace(strings.Replace(doc, "apiVersion: v1\nkind: Secret\n", "*v : v1\n*k : List\n", 1),
			"sops:\n", "sops:\n    x: &v apiVersion\n    y: &k kind\n", 1), ":1:1: "},
		"a second kind":     {strings.Replace(doc, "kind: Secret\n", "kind: Secret\nkind: List\n", 1), ":3:1: kind: duplicate key"},
		"a merge key":       {strings.Replace(doc, "metadata:\n", "metadata:\n    <<: {annotations: {a: b}}\n", 1), ":4:5: metadata: keys must be plain strings"},
		"a token Secret":    {strings.Replace(doc, "stringData:", "type: kubernetes.io/service-account-token\nstringData:", 1), ":8:7: type: must be Opaque"},
		"a custom tag":      {strings.Replace(doc, "kind: Secret", "kind: !List Secret", 1), ":2:7: kind: YAML tags"},
		"an anchored value": {strings.Replace(doc, "kind: Secret", "kind: &k Secret", 1), ":2:7: kind: YAML anchors"},
		"a second document": {doc + "---\n" + doc, ":1:1: "},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant, exampleSecret: c.doc})
			code, out, _ := runValidate(t, dir, "--verify-charts=false")
			if code != ExitInvalid || !strings.Contains(out, exampleSecret+c.want) {
				t.Fatalf("validate: exit %d, want %d with %q:\n%s", code, ExitInvalid, exampleSecret+c.want, out)
			}
			tree := filepath.Join(t.TempDir(), "tree")
			if code, msg := runEvactl(t, renderArgs(dir, tree, "--git=false", "--verify-charts=false")...); code == ExitOK {
				t.Fatalf("render accepted it:\n%s", msg)
			}
			if _, err := os.Stat(tree); !os.IsNotExist(err) {
				t.Error("a refused render wrote output")
			}
		})
	}

	t.Run("what sops wrote is published as written", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant})
		tree := filepath.Join(t.TempDir(), "tree")
		if code, msg := runEvactl(t, renderArgs(dir, tree, "--git=false", "--verify-charts=false")...); code != ExitOK {
			t.Fatalf("exit %d\n%s", code, msg)
		}
		published, err := os.ReadFile(filepath.Join(tree, "tenants", "acmeco", "workloads", "secrets", "acmeco-crm-database.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if string(published) != doc {
			t.Errorf("published:\n%s\nwant the file as sops wrote it:\n%s", published, doc)
		}
	})

	t.Run("another tenant's file replayed", func(t *testing.T) {
		// Issue 32, finding 2: GLOBEX's file copied for ACMECO with only its name and
		// namespace changed. kustomize-controller does not check the MAC, so it would
		// decrypt GLOBEX's values into ACMECO's namespace.
		dir := copyTenants(t)
		globex, err := os.ReadFile(filepath.Join(dir, "GLOBEX.gateway-tls.sops.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		stolen := strings.Replace(strings.Replace(string(globex), "name: globex-gateway-tls", "name: acmeco-stolen", 1),
			"namespace: eva-tenant-globex", "namespace: eva-tenant-acmeco", 1)
		if err := os.WriteFile(filepath.Join(dir, "ACMECO.stolen.sops.yaml"), []byte(stolen), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, _ := runValidate(t, dir, "--verify-charts=false")
		want := "ACMECO.stolen.sops.yaml:1:1: sops: carries ciphertext of"
		if code != ExitInvalid || !strings.Contains(out, want) {
			t.Fatalf("validate: exit %d, want %d with %q:\n%s", code, ExitInvalid, want, out)
		}
	})
}
