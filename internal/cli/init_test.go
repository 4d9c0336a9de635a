package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
)

// TestInitMakesAWorkingFleet is a new user's first hour, in a folder outside Eva's
// source tree, with evactl only: init, validate, render, publish to a local bare
// repository and diff against it, from the fleet's root and from a folder below it. The
// fleet holds one environment and no charts: prod and the module charts come from the
// release evactl carries, and a chart or environment of the fleet's own replaces the
// released one of its name.
func TestInitMakesAWorkingFleet(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	home := t.TempDir()
	t.Chdir(home)
	if code, out := runEvactl(t, "init", "fleet", "--domain", "dev.acme.test", "--owners", "@acme/platform"); code != ExitOK {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	t.Chdir(filepath.Join(home, "fleet"))
	if key, err := os.Stat("keys/EXAMPL.agekey"); err != nil || key.Mode().Perm() != 0o600 {
		t.Fatalf("the example tenant's private key: %v %v", key, err)
	}
	if ignore, _ := os.ReadFile(".gitignore"); !strings.Contains(string(ignore), "/keys/") {
		t.Fatalf(".gitignore does not keep the private keys out:\n%s", ignore)
	}
	// The platform owns what decides how every tenant is rendered; tenants own their files.
	owners, _ := os.ReadFile(".github/CODEOWNERS")
	owned := map[string]string{}
	for _, line := range strings.Split(string(owners), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			owned[f[0]] = f[1]
		}
	}
	for _, path := range []string{"/eva.yaml", "/overlays/", "/charts/", "/rollouts/", "/.github/"} {
		if owned[path] != "@acme/platform" {
			t.Fatalf("CODEOWNERS does not give %s to the platform:\n%s", path, owners)
		}
	}
	if _, ok := owned["/tenants/"]; ok {
		t.Fatalf("CODEOWNERS takes the tenant files from the tenants:\n%s", owners)
	}

	if code, out := runEvactl(t, "validate"); code != ExitOK || !strings.Contains(out, "1 tenant file(s) valid") || strings.Contains(out, "not checked against the module charts") {
		t.Fatalf("validate in a new fleet: exit %d\n%s", code, out)
	}
	bare := filepath.Join(t.TempDir(), "published.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	target := []string{"--repo", bare, "--branch", "main", "--cache-dir", filepath.Join(t.TempDir(), "cache")}
	if code, out := runEvactl(t, append([]string{"publish", "git", "-q"}, target...)...); code != ExitOK {
		t.Fatalf("publish: exit %d\n%s", code, out)
	}
	manifests := gitOut(t, bare, "show", "main:tenants/exampl/workloads/manifests.yaml") +
		gitOut(t, bare, "show", "main:tenants/exampl/manifests.yaml")
	if !strings.Contains(manifests, "exampl.dev.acme.test") || !strings.Contains(manifests, "/eva-crm\n") {
		t.Fatalf("the published tenant is not the fleet's dev environment with the released charts:\n%s", manifests)
	}
	if err := os.Mkdir("tenants/notes", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir("tenants/notes")
	if code, out := runEvactl(t, append([]string{"diff", "--exit-code"}, target...)...); code != ExitOK || !strings.Contains(out, "no changes") {
		t.Fatalf("diff from below the fleet's root right after publish: exit %d\n%s", code, out)
	}
	t.Chdir(filepath.Join(home, "fleet"))

	// An environment the fleet does not hold is the release's; one it does not and the
	// release does not either is named with those that exist.
	if code, out := runEvactl(t, "render", "--env", "prod", "--out", filepath.Join(t.TempDir(), "prod"), "--git=false", "-q"); code != ExitOK {
		t.Fatalf("render --env prod from the release: exit %d\n%s", code, out)
	}
	if code, out := runEvactl(t, "validate", "--env", "staging"); code != ExitUsage || !strings.Contains(out, "no such environment in overlays (dev) or in Eva 0.0.0-devel (airgap, dev, prod)") {
		t.Fatalf("validate --env staging: exit %d\n%s", code, out)
	}

	// A chart folder of the fleet's own replaces the released chart of its name: here
	// one whose schema allows no more than one replica.
	released := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "eva", "release")
	entries, err := os.ReadDir(released)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the release's files were not unpacked once into the cache: %v %v", entries, err)
	}
	own := filepath.Join("charts", "eva-crm")
	if err := os.CopyFS(own, os.DirFS(filepath.Join(released, entries[0].Name(), "charts", "eva-crm"))); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(own, "values.schema.json")
	data, _ := os.ReadFile(schema)
	narrowed := strings.Replace(string(data), `"replicaCount": {"type": "integer", "minimum": 0, "maximum": 20}`, `"replicaCount": {"type": "integer", "minimum": 0, "maximum": 0}`, 1)
	if narrowed == string(data) {
		t.Fatalf("eva-crm's schema has no replicaCount to narrow:\n%s", data)
	}
	if err := os.WriteFile(schema, []byte(narrowed), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runEvactl(t, "validate"); code != ExitInvalid || !strings.Contains(out, "tenants/EXAMPL.yaml:17:") || !strings.Contains(out, "replicaCount") {
		t.Fatalf("validate with the fleet's own eva-crm: exit %d\n%s", code, out)
	}
}

// TestInitWritesOverNothing refuses a folder holding any file init would write, names
// them, and writes none of the others.
func TestInitWritesOverNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "eva.yaml"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runEvactl(t, "init", dir)
	if code != ExitUsage || !strings.Contains(out, "[eva.yaml]") || !strings.Contains(out, "init writes over nothing") {
		t.Fatalf("init over eva.yaml: exit %d\n%s", code, out)
	}
	entries, _ := os.ReadDir(dir)
	if data, _ := os.ReadFile(filepath.Join(dir, "eva.yaml")); len(entries) != 1 || string(data) != "mine\n" {
		t.Fatalf("init wrote into a folder it refused: %v", entries)
	}
	if code, out := runEvactl(t, "init", t.TempDir(), "--env", "Prod"); code != ExitUsage || !strings.Contains(out, `--env "Prod"`) {
		t.Fatalf("init --env Prod: exit %d\n%s", code, out)
	}
}

