package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// commitFleet commits every file of the fleet repository at dir and returns the commit.
func commitFleet(t *testing.T, dir string) plumbing.Hash {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit("fleet", &git.CommitOptions{Author: &object.Signature{Name: "Dev", Email: "dev@example.com", When: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestPublishGitNamesTheFleetCommit: the published commit names the fleet commit it
// was rendered from in its trailers; a publish from tenant files that differ from that
// commit (files git ignores aside) is refused, naming them, and pushes nothing, unless
// --allow-dirty, whose commit says so.
func TestPublishGitNamesTheFleetCommit(t *testing.T) {
	fleet := t.TempDir()
	if _, err := git.PlainInit(fleet, false); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(fleet, "tenants"), os.DirFS(copyTenants(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fleet, ".gitignore"), []byte("*.bak\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	commit := commitFleet(t, fleet)
	// A file git ignores is no change of the fleet.
	if err := os.WriteFile(filepath.Join(fleet, "tenants", "DEVUSR.yaml.bak"), []byte("# an editor's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "published.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"publish", "git", "--repo", bare, "--branch", "main", "--cache-dir", t.TempDir()}, common(filepath.Join(fleet, "tenants"))...)
	published := func() *object.Commit {
		t.Helper()
		repo, err := git.PlainOpen(bare)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := repo.Reference("refs/heads/main", true)
		if err != nil {
			t.Fatal(err)
		}
		c, err := repo.CommitObject(ref.Hash())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if code, out := runEvactl(t, args...); code != ExitOK {
		t.Fatalf("publish git from a clean fleet: exit %d\n%s", code, out)
	}
	first := published()
	if want := "\n\nEva-Fleet-Revision: master@sha1:" + commit.String(); !strings.HasSuffix(strings.TrimSpace(first.Message), strings.TrimSpace(want)) {
		t.Errorf("the published commit's message does not end with the trailer %q:\n%s", want, first.Message)
	}

	tenantFile := filepath.Join(fleet, "tenants", "DEVUSR.yaml")
	data, err := os.ReadFile(tenantFile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "logLevel: debug", "logLevel: info", 1)
	if err := os.WriteFile(tenantFile, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fleet, "tenants", "README.md"), []byte("# not yet a tenant\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runEvactl(t, args...)
	if code != ExitUsage || !strings.Contains(out, "tenants/DEVUSR.yaml (modified), tenants/README.md (added)") || !strings.Contains(out, "--allow-dirty") {
		t.Errorf("publish git from an edited fleet: exit %d, want %d naming the edited files and --allow-dirty:\n%s", code, ExitUsage, out)
	}
	if published().Hash != first.Hash {
		t.Error("the refused publish pushed a commit")
	}
	if err := os.Remove(filepath.Join(fleet, "tenants", "README.md")); err != nil {
		t.Fatal(err)
	}
	if code, out := runEvactl(t, append(args, "--allow-dirty")...); code != ExitOK {
		t.Fatalf("publish git --allow-dirty: exit %d\n%s", code, out)
	}
	if msg := published().Message; !strings.Contains(msg, "Eva-Fleet-Uncommitted: 1 files") {
		t.Errorf("the commit published from an edited fleet does not say so:\n%s", msg)
	}
}

// TestDirtyFleetNamesAreEscaped: a file named to forge a CI log line (a newline, then a
// workflow command) is named on one line in the refusal.
func TestDirtyFleetNamesAreEscaped(t *testing.T) {
	s := fleetState{revision: "main@sha1:abc", changed: []string{"tenants/x\n::error::forged (added)"}}
	err := s.checkClean(false)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), `tenants/x\n::error::forged (added)`) {
		t.Errorf("refusal %q: want the file named on one line, its newline escaped", err)
	}
}
