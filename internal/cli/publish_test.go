package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/aidonow/eva/internal/publish"
)

func common(tenants string) []string {
	return []string{"--tenants", tenants, "--overlays", filepath.Join(repoRoot, "overlays"), "--charts", filepath.Join(repoRoot, "charts")}
}

// commonOCI is common for publish oci: the shipped dev environment, its gitopsSource an
// OCIRepository (publish oci refuses an environment whose Flux source reads git).
func commonOCI(t *testing.T, tenants string) []string {
	t.Helper()
	overlays := filepath.Join(t.TempDir(), "overlays")
	if err := os.CopyFS(filepath.Join(overlays, "dev", "tenant"), os.DirFS(filepath.Join(repoRoot, "overlays", "dev", "tenant"))); err != nil {
		t.Fatal(err)
	}
	asOCISource(t, overlays)
	return []string{"--tenants", tenants, "--overlays", overlays, "--charts", filepath.Join(repoRoot, "charts")}
}

// asOCISource makes the dev environment under overlays read its published tree from an
// OCIRepository.
func asOCISource(t *testing.T, overlays string) {
	t.Helper()
	file := filepath.Join(overlays, "dev", "tenant", "environment.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const git = "gitopsSource:\n  kind: GitRepository\n"
	if !strings.Contains(string(data), git) {
		t.Fatalf("%s names no GitRepository as its gitopsSource", file)
	}
	data = []byte(strings.Replace(string(data), git, "gitopsSource:\n  kind: OCIRepository\n", 1))
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPublishGitAndDiff(t *testing.T) {
	tenants := copyTenants(t)
	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	target := []string{"--repo", bare, "--branch", "main", "--path", "clusters/dev", "--cache-dir", cache}

	code, out := runEvactl(t, append(append([]string{"publish", "git"}, common(tenants)...), target...)...)
	if code != ExitOK {
		t.Fatalf("publish: exit %d\n%s", code, out)
	}
	if files := gitOut(t, bare, "ls-tree", "-r", "--name-only", "main"); !strings.Contains(files, "clusters/dev/tenants/devusr/manifests.yaml") {
		t.Fatalf("published tree:\n%s", files)
	}
	// Flux resolves a Kustomization's path from the repository root, not from --path.
	if ks := gitOut(t, bare, "show", "main:clusters/dev/flux/devusr.yaml"); !strings.Contains(ks, `path: "./clusters/dev/tenants/devusr"`) {
		t.Fatalf("the tenant Kustomization does not point below --path:\n%s", ks)
	}

	diffArgs := append(append([]string{"diff", "--exit-code"}, common(tenants)...), target...)
	if code, out := runEvactl(t, diffArgs...); code != ExitOK || !strings.Contains(out, "no changes") {
		t.Fatalf("diff right after publish: exit %d\n%s", code, out)
	}

	data, _ := os.ReadFile(filepath.Join(tenants, "DEVUSR.yaml"))
	_ = os.WriteFile(filepath.Join(tenants, "DEVUSR.yaml"), bytes.Replace(data, []byte("replicaCount: 1"), []byte("replicaCount: 2"), 1), 0o644)
	code, out = runEvactl(t, diffArgs...)
	summary := "~ DEVUSR (changed)\n    ~ HelmRelease eva-tenant-devusr/crm\n        spec.values.replicaCount: 1 → 2\n"
	if code != ExitInvalid || !strings.Contains(out, summary) || strings.Contains(out, "spec-digest") || strings.Contains(out, "+    replicaCount: 2") {
		t.Fatalf("diff after a change: exit %d, want %d and the field's change alone:\n%s", code, ExitInvalid, out)
	}
	if code, out := runEvactl(t, append(diffArgs, "--unified", "--bookkeeping")...); code != ExitInvalid ||
		!strings.Contains(out, "+    replicaCount: 2") || !strings.Contains(out, `metadata.annotations["eva.aidonow.com/spec-digest"]: `) {
		t.Fatalf("diff --unified --bookkeeping: exit %d\n%s", code, out)
	}

	// What publish refuses after the merge, diff refuses on the pull request, with the
	// same reason: an Active tenant's file removed.
	aside := t.TempDir()
	acmeco := []string{"ACMECO.yaml", "ACMECO.crm-database.sops.yaml"}
	for _, f := range acmeco {
		if err := os.Rename(filepath.Join(tenants, f), filepath.Join(aside, f)); err != nil {
			t.Fatal(err)
		}
	}
	const refusal = "refusing to remove tenant(s) ACMECO: their published bundle is not Decommissioned"
	code, out = runEvactl(t, append(append([]string{"diff"}, common(tenants)...), target...)...)
	if code != ExitInvalid || !strings.Contains(out, "publish would refuse this render: "+refusal) || !strings.Contains(out, "- ACMECO (removed)") {
		t.Fatalf("diff removing an Active tenant: exit %d, want %d and publish's refusal:\n%s", code, ExitInvalid, out)
	}
	if code, out := runEvactl(t, append(append([]string{"publish", "git"}, common(tenants)...), target...)...); code == ExitOK || !strings.Contains(out, refusal) {
		t.Fatalf("publish removing an Active tenant: exit %d\n%s", code, out)
	}
	code, out = runEvactl(t, append(append([]string{"diff", "-o", "yaml"}, common(tenants)...), target...)...)
	if code != ExitInvalid || !strings.Contains(out, "publishRefusal: 'refusing to remove tenant(s) ACMECO:") {
		t.Fatalf("diff -o yaml removing an Active tenant: exit %d\n%s", code, out)
	}
	if code, out := runEvactl(t, append(append([]string{"diff"}, common(tenants)...), "--repo", bare, "--branch", "mian", "--cache-dir", cache)...); code != ExitInvalid ||
		!strings.Contains(out, `branch "mian" does not exist in `) {
		t.Fatalf("diff against a branch that does not exist: exit %d\n%s", code, out)
	}
	for _, f := range acmeco {
		if err := os.Rename(filepath.Join(aside, f), filepath.Join(tenants, f)); err != nil {
			t.Fatal(err)
		}
	}

	code, out = runEvactl(t, append(append([]string{"diff", "-o", "json"}, common(tenants)...), target...)...)
	var report struct{ Changed []string }
	if code != ExitOK || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report) != nil || strings.Join(report.Changed, ",") != "DEVUSR" {
		t.Fatalf("json diff: exit %d\n%s", code, out)
	}
}

func TestPublishOCIAndDiff(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/eva/tenants:dev"
	tenants := copyTenants(t)
	inputs := commonOCI(t, tenants)
	args := append([]string{"publish", "oci", "--ref", ref, "--insecure", "--revision", "main@sha1:abc", "--source", "https://example.com/t.git"}, inputs...)
	code, out := runEvactl(t, args...)
	if code != ExitOK || !strings.Contains(out, "sha256:") {
		t.Fatalf("publish oci: exit %d\n%s", code, out)
	}
	digest := strings.TrimSpace(out[strings.LastIndex(out, "sha256:"):])
	code, out = runEvactl(t, args...)
	if code != ExitOK || !strings.Contains(out, "nothing changed") || !strings.Contains(out, digest) {
		t.Fatalf("republish: exit %d\n%s", code, out)
	}
	if code, out := runEvactl(t, append([]string{"diff", "--exit-code", "--ref", ref, "--insecure"}, inputs...)...); code != ExitOK {
		t.Fatalf("diff against the artifact: exit %d\n%s", code, out)
	}
	missing := strings.Replace(ref, ":dev", ":prod", 1)
	if code, out := runEvactl(t, append([]string{"diff", "--ref", missing, "--insecure"}, common(tenants)...)...); code != ExitInvalid ||
		!strings.Contains(out, missing+": no such tag") {
		t.Fatalf("diff against a tag that does not exist: exit %d\n%s", code, out)
	}
}

func TestPublishCredentialsNeverFromArguments(t *testing.T) {
	tenants := copyTenants(t)
	code, out := runEvactl(t, append([]string{"publish", "git", "--repo", "https://example.invalid/x.git", "--token-env", "EVA_TEST_UNSET_TOKEN"}, common(tenants)...)...)
	if code != ExitUsage || !strings.Contains(out, "EVA_TEST_UNSET_TOKEN is not set") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if code, _ := runEvactl(t, "publish", "git", "--password", "x"); code != ExitUsage {
		t.Fatalf("a --password flag exists")
	}
}

func TestPathFlagsStayInsideTheRepository(t *testing.T) {
	tenants := copyTenants(t)
	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"../escape", "a/../../b", ".git/hooks", "/etc", "a//b", "./a", `a\b`, "a\n::warning::x"} {
		for _, cmd := range [][]string{{"publish", "git"}, {"diff"}} {
			args := append(append(append([]string{}, cmd...), common(tenants)...), "--repo", bare, "--path", path, "--cache-dir", filepath.Join(t.TempDir(), "c"))
			code, out := runEvactl(t, args...)
			if code != ExitUsage || !strings.Contains(out, "--path: path ") || !strings.Contains(out, "not a folder inside the repository") {
				t.Errorf("%v --path %q: exit %d\n%s", cmd, path, code, out)
			}
			if strings.Contains(out, "\n::warning") {
				t.Errorf("--path %q echoed unescaped:\n%s", path, out)
			}
		}
	}
	if refs := gitOut(t, bare, "for-each-ref"); refs != "" {
		t.Errorf("a refused --path published:\n%s", refs)
	}
}

