package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestRolloutPullRequestPathOnRealFlux is the release without an operator: tenant and
// release files in a team's repository, `evactl rollout promote` taking one step per
// commit with the tenants' health read from the cluster, `evactl publish git` bringing
// each commit to the real Flux. A release whose crm never becomes ready halts in wave 1
// (promote exits 1, the halt committed) while wave 2 is untouched; a newer release
// supersedes it and goes wave by wave, one wave-2 tenant at a time, each step only once
// the tenants before it are Ready on it, as a watch of the HelmReleases saw them.
func TestRolloutPullRequestPathOnRealFlux(t *testing.T) {
	parallel(t)
	pushCrmVersions(t)
	ctx := context.Background()
	const source = "eva-pr-rollout"
	url := newGitRepository(t, "pr-rollout.git")
	if err := bootstrapSource(ctx, "GitRepository", source, url, "main", "10s"); err != nil {
		t.Fatal(err)
	}
	settings := gitOpsSource("GitRepository", source)
	settings["releaseTimeout"] = "45s"
	env := environment(t, settings)
	charts := teamCharts(t)

	waveOf := map[string]int{"PRWAVA": 1, "PRWAVB": 2, "PRWAVC": 2}
	repo := t.TempDir()
	tenants, rollouts := filepath.Join(repo, "tenants"), filepath.Join(repo, "rollouts")
	for _, dir := range []string{tenants, rollouts} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for code, wave := range waveOf {
		writeFile(t, filepath.Join(tenants, code+".yaml"), fmt.Sprintf(`apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: %s
  namespace: eva-system
spec:
  capsuleCode: %s
  tier: Starter
  wave: %d
`, strings.ToLower(code), code, wave))
	}
	sourceGit(t, repo, "init", "-q", "-b", "main")
	sourceGit(t, repo, "add", "-A")
	sourceGit(t, repo, "commit", "-q", "-m", "three tenants")

	publish := func(what string) {
		t.Helper()
		cmd := exec.Command(evactl, "publish", "git", "--repo", url, "--branch", "main", "--env", "dev",
			"--overlays", env, "--charts", charts, "--tenants", tenants, "--rollouts", rollouts, "--cache-dir", t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("evactl publish git (%s): %v\n%s", what, err, out)
		}
		requestReconcile(t, "GitRepository", source)
	}
	// promote runs one step of a release; a step that committed is published at once.
	// The chart-version check is left out (--verify-charts=false): it loads every chart
	// at each call of this poll loop, and has its own test (internal/cli); without the
	// flag, the eva.yaml above this package would give it Eva's charts folder.
	promote := func(name string) (string, error) {
		cmd := exec.Command(evactl, "rollout", "promote", name, "--tenants", tenants, "--rollouts", rollouts, "--verify-charts=false",
			"--kubeconfig", cluster.KubeConfig, "--author-name", "release-bot", "--author-email", "bot@example.com")
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), "committed ") {
			publish(name + ": " + firstLineOf(string(out)))
		}
		return string(out), err
	}
	// step promotes until the output says want. Its timeouts are deadlines, not budgets:
	// under the full suite, Flux took more than 5 minutes to apply one published commit.
	step := func(name, want string, timeout time.Duration) string {
		t.Helper()
		var out string
		poll(t, name+": "+want, timeout, func() error {
			var err error
			if out, err = promote(name); strings.Contains(out, want) {
				return nil
			}
			time.Sleep(2 * time.Second)
			return fmt.Errorf("%v: %s", err, out)
		})
		return out
	}

	publish("the tenants")
	poll(t, "every crm Ready at "+crmBase, 6*time.Minute, func() error { return crmReadyAt(waveOf, crmBase) })
	history := watchReleases(t, waveOf)

	// The broken release halts in wave 1: promote records the halt and fails.
	writeFile(t, filepath.Join(rollouts, "crm-broken.yaml"), releaseFile("crm-broken", crmBroken, "40s"))
	sourceGit(t, repo, "add", "rollouts/crm-broken.yaml")
	sourceGit(t, repo, "commit", "-q", "-m", "the crm "+crmBroken+" release")
	// Wave 2 untouched: no write of its releases' spec or metadata (generation, chart
	// version, and the time of every write that is not a status write). Their
	// resourceVersion is not compared: under the full suite the halt takes more than the
	// releases' 5m interval, and helm-controller's periodic reconcile then notes their
	// status (the operator-mode scenario halts sooner and compares resourceVersions).
	wave2Of := map[string]int{"PRWAVB": 2, "PRWAVC": 2}
	settledReleases(t, wave2Of)
	wave2 := specWrites(t, wave2Of)
	step("crm-broken", "wave 1 admits PRWAVA", 3*time.Minute)
	out := step("crm-broken", "halted in wave 1: PRWAVA not Ready on the release within 40s", 10*time.Minute)
	if !strings.Contains(out, "committed ") {
		t.Errorf("the halt was not committed:\n%s", out)
	}
	if _, err := promote("crm-broken"); err == nil {
		t.Error("promote of a halted release exited 0")
	}
	if got := specWrites(t, wave2Of); fmt.Sprint(got) != fmt.Sprint(wave2) {
		t.Errorf("wave 2's crm releases were written under the halted release:\nbefore %v\nafter  %v", wave2, got)
	}

	// The fixed release supersedes it and goes wave by wave.
	writeFile(t, filepath.Join(rollouts, "crm-fixed.yaml"), releaseFile("crm-fixed", crmFixed, ""))
	sourceGit(t, repo, "add", "rollouts/crm-fixed.yaml")
	sourceGit(t, repo, "commit", "-q", "-m", "the crm "+crmFixed+" release")
	step("crm-fixed", "wave 1 admits PRWAVA", 3*time.Minute)
	step("crm-fixed", "wave 2 admits PRWAVB", 10*time.Minute)
	step("crm-fixed", "wave 2 admits PRWAVC", 10*time.Minute)
	step("crm-fixed", "crm-fixed  Complete", 10*time.Minute)
	for code, v := range crmVersions(t, waveOf) {
		if v != crmFixed {
			t.Errorf("%s runs crm %s after the release, want %s", code, v, crmFixed)
		}
	}
	history.check(t, waveOf)

	// Every step is a commit of the release files alone, by whoever ran promote.
	log := sourceGit(t, repo, "log", "--format=%an %s", "--name-only")
	for _, commit := range strings.Split(log, "\n\n") {
		lines := strings.Split(strings.TrimSpace(commit), "\n")
		if !strings.HasPrefix(lines[0], "release-bot rollout ") {
			continue
		}
		for _, f := range lines[1:] {
			if !strings.HasPrefix(f, "rollouts/") {
				t.Errorf("step %q committed %s", lines[0], f)
			}
		}
	}
	if n := strings.Count(log, "release-bot rollout crm-fixed: wave "); n != 3 {
		t.Errorf("%d admission commits of crm-fixed, want 3:\n%s", n, log)
	}
	if !strings.Contains(log, "rollouts/crm-broken.yaml\nrollouts/crm-fixed.yaml") {
		t.Errorf("crm-fixed's first step did not record crm-broken superseded:\n%s", log)
	}
}

