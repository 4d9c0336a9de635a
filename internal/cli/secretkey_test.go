package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/aidonow/eva/internal/sopsdoc"
	"github.com/aidonow/eva/internal/testcluster"
)

// sopsCLI runs the real sops CLI (built by hack/e2e-binaries.sh, as make test does
// first) in dir.
func sopsCLI(t *testing.T, dir string, args ...string) {
	t.Helper()
	bins, err := testcluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bins.Sops); err != nil {
		t.Fatalf("%s is not built: run make e2e-binaries", bins.Sops)
	}
	cmd := exec.Command(bins.Sops, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sops %v: %v\n%s", args, err, stderr.String())
	}
}

// TestSecretsAddKeyGivesATenantItsKey is a platform engineer giving a new tenant of a
// fleet evactl init made its first Secret: one command makes the key and the two
// edits; the real sops CLI then encrypts the tenant's file with no flag but the file
// (the rule in .sops.yaml), evactl validate accepts it for the environment, and the
// private key add-key wrote decrypts it. A second key for the tenant, and a key folder
// git would commit, are refused with nothing written.
func TestSecretsAddKeyGivesATenantItsKey(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	home := t.TempDir()
	t.Chdir(home)
	if code, out := runEvactl(t, "init", "fleet", "--domain", "dev.acme.test"); code != ExitOK {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	t.Chdir(filepath.Join(home, "fleet"))
	example, _ := os.ReadFile("tenants/EXAMPL.yaml")
	acmeco := strings.NewReplacer("name: exampl", "name: acmeco", "capsuleCode: EXAMPL", "capsuleCode: ACMECO").Replace(string(example))
	writeFile(t, "tenants/ACMECO.yaml", acmeco)
	gitOut(t, ".", "init", "-q", "-b", "main")
	gitOut(t, ".", "add", "-A")
	gitOut(t, ".", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fleet")
	envFile := filepath.Join("overlays", "dev", "tenant", "environment.yaml")
	envBefore, _ := os.ReadFile(envFile)

	code, stdout, out := runEvactlStdout(t, "secrets", "add-key", "ACMECO", "-o", "json")
	var rep addKeyReport
	if code != ExitOK || json.Unmarshal(stdout, &rep) != nil {
		t.Fatalf("add-key: exit %d\n%s", code, out)
	}
	if rep.Secret != "sops-age-acmeco" || strings.Join(rep.Namespaces, ",") != "flux-system,eva-system" || strings.Contains(out, "AGE-SECRET-KEY") {
		t.Errorf("add-key's report: %+v\n%s", rep, out)
	}
	info, err := os.Stat(rep.KeyFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the private key %s: %v %v", rep.KeyFile, info, err)
	}
	keyData, _ := os.ReadFile(rep.KeyFile)
	ids, err := age.ParseIdentities(bytes.NewReader(keyData))
	if err != nil || len(ids) != 1 || ids[0].(*age.X25519Identity).Recipient().String() != rep.Recipient {
		t.Fatalf("the key file does not hold the reported recipient's key: %v", err)
	}
	envAfter, _ := os.ReadFile(envFile)
	for _, line := range strings.Split(string(envBefore), "\n") {
		if !strings.Contains(string(envAfter), line+"\n") {
			t.Fatalf("the environment lost the line %q:\n%s", line, envAfter)
		}
	}
	if status := gitOut(t, ".", "status", "--porcelain"); status != "M .sops.yaml\n M overlays/dev/tenant/environment.yaml" {
		t.Errorf("git sees, after add-key (the key ignored):\n%s", status)
	}

	secretFile := "tenants/ACMECO.crm-database.sops.yaml"
	writeFile(t, secretFile, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: acmeco-crm-database\n  namespace: eva-tenant-acmeco\ntype: Opaque\nstringData:\n  password: correct-horse\n")
	sopsCLI(t, ".", "--encrypt", "--in-place", secretFile)
	if code, out := runEvactl(t, "validate", "--verify-charts=false"); code != ExitOK || !strings.Contains(out, "2 tenant file(s) valid") {
		t.Fatalf("validate with ACMECO's Secret: exit %d\n%s", code, out)
	}
	// The loader reads Secret files in folders below tenants/ too: so does the rule.
	if err := os.Mkdir("tenants/team-a", 0o755); err != nil {
		t.Fatal(err)
	}
	nested := "tenants/team-a/ACMECO.crm-api.sops.yaml"
	writeFile(t, nested, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: acmeco-crm-api\n  namespace: eva-tenant-acmeco\ntype: Opaque\nstringData:\n  token: t0ken\n")
	sopsCLI(t, "tenants/team-a", "--encrypt", "--in-place", "ACMECO.crm-api.sops.yaml")
	if code, out := runEvactl(t, "validate", "--verify-charts=false"); code != ExitOK {
		t.Fatalf("validate with ACMECO's Secret in a folder below tenants/: exit %d\n%s", code, out)
	}
	encrypted, _ := os.ReadFile(secretFile)
	values, err := sopsdoc.Decrypt(encrypted, ids...)
	if err != nil || string(values["password"]) != "correct-horse" {
		t.Fatalf("the key add-key wrote does not decrypt what sops encrypted by its rule: %v %q", err, values)
	}

	sopsNow, _ := os.ReadFile(".sops.yaml")
	if code, out := runEvactl(t, "secrets", "add-key", "ACMECO"); code != ExitUsage || !strings.Contains(out, "already has an age key in this environment") {
		t.Errorf("a second key for ACMECO: exit %d\n%s", code, out)
	}
	writeFile(t, ".gitignore", "/out/\n")
	if code, out := runEvactl(t, "secrets", "add-key", "GLOBEX"); code != ExitUsage || !strings.Contains(out, "is not ignored by git") {
		t.Errorf("a key folder git would commit: exit %d\n%s", code, out)
	}
	writeFile(t, ".gitignore", "/out/\n/keys/\n/elsewhere/\n")
	if err := os.Rename("keys", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere", "keys"); err != nil {
		t.Fatal(err)
	}
	if code, out := runEvactl(t, "secrets", "add-key", "GLOBEX"); code != ExitUsage || !strings.Contains(out, "keys is not a folder (a link?)") {
		t.Errorf("a linked key folder: exit %d\n%s", code, out)
	}
	// Before the fleet is a repository, its .gitignore decides.
	if err := os.RemoveAll(".git"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove("keys"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ".gitignore", "/out/\n")
	if code, out := runEvactl(t, "secrets", "add-key", "GLOBEX"); code != ExitUsage || !strings.Contains(out, "is not ignored by git") {
		t.Errorf("a key folder the fleet's .gitignore would let git commit: exit %d\n%s", code, out)
	}
	envNow, _ := os.ReadFile(envFile)
	sopsLast, _ := os.ReadFile(".sops.yaml")
	if _, err := os.Stat("elsewhere/GLOBEX.agekey"); err == nil || fileExists("keys/GLOBEX.agekey") || !bytes.Equal(envNow, envAfter) || !bytes.Equal(sopsNow, sopsLast) {
		t.Errorf("a refused add-key wrote something (GLOBEX's key: %v)", err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
