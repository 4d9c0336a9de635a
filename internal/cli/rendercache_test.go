package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/rendercache"
)

// ageFiles sets the modification time of every file under dir an hour back, as files
// checked out before the last render are: only then may a render trust that a file it
// recorded has not changed (a file modified within a second of the recording is always
// read again).
func ageFiles(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// incrementalFleet is the example tenants (two with encrypted Secrets) and 30
// generated ones, aged.
func incrementalFleet(t *testing.T) string {
	t.Helper()
	tenants := copyTenants(t)
	writeFleet(t, tenants, 30)
	ageFiles(t, tenants)
	return tenants
}

// renderSummary renders and returns the summary line; the render must succeed.
func renderSummary(t *testing.T, tenants, out string, extra ...string) string {
	t.Helper()
	args := append([]string{"render", "--tenants", tenants, "--out", out, "--charts", filepath.Join(repoRoot, "charts")}, extra...)
	if !strings.Contains(strings.Join(extra, " "), "--overlays") {
		args = append(args, "--overlays", filepath.Join(repoRoot, "overlays"))
	}
	code, msg := runEvactl(t, args...)
	if code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, msg)
	}
	return msg
}

// assertSameAsFullRender renders the same inputs into a new repository (no cache: every
// tenant rendered) and requires the same tree as out's head, with out's worktree and
// index clean as git sees them.
func assertSameAsFullRender(t *testing.T, tenants, out string, extra ...string) {
	t.Helper()
	fresh := filepath.Join(t.TempDir(), "gitops")
	if msg := renderSummary(t, tenants, fresh, extra...); strings.Contains(msg, "unchanged") {
		t.Fatalf("a render into a new repository reused something:\n%s", msg)
	}
	want, got := gitOut(t, fresh, "rev-parse", "HEAD^{tree}"), gitOut(t, out, "rev-parse", "HEAD^{tree}")
	if got != want {
		t.Fatalf("incremental render's tree %s differs from a full render's %s:\n%s", got, want,
			gitOut(t, out, "diff", "--stat", want, got))
	}
	if st := gitOut(t, out, "status", "--porcelain"); st != "" {
		t.Fatalf("worktree or index not clean after the render:\n%s", st)
	}
	if fsck := gitOut(t, out, "fsck", "--strict"); strings.Contains(fsck, "error") {
		t.Fatalf("git fsck: %s", fsck)
	}
}

// assertRenderedAgain renders after a change to something every tenant depends on (or
// that makes the cache unusable): nothing may be reused, and the tree must be a full
// render's.
func assertRenderedAgain(t *testing.T, what, tenants, out string, extra ...string) {
	t.Helper()
	if msg := renderSummary(t, tenants, out, extra...); strings.Contains(msg, "unchanged") {
		t.Fatalf("%s:\n%s", what, msg)
	}
	assertSameAsFullRender(t, tenants, out, extra...)
}

