package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is where the example tenants, overlays and charts live.
const repoRoot = "../.."

func runEvactl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := Execute(args, &out, &out)
	return code, out.String()
}

func renderArgs(tenants, out string, extra ...string) []string {
	return append([]string{"render", "--tenants", tenants, "--out", out,
		"--overlays", filepath.Join(repoRoot, "overlays"), "--charts", filepath.Join(repoRoot, "charts"), "--quiet"}, extra...)
}

// gitOut runs the git command line in dir: the repository Eva writes must read the
// same with the reference implementation.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func copyTenants(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(repoRoot, "tenants", "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRenderCommitsToLocalRepository(t *testing.T) {
	tenants := copyTenants(t)
	out := filepath.Join(t.TempDir(), "gitops")

	if code, msg := runEvactl(t, renderArgs(tenants, out)...); code != ExitOK {
		t.Fatalf("first render: exit %d\n%s", code, msg)
	}
	if n := gitOut(t, out, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("%s commits after the first render, want 1", n)
	}
	if st := gitOut(t, out, "status", "--porcelain"); st != "" {
		t.Fatalf("worktree not clean after render:\n%s", st)
	}
	if fsck := gitOut(t, out, "fsck", "--strict"); strings.Contains(fsck, "error") {
		t.Fatalf("git fsck: %s", fsck)
	}
	files := gitOut(t, out, "ls-files")
	for _, want := range []string{"kustomization.yaml", "flux/devusr.yaml", "tenants/devusr/manifests.yaml", "tenants/globex/kustomization.yaml"} {
		if !strings.Contains(files, want) {
			t.Errorf("%s not committed:\n%s", want, files)
		}
	}

	// Nothing changed: nothing committed.
	if code, msg := runEvactl(t, renderArgs(tenants, out)...); code != ExitOK {
		t.Fatalf("second render: exit %d\n%s", code, msg)
	}
	if n := gitOut(t, out, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("%s commits after an unchanged render, want 1", n)
	}

	// One tenant changes: one commit naming it, touching only its files.
	devusr := filepath.Join(tenants, "DEVUSR.yaml")
	data, _ := os.ReadFile(devusr)
	if err := os.WriteFile(devusr, bytes.Replace(data, []byte("replicaCount: 1"), []byte("replicaCount: 2"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, msg := runEvactl(t, renderArgs(tenants, out)...); code != ExitOK {
		t.Fatalf("third render: exit %d\n%s", code, msg)
	}
	if msg := gitOut(t, out, "log", "-1", "--format=%B"); !strings.Contains(msg, "Changed: DEVUSR") {
		t.Errorf("commit message does not list the changed tenant:\n%s", msg)
	}
	if changed := gitOut(t, out, "diff", "--name-only", "HEAD~1", "HEAD"); changed != "tenants/devusr/workloads/manifests.yaml" {
		t.Errorf("changed files = %q, want only the DEVUSR bundle", changed)
	}
	if st := gitOut(t, out, "status", "--porcelain"); st != "" {
		t.Fatalf("worktree not clean:\n%s", st)
	}
}

// removeTenant removes a tenant's file and its encrypted Secrets, as a pull request
// removing the tenant does.
func removeTenant(t *testing.T, dir, code string) {
	t.Helper()
	secrets, _ := filepath.Glob(filepath.Join(dir, code+".*.sops.yaml"))
	for _, f := range append(secrets, filepath.Join(dir, code+".yaml")) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRenderRefusesUnsafeRemovals(t *testing.T) {
	tenants := copyTenants(t)
	out := filepath.Join(t.TempDir(), "gitops")
	if code, msg := runEvactl(t, renderArgs(tenants, out)...); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, msg)
	}
	head := gitOut(t, out, "rev-parse", "HEAD")

	// Removing an active tenant is refused, naming it.
	removeTenant(t, tenants, "ACMECO")
	code, msg := runEvactl(t, renderArgs(tenants, out)...)
	if code == ExitOK || !strings.Contains(msg, "ACMECO") || !strings.Contains(msg, "not Decommissioned") {
		t.Fatalf("removal of an active tenant: exit %d\n%s", code, msg)
	}
	// Removing most of the fleet is refused even with every file gone.
	for _, code := range []string{"DEVUSR", "GLOBEX"} {
		removeTenant(t, tenants, code)
	}
	if err := os.WriteFile(filepath.Join(tenants, "README.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, msg = runEvactl(t, renderArgs(tenants, out)...)
	if code == ExitOK {
		t.Fatalf("empty input accepted:\n%s", msg)
	}
	if got := gitOut(t, out, "rev-parse", "HEAD"); got != head {
		t.Fatalf("a refused render moved HEAD")
	}
	if st := gitOut(t, out, "status", "--porcelain"); st != "" {
		t.Fatalf("a refused render touched the worktree:\n%s", st)
	}
}

func TestRenderRemovesDecommissionedTenant(t *testing.T) {
	tenants := copyTenants(t)
	out := filepath.Join(t.TempDir(), "gitops")
	acme := filepath.Join(tenants, "ACMECO.yaml")
	data, _ := os.ReadFile(acme)
	if err := os.WriteFile(acme, bytes.Replace(data, []byte("  tier: Customer\n"), []byte("  tier: Customer\n  lifecycle: Decommissioned\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, msg := runEvactl(t, renderArgs(tenants, out)...); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, msg)
	}
	removeTenant(t, tenants, "ACMECO")
	if code, msg := runEvactl(t, renderArgs(tenants, out)...); code != ExitOK {
		t.Fatalf("removing a decommissioned tenant: exit %d\n%s", code, msg)
	}
	if files := gitOut(t, out, "ls-files"); strings.Contains(files, "acmeco") {
		t.Errorf("ACMECO still published:\n%s", files)
	}
	if _, err := os.Stat(filepath.Join(out, "tenants", "acmeco")); !os.IsNotExist(err) {
		t.Errorf("ACMECO folder left in the worktree: %v", err)
	}
}

func TestRenderPlainFolder(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tree")
	if code, msg := runEvactl(t, renderArgs(filepath.Join(repoRoot, "tenants"), out, "--git=false", "--verify-charts=false")...); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(filepath.Join(out, ".git")); !os.IsNotExist(err) {
		t.Error("--git=false created a repository")
	}
	if _, err := os.Stat(filepath.Join(out, "tenants", "globex", "manifests.yaml")); err != nil {
		t.Error(err)
	}
}

func TestRenderRefusesInvalidTenantsAndWritesNothing(t *testing.T) {
	tenants := copyTenants(t)
	data, _ := os.ReadFile(filepath.Join(tenants, "DEVUSR.yaml"))
	_ = os.WriteFile(filepath.Join(tenants, "DEVUSR.yaml"), bytes.Replace(data, []byte("tier: Starter"), []byte("tier: Gold"), 1), 0o644)
	out := filepath.Join(t.TempDir(), "tree")
	code, msg := runEvactl(t, renderArgs(tenants, out, "--git=false")...)
	if code != ExitInvalid || !strings.Contains(msg, "DEVUSR.yaml:9:9: spec.tier") {
		t.Fatalf("exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("an invalid render wrote output")
	}
}

func TestRenderFailsOnChartSchemaViolation(t *testing.T) {
	tenants := copyTenants(t)
	data, _ := os.ReadFile(filepath.Join(tenants, "DEVUSR.yaml"))
	_ = os.WriteFile(filepath.Join(tenants, "DEVUSR.yaml"), bytes.Replace(data, []byte("logLevel: debug"), []byte("logLevel: chatty"), 1), 0o644)
	out := filepath.Join(t.TempDir(), "tree")
	code, msg := runEvactl(t, renderArgs(tenants, out)...)
	// Refused by the render's chart check, reported at the line that set the value.
	if code != ExitInvalid || !strings.Contains(msg, "DEVUSR.yaml:18:17: spec.helmValues[crm].logLevel: refused by chart eva-crm") {
		t.Fatalf("exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused render left %s behind", out)
	}
}

func TestMissingRootIsWhatARunCreates(t *testing.T) {
	base := t.TempDir()
	for in, want := range map[string]string{
		base:                               "",
		filepath.Join(base, "a"):           filepath.Join(base, "a"),
		filepath.Join(base, "a", "b", "c"): filepath.Join(base, "a"),
	} {
		got, err := missingRoot(in)
		if err != nil || got != want {
			t.Errorf("missingRoot(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestRenderIntoExistingFolderKeepsItOnRefusal(t *testing.T) {
	tenants := copyTenants(t)
	data, _ := os.ReadFile(filepath.Join(tenants, "DEVUSR.yaml"))
	_ = os.WriteFile(filepath.Join(tenants, "DEVUSR.yaml"), bytes.Replace(data, []byte("replicaCount: 1"), []byte("replicaCount: !vault secret/x"), 1), 0o644)
	out := t.TempDir() // exists, empty, not a repository
	code, msg := runEvactl(t, renderArgs(tenants, out)...)
	if code != ExitInvalid || !strings.Contains(msg, "DEVUSR.yaml:17:21: spec.helmValues[crm].replicaCount: YAML tag !vault") {
		t.Fatalf("exit %d\n%s", code, msg)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a refused render wrote into the existing folder: %v", entries)
	}
}