// TestInitRefusesALinkedFolder: a folder init writes into (keys/, overlays/) that is a
// symlink is refused with its name, and nothing is written, neither where it points
// nor in the fleet's folder: a linked keys/ would put the tenant's private key
// wherever the link points.
func TestInitRefusesALinkedFolder(t *testing.T) {
	for _, link := range []string{"keys", "overlays", "overlays/dev", ".github"} {
		t.Run(link, func(t *testing.T) {
			dir, elsewhere := t.TempDir(), t.TempDir()
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, link)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
			code, out := runEvactl(t, "init", dir)
			if code != ExitUsage || !strings.Contains(out, filepath.Join(dir, link)+" is a symlink, not a folder") {
				t.Fatalf("init with %s linked: exit %d\n%s", link, code, out)
			}
			if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
				t.Fatalf("init wrote %d entries where %s points", len(entries), link)
			}
			if _, err := os.Stat(filepath.Join(dir, "eva.yaml")); err == nil {
				t.Fatal("init wrote eva.yaml into a folder it refused")
			}
		})
	}
}

// TestTheFleetsPublishTarget: eva.yaml's environment and publish target are what
// publish git, diff and validate use when no flag names them; a target flag replaces
// the whole target. Seen failing before: publish git without --repo was a usage error
// in every fleet.
func TestTheFleetsPublishTarget(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	home := t.TempDir()
	t.Chdir(home)
	if code, out := runEvactl(t, "init", "fleet", "--env", "staging", "--domain", "staging.acme.test", "--owners", "@acme/platform"); code != ExitOK {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	t.Chdir(filepath.Join(home, "fleet"))
	bare := filepath.Join(t.TempDir(), "published.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	project, _ := os.ReadFile("eva.yaml")
	if !strings.Contains(string(project), "environment: staging\n") {
		t.Fatalf("init wrote no environment into eva.yaml:\n%s", project)
	}
	project = append(project, fmt.Sprintf("publish:\n  repo: %s\n  path: clusters/staging\n", bare)...)
	if err := os.WriteFile("eva.yaml", project, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runEvactl(t, "publish", "git", "-q", "--cache-dir", filepath.Join(t.TempDir(), "cache")); code != ExitOK {
		t.Fatalf("publish git with eva.yaml's target: exit %d\n%s", code, out)
	}
	if manifests := gitOut(t, bare, "show", "main:clusters/staging/tenants/exampl/workloads/manifests.yaml"); !strings.Contains(manifests, "exampl.staging.acme.test") {
		t.Fatalf("not published in eva.yaml's environment below its path:\n%s", manifests)
	}
	if code, out := runEvactl(t, "diff", "--exit-code", "--cache-dir", filepath.Join(t.TempDir(), "cache")); code != ExitOK || !strings.Contains(out, "no changes") {
		t.Fatalf("diff against eva.yaml's target: exit %d\n%s", code, out)
	}
	if code, out := runEvactl(t, "diff", "--dir", t.TempDir()); code != ExitOK || !strings.Contains(out, "+ EXAMPL (added)") {
		t.Fatalf("diff --dir replaces eva.yaml's target: exit %d\n%s", code, out)
	}
}