func TestErrorsArePrintedSafely(t *testing.T) {
	got := printable(errors.New("refused: \x1b[2Jx\n::warning file=evil::pwned\n    - at '/a': b"))
	want := "refused: \\x1b[2Jx\n  | ::warning file=evil::pwned\n  | - at '/a': b"
	if got != want {
		t.Errorf("printable:\n got %q\nwant %q", got, want)
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "::") {
			t.Errorf("line %q starts a workflow command", l)
		}
	}
}

// TestPublishGitWithoutAHomeRefuses: with neither HOME nor XDG_CACHE_HOME, and no
// --cache-dir, publish git says what to set and writes nothing to the shared temporary
// folder (where another user could have planted a clone of the right name first).
func TestPublishGitWithoutAHomeRefuses(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	bare := filepath.Join(t.TempDir(), "published.git")
	gitOut(t, filepath.Dir(bare), "init", "--bare", "-q", bare)
	code, out := runEvactl(t, "publish", "git", "--repo", bare, "--branch", "main", "--tenants", filepath.Join(repoRoot, "tenants"),
		"--overlays", filepath.Join(repoRoot, "overlays"), "--charts", filepath.Join(repoRoot, "charts"))
	if code != ExitUsage || !strings.Contains(out, "set HOME or XDG_CACHE_HOME, or pass --cache-dir") {
		t.Fatalf("publish git without a home: exit %d\n%s", code, out)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("the temporary folder holds %d entries, want none", len(entries))
	}
}

