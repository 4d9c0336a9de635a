package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forgedRelease is a release file whose versions key holds a GitHub workflow command on
// a line of its own and an ANSI escape.
const forgedRelease = `apiVersion: eva.aidonow.com/v1alpha1
kind: EvaRollout
metadata:
  name: crm-1-5
  namespace: eva-system
spec:
  versions:
    "\n::error file=x::forged\e[31m": 1.5.0
  waves:
  - wave: 1
`

// assertNoInjection fails when output holds an ESC byte, or a line (blanks trimmed, as
// GitHub Actions reads them) that starts a workflow command other than allowed ones.
func assertNoInjection(t *testing.T, what, output string, allowed ...string) {
	t.Helper()
	if strings.ContainsRune(output, '\x1b') {
		t.Errorf("%s: the output holds an ESC byte:\n%q", what, output)
	}
lines:
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimLeft(l, " \t")
		if !strings.HasPrefix(l, "::") {
			continue
		}
		for _, a := range allowed {
			if strings.HasPrefix(l, a) {
				continue lines
			}
		}
		t.Errorf("%s: a line starts a workflow command: %q", what, l)
	}
	if !strings.Contains(output, "spec.versions") {
		t.Errorf("%s: the release file's problem is not reported:\n%s", what, output)
	}
}

// TestReleaseFileProblemsAreEscaped: a release file's problems reach every printer of
// evactl escaped, in text and in GitHub Actions annotations.
func TestReleaseFileProblemsAreEscaped(t *testing.T) {
	repo := t.TempDir()
	tenants := prTenants(t, repo)
	rollouts := filepath.Join(repo, "rollouts")
	if err := os.MkdirAll(rollouts, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(rollouts, "crm-1-5.yaml")
	if err := os.WriteFile(file, []byte(forgedRelease), 0o644); err != nil {
		t.Fatal(err)
	}
	for what, args := range map[string][]string{
		"rollout status":  {"rollout", "status", "--rollouts", rollouts},
		"rollout promote": {"rollout", "promote", "crm-1-5", "--tenants", tenants, "--rollouts", rollouts, "--assume-ready"},
		"render": {"render", "--tenants", tenants, "--rollouts", rollouts, "--out", filepath.Join(t.TempDir(), "out"),
			"--overlays", filepath.Join(repoRoot, "overlays"), "--verify-charts=false"},
		"validate": {"validate", "--rollouts", rollouts, "--verify-charts=false", tenants},
	} {
		code, out := runEvactl(t, args...)
		if code != ExitInvalid {
			t.Errorf("%s: exit %d, want %d:\n%s", what, code, ExitInvalid, out)
		}
		assertNoInjection(t, what, out)
	}
	code, out := runEvactl(t, "validate", "-o", "github", "--rollouts", rollouts, "--verify-charts=false", tenants)
	if code != ExitInvalid {
		t.Errorf("validate -o github: exit %d, want %d:\n%s", code, ExitInvalid, out)
	}
	assertNoInjection(t, "validate -o github", out, "::error file="+file+",")
}

// TestGitProvenanceHasNoCredentials: the origin URL of the checkout, with a token in it,
// is recorded in the artifact's source annotation without the token.
func TestGitProvenanceHasNoCredentials(t *testing.T) {
	dir := t.TempDir()
	gitOut(t, dir, "init", "-q", "-b", "main")
	gitOut(t, dir, "remote", "add", "origin", "https://x-access-token:ghp_s3cr3tT0ken@git.example.com/platform/fleet.git")
	source, _ := gitProvenance(dir)
	if source != "https://git.example.com/platform/fleet.git" {
		t.Errorf("source annotation %q, want the URL without credentials", source)
	}
}

// TestRepoURLWithCredentialsIsRefused: credentials come from the environment or files,
// never from arguments: --repo with a token in it is refused, the token neither printed
// nor stored in the cache.
func TestRepoURLWithCredentialsIsRefused(t *testing.T) {
	repo := t.TempDir()
	tenants := prTenants(t, repo)
	cache := filepath.Join(t.TempDir(), "cache")
	code, out := runEvactl(t, "diff", "--repo", "https://eva:ghp_s3cr3tT0ken@127.0.0.1:1/fleet.git", "--cache-dir", cache,
		"--tenants", tenants, "--overlays", filepath.Join(repoRoot, "overlays"), "--verify-charts=false")
	if code != ExitUsage {
		t.Errorf("exit %d, want %d (usage):\n%s", code, ExitUsage, out)
	}
	if strings.Contains(out, "ghp_s3cr3tT0ken") {
		t.Errorf("the token is printed:\n%s", out)
	}
	if config, err := os.ReadFile(filepath.Join(cache, "config")); err == nil && strings.Contains(string(config), "ghp_s3cr3tT0ken") {
		t.Errorf("the cache's git config holds the token:\n%s", config)
	}
	if !strings.Contains(out, "EVA_GIT_TOKEN") {
		t.Errorf("the refusal does not say how to pass credentials:\n%s", out)
	}
}

// TestForgedAuthorIsRefused: a commit author with a newline or '<' '>' (from a flag or
// its environment variable) is refused before anything is committed.
func TestForgedAuthorIsRefused(t *testing.T) {
	repo := t.TempDir()
	tenants := prTenants(t, repo)
	for name, tc := range map[string]struct {
		args []string
		env  [2]string
	}{
		"newline in --author-name":    {args: []string{"--author-name", "Eva\nSigned-off-by: Mallory <m@example.com>"}},
		"'>' in EVA_GIT_AUTHOR_EMAIL": {env: [2]string{"EVA_GIT_AUTHOR_EMAIL", "eva@example.com> 0 +0000"}},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			out := filepath.Join(t.TempDir(), "out")
			code, msg := runEvactl(t, append([]string{"render", "--tenants", tenants, "--out", out,
				"--overlays", filepath.Join(repoRoot, "overlays"), "--verify-charts=false"}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(msg, "author") {
				t.Errorf("exit %d, want %d with the author refused:\n%s", code, ExitUsage, msg)
			}
			if err := exec.Command("git", "-C", out, "rev-parse", "--verify", "HEAD").Run(); err == nil {
				t.Errorf("a commit was made:\n%s", gitOut(t, out, "log", "--format=%an <%ae>%n%B"))
			}
		})
	}
}