// specWrites describes each tenant's crm release by what only a write of its spec or
// metadata changes: generation, chart version, and every such write (manager,
// operation, time), status writes left out.
func specWrites(t *testing.T, waveOf map[string]int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for code, hr := range crmReleases(t, waveOf) {
		v := releaseChartVersion(hr)
		var writes []string
		for _, m := range hr.GetManagedFields() {
			if m.Subresource == "" && m.Time != nil {
				writes = append(writes, fmt.Sprintf("%s %s %s", m.Manager, m.Operation, m.Time.UTC().Format(time.RFC3339)))
			}
		}
		out[code] = fmt.Sprintf("%s (generation %d; writes %s)", v, hr.GetGeneration(), strings.Join(writes, ", "))
	}
	return out
}

// releaseFile is a release of crm at version: wave 1, then wave 2 one tenant at a time.
func releaseFile(name, version, readyTimeout string) string {
	gates := ""
	if readyTimeout != "" {
		gates = "  gates:\n    readyTimeout: " + readyTimeout + "\n"
	}
	return fmt.Sprintf(`apiVersion: eva.aidonow.com/v1alpha1
kind: EvaRollout
metadata:
  name: %s
  namespace: eva-system
spec:
  versions:
    crm: %s
  waves:
  - wave: 1
  - wave: 2
    maxUpdate: 1
%s`, name, version, gates)
}

// crmReadyAt checks every tenant's crm release asks for version and is Ready on it.
func crmReadyAt(waveOf map[string]int, version string) error {
	for code := range waveOf {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: tenant.Namespace(code), Name: "crm"}, hr); err != nil {
			return fmt.Errorf("%s: %w", code, err)
		}
		v := releaseChartVersion(hr)
		if ready := conditionOf(hr, "Ready"); v != version || ready.Status != "True" {
			return fmt.Errorf("%s: crm %s, Ready %s %s", code, v, ready.Status, ready.Message)
		}
	}
	return nil
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sourceGit runs the git command line in the team's repository.
func sourceGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=team", "-c", "user.email=team@example.com"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