// TestPublishRefusesAnotherSourceKind: publish oci for an environment whose Flux
// reads a GitRepository, and publish git for one that reads an OCIRepository, are
// refused with the fix, and nothing is pushed: the tenants' Kustomizations would
// name a source that never sees the tree.
func TestPublishRefusesAnotherSourceKind(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	tenants := copyTenants(t)
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/eva/tenants:dev"
	code, out := runEvactl(t, append([]string{"publish", "oci", "--ref", ref, "--insecure", "--revision", "main@sha1:abc", "--source", "https://example.com/t.git"}, common(tenants)...)...)
	if code != ExitUsage || !strings.Contains(out, "GitRepository flux-system/eva-tenants (gitopsSource)") || !strings.Contains(out, "publish to git") {
		t.Errorf("publish oci for a GitRepository environment: exit %d, want %d naming the source and publish git:\n%s", code, ExitUsage, out)
	}
	if tree, err := (&publish.OCI{Ref: ref, Insecure: true}).Pull(context.Background()); err != nil || len(tree) > 0 {
		t.Errorf("after the refused publish oci, the tag holds %d files (%v), want none", len(tree), err)
	}

	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"publish", "git", "--repo", bare, "--branch", "main", "--cache-dir", t.TempDir()}, commonOCI(t, tenants)...)
	code, out = runEvactl(t, args...)
	if code != ExitUsage || !strings.Contains(out, "OCIRepository flux-system/eva-tenants (gitopsSource)") || !strings.Contains(out, "publish to oci") {
		t.Errorf("publish git for an OCIRepository environment: exit %d, want %d naming the source and publish oci:\n%s", code, ExitUsage, out)
	}
	repo, err := git.PlainOpen(bare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Reference("refs/heads/main", false); err == nil {
		t.Error("the refused publish git pushed a branch")
	}
}