// appendToFile adds text at the end of a file.
func appendToFile(t *testing.T, path, text string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, text...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// changedPaths lists the files the last commit of out changed.
func changedPaths(t *testing.T, out string) []string {
	t.Helper()
	return strings.Fields(gitOut(t, out, "diff", "--name-only", "HEAD~1", "HEAD"))
}

func replaceInFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s holds no %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestIncrementalRenderMatchesFullRender re-renders a repository after each kind of
// change and requires, every time, exactly the tree a full render of the same inputs
// gives, rendering only what changed.
func TestIncrementalRenderMatchesFullRender(t *testing.T) {
	tenants := incrementalFleet(t)
	out := filepath.Join(t.TempDir(), "gitops")
	if msg := renderSummary(t, tenants, out); !strings.Contains(msg, "rendered 33 tenants") {
		t.Fatalf("first render:\n%s", msg)
	}
	commits := func() string { return gitOut(t, out, "rev-list", "--count", "HEAD") }

	t.Run("nothing changed", func(t *testing.T) {
		msg := renderSummary(t, tenants, out)
		if !strings.Contains(msg, "rendered 0 tenants") || !strings.Contains(msg, "33 tenant(s) unchanged") || commits() != "1" {
			t.Fatalf("an unchanged fleet was rendered or committed (%s commits):\n%s", commits(), msg)
		}
	})

	t.Run("one tenant changed", func(t *testing.T) {
		replaceInFile(t, filepath.Join(tenants, "AAAAAB.yaml"), "wave: 2", "wave: 3")
		msg := renderSummary(t, tenants, out)
		if !strings.Contains(msg, "rendered 1 tenants") {
			t.Fatalf("not one tenant rendered:\n%s", msg)
		}
		for _, p := range changedPaths(t, out) {
			if !strings.Contains(p, "aaaaab") {
				t.Errorf("the commit changed %s, not a file of AAAAAB", p)
			}
		}
		assertSameAsFullRender(t, tenants, out)
	})

	t.Run("edit keeping size and modification time", func(t *testing.T) {
		// Same length, and the old time put back: only the change time and the content
		// tell it apart.
		path := filepath.Join(tenants, "AAAAAC.yaml")
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		replaceInFile(t, path, "wave: 3", "wave: 1")
		if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
			t.Fatal(err)
		}
		if msg := renderSummary(t, tenants, out); !strings.Contains(msg, "rendered 1 tenants") {
			t.Fatalf("the edit was missed:\n%s", msg)
		}
		assertSameAsFullRender(t, tenants, out)
	})

	t.Run("tenant with Secrets changed", func(t *testing.T) {
		replaceInFile(t, filepath.Join(tenants, "ACMECO.yaml"), "wave: 2", "wave: 3")
		if msg := renderSummary(t, tenants, out); !strings.Contains(msg, "rendered 1 tenants") {
			t.Fatalf("not one tenant rendered:\n%s", msg)
		}
		assertSameAsFullRender(t, tenants, out)
	})

	t.Run("tenant added and one decommissioned then removed", func(t *testing.T) {
		more := t.TempDir()
		writeFleet(t, more, 31)
		data, _ := os.ReadFile(filepath.Join(more, benchCode(30)+".yaml"))
		if err := os.WriteFile(filepath.Join(tenants, benchCode(30)+".yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		replaceInFile(t, filepath.Join(tenants, "AAAAAD.yaml"), "  tier:", "  lifecycle: Decommissioned\n  tier:")
		if msg := renderSummary(t, tenants, out); !strings.Contains(msg, "rendered 2 tenants") {
			t.Fatalf("want the added and the decommissioned tenant rendered:\n%s", msg)
		}
		assertSameAsFullRender(t, tenants, out)
		removeTenant(t, tenants, "AAAAAD")
		ageFiles(t, tenants)
		msg := renderSummary(t, tenants, out)
		if !strings.Contains(msg, "rendered 0 tenants") || !strings.Contains(msg, "1 removed") {
			t.Fatalf("the removal was not committed alone:\n%s", msg)
		}
		assertSameAsFullRender(t, tenants, out)
	})

	t.Run("removing an active tenant is refused", func(t *testing.T) {
		head := gitOut(t, out, "rev-parse", "HEAD")
		saved, _ := os.ReadFile(filepath.Join(tenants, "AAAAAE.yaml"))
		removeTenant(t, tenants, "AAAAAE")
		code, msg := runEvactl(t, renderArgs(tenants, out)...)
		if code == ExitOK || !strings.Contains(msg, "AAAAAE") || !strings.Contains(msg, "not Decommissioned") {
			t.Fatalf("removal of an active tenant: exit %d\n%s", code, msg)
		}
		if gitOut(t, out, "rev-parse", "HEAD") != head || gitOut(t, out, "status", "--porcelain") != "" {
			t.Fatal("a refused render changed the repository")
		}
		if err := os.WriteFile(filepath.Join(tenants, "AAAAAE.yaml"), saved, 0o644); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("most of the fleet gone is refused", func(t *testing.T) {
		keep := t.TempDir()
		for _, code := range []string{"DEVUSR", "GLOBEX"} {
			for _, f := range globFiles(t, tenants, code+".*") {
				data, _ := os.ReadFile(f)
				_ = os.WriteFile(filepath.Join(keep, filepath.Base(f)), data, 0o644)
			}
		}
		code, msg := runEvactl(t, renderArgs(keep, out)...)
		if code == ExitOK || !strings.Contains(msg, "refusing to publish") {
			t.Fatalf("a render of 2 of 32 tenants was accepted: exit %d\n%s", code, msg)
		}
	})

	t.Run("environment changed", func(t *testing.T) {
		overlays := copyDir(t, filepath.Join(repoRoot, "overlays"))
		settings := filepath.Join(overlays, "dev", "tenant", "environment.yaml")
		replaceInFile(t, settings, "domain: ", "domain: edited.")
		assertRenderedAgain(t, "an environment change reused earlier renders", tenants, out, "--overlays", overlays)
	})

	t.Run("Secret file alone changed", func(t *testing.T) {
		renderSummary(t, tenants, out) // back to the default inputs
		// A rotation changes the file; a newer sops version stands for it here (a comment
		// would be refused, and new ciphertext needs the key).
		replaceInFile(t, filepath.Join(tenants, "ACMECO.crm-database.sops.yaml"), "version: 3.11.0", "version: 3.11.1")
		if msg := renderSummary(t, tenants, out); !strings.Contains(msg, "rendered 1 tenants") {
			t.Fatalf("want ACMECO alone rendered again:\n%s", msg)
		}
		assertSameAsFullRender(t, tenants, out)
	})

	t.Run("overlay patch changed", func(t *testing.T) {
		overlays := copyDir(t, filepath.Join(repoRoot, "overlays"))
		prod := []string{"--env", "prod", "--overlays", overlays}
		renderSummary(t, tenants, out, prod...)
		replaceInFile(t, filepath.Join(overlays, "prod", "tenant", "kustomization.yaml"), "mode: enabled", "mode: warn")
		assertRenderedAgain(t, "a patch change reused earlier renders", tenants, out, prod...)
	})

	t.Run("chart changed", func(t *testing.T) {
		charts := copyDir(t, filepath.Join(repoRoot, "charts"))
		// A chart being edited, before any push: no published versions hold it.
		if err := os.Remove(filepath.Join(charts, chartrepo.LockFile)); err != nil {
			t.Fatal(err)
		}
		renderSummary(t, tenants, out, "--charts", charts)
		appendToFile(t, filepath.Join(charts, "eva-crm", "values.yaml"), "# reviewed\n")
		if msg := renderSummary(t, tenants, out, "--charts", charts); strings.Contains(msg, "unchanged") {
			t.Fatalf("a chart change reused earlier renders:\n%s", msg)
		}
		if msg := renderSummary(t, tenants, out, "--charts", charts, "--verify-charts=false"); strings.Contains(msg, "unchanged") {
			t.Fatalf("a render without verification reused verified renders:\n%s", msg)
		}
	})

	t.Run("catalog changed", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(repoRoot, "internal", "tenant", "catalog.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		catalog := filepath.Join(t.TempDir(), "catalog.yaml")
		if err := os.WriteFile(catalog, data, 0o644); err != nil {
			t.Fatal(err)
		}
		replaceInFile(t, catalog, "defaultMemory: 512Mi", "defaultMemory: 640Mi")
		assertRenderedAgain(t, "a catalog change reused earlier renders", tenants, out, "--catalog", catalog)
	})

	t.Run("unreadable cache", func(t *testing.T) {
		renderSummary(t, tenants, out) // back to the default inputs
		replaceInFile(t, filepath.Join(tenants, "AAAAAB.yaml"), "wave: 3", "wave: 2")
		if err := os.WriteFile(filepath.Join(out, ".git", rendercache.File), []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		assertRenderedAgain(t, "an unreadable cache was used", tenants, out)
	})

	t.Run("commit made by hand", func(t *testing.T) {
		// Someone edits the published tree and commits: the cache no longer describes
		// the head, and the next render puts the tree back.
		manifest := filepath.Join(out, "tenants", "aaaaaf", "manifests.yaml")
		replaceInFile(t, manifest, "kind: Namespace", "kind: Namespace\n# edited by hand")
		gitOut(t, out, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "by hand")
		assertRenderedAgain(t, "the cache of another commit was used", tenants, out)
	})
}

// TestIncrementalRenderFollowsReleases promotes a release step by step: each render
// gives it to the tenants it admitted, rendering only them.
func TestIncrementalRenderFollowsReleases(t *testing.T) {
	_, tenants, rollouts := newSourceRepo(t)
	ageFiles(t, tenants)
	out := filepath.Join(t.TempDir(), "gitops")
	args := []string{"--rollouts", rollouts, "--verify-charts=false"}
	renderSummary(t, tenants, out, args...)
	if code, msg := promote(t, tenants, rollouts, "--assume-ready"); code != ExitOK {
		t.Fatalf("promote: exit %d\n%s", code, msg)
	}
	msg := renderSummary(t, tenants, out, args...)
	if strings.Contains(msg, "rendered 0 tenants") || !strings.Contains(msg, "unchanged") {
		t.Fatalf("the promoted release was not rendered, or everything was:\n%s", msg)
	}
	assertSameAsFullRender(t, tenants, out, args...)
}

func globFiles(t *testing.T, dir, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// copyDir copies a folder of regular files and folders.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
