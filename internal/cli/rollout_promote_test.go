package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/aidonow/eva/internal/render"
)

// prTenants writes four Starter tenants into a git repository's tenants/ folder:
// AAAAAA in wave 1; BBBBBB, CCCCCC (frozen) and DDDDDD in wave 2; CCCCCC is frozen and
// DDDDDD pins crm itself.
func prTenants(t *testing.T, repo string) string {
	t.Helper()
	dir := filepath.Join(repo, "tenants")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []struct {
		code  string
		wave  int
		extra string
	}{{"AAAAAA", 1, ""}, {"BBBBBB", 2, ""}, {"CCCCCC", 2, "  frozen: quarter-end audit\n"}, {"DDDDDD", 2, "  versions:\n    crm: 1.4.0\n"}} {
		doc := fmt.Sprintf(`apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: %s
  namespace: eva-system
spec:
  capsuleCode: %s
  tier: Starter
  wave: %d
%s`, strings.ToLower(tn.code), tn.code, tn.wave, tn.extra)
		if err := os.WriteFile(filepath.Join(dir, tn.code+".yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const crmRelease = `# The crm 1.5.0 release: internal tenants first, then the pilots one at a time.
apiVersion: eva.aidonow.com/v1alpha1
kind: EvaRollout
metadata:
  name: crm-1-5
  namespace: eva-system
spec:
  versions:
    crm: 1.5.0 # the fixed chart
  waves:
  - wave: 1
  - wave: 2
    maxUpdate: 1
`

// newSourceRepo makes the repository a team keeps its tenant and release files in,
// with one commit holding them.
func newSourceRepo(t *testing.T) (repo, tenants, rollouts string) {
	t.Helper()
	repo = t.TempDir()
	gitOut(t, repo, "init", "-q", "-b", "main")
	tenants = prTenants(t, repo)
	rollouts = filepath.Join(repo, "rollouts")
	if err := os.MkdirAll(rollouts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rollouts, "crm-1-5.yaml"), []byte(crmRelease), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "tenants and the crm release")
	return repo, tenants, rollouts
}

func promote(t *testing.T, tenants, rollouts string, extra ...string) (int, string) {
	t.Helper()
	return runEvactl(t, append([]string{"rollout", "promote", "crm-1-5", "--tenants", tenants, "--rollouts", rollouts, "--verify-charts=false"}, extra...)...)
}

// releaseVersion returns the chart version of a HelmRelease in a manifests file.
func releaseVersion(t *testing.T, manifests []byte, name string) string {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var hr helmv2.HelmRelease
		if err := dec.Decode(&hr); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if hr.Kind == "HelmRelease" && hr.Name == name {
			return render.ReleaseChartVersion(&hr)
		}
	}
	t.Fatalf("no HelmRelease %s in\n%s", name, manifests)
	return ""
}

// renderedCrm renders the tenants with the release files and returns each tenant's crm
// chart version in the output.
func renderedCrm(t *testing.T, tenants, rollouts string) map[string]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gitops")
	if code, msg := runEvactl(t, renderArgs(tenants, out, "--rollouts", rollouts, "--verify-charts=false", "--git=false")...); code != ExitOK {
		t.Fatalf("render: exit %d: %s", code, msg)
	}
	got := map[string]string{}
	for _, code := range []string{"aaaaaa", "bbbbbb", "cccccc", "dddddd"} {
		data, err := os.ReadFile(filepath.Join(out, "tenants", code, "workloads", "manifests.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		got[strings.ToUpper(code)] = releaseVersion(t, data, "crm")
	}
	return got
}

// TestRolloutPromoteStepByStep is the pull-request path: each promote is one commit
// touching the release file alone; a render gives the release to the tenants it
// admitted and to no other; a frozen tenant is skipped, a pinned one keeps its pin;
// without health nothing moves past the first tenants; the release manager's comments
// stay.
func TestRolloutPromoteStepByStep(t *testing.T) {
	t.Setenv("KUBECONFIG", "") // a cluster named by the environment would be read
	repo, tenants, rollouts := newSourceRepo(t)
	file := filepath.Join(rollouts, "crm-1-5.yaml")

	// Promote needs the tenants' health, read or vouched for.
	head := gitOut(t, repo, "rev-parse", "HEAD")
	code, out := promote(t, tenants, rollouts)
	if code != ExitUsage || !strings.Contains(out, "promote needs the tenants' health: --kubeconfig") || gitOut(t, repo, "rev-parse", "HEAD") != head {
		t.Fatalf("promote without health: exit %d:\n%s", code, out)
	}
	// plan shows, without health, that nobody would be admitted.
	code, out = runEvactl(t, "rollout", "plan", "crm-1-5", "--tenants", tenants, "--rollouts", rollouts, "--verify-charts=false")
	if code != ExitOK || !strings.Contains(out, "every wave passed over: no tenant may take the release yet") || !strings.Contains(out, "Health: not read") {
		t.Fatalf("plan without health: exit %d:\n%s", code, out)
	}
	code, out = promote(t, tenants, rollouts, "--assume-ready")
	if code != ExitOK || !strings.Contains(out, "rollout crm-1-5: wave 1 admits AAAAAA") {
		t.Fatalf("first promote: exit %d:\n%s", code, out)
	}
	if got := gitOut(t, repo, "show", "--name-only", "--format=%s", "HEAD"); got != "rollout crm-1-5: wave 1 admits AAAAAA\n\nrollouts/crm-1-5.yaml" {
		t.Errorf("the step's commit: %q", got)
	}
	data, _ := os.ReadFile(file)
	for _, want := range []string{"# The crm 1.5.0 release", "# the fixed chart", "creationTimestamp:", "code: AAAAAA"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the release file lacks %q:\n%s", want, data)
		}
	}
	if got := renderedCrm(t, tenants, rollouts); fmt.Sprint(got) != "map[AAAAAA:1.5.0 BBBBBB:1.4.0 CCCCCC:1.4.0 DDDDDD:1.4.0]" {
		t.Errorf("after wave 1's admission, crm renders %v", got)
	}

	// An edit of the release not committed would ride in a step's commit: refused, and
	// the file left as it was.
	edited := append(append([]byte{}, data...), "# not yet reviewed\n"...)
	if err := os.WriteFile(file, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := promote(t, tenants, rollouts, "--assume-ready"); code == ExitOK || !strings.Contains(out, "rollouts/crm-1-5.yaml has changes that are not committed") {
		t.Fatalf("promote over an uncommitted edit: exit %d:\n%s", code, out)
	}
	if now, _ := os.ReadFile(file); string(now) != string(edited) {
		t.Fatalf("a refused promote rewrote the release file:\n%s", now)
	}
	gitOut(t, repo, "checkout", "--", "rollouts/crm-1-5.yaml")

	// Vouched for: wave 1 completes (no bake time), wave 2 admits one tenant at a time,
	// in code order, passing over the frozen one.
	for _, want := range []string{"wave 2 admits BBBBBB", "wave 2 admits DDDDDD", "Complete"} {
		code, out := promote(t, tenants, rollouts, "--assume-ready")
		if code != ExitOK || !strings.Contains(out, want) {
			t.Fatalf("promote (want %q): exit %d:\n%s", want, code, out)
		}
	}
	if got := renderedCrm(t, tenants, rollouts); fmt.Sprint(got) != "map[AAAAAA:1.5.0 BBBBBB:1.5.0 CCCCCC:1.4.0 DDDDDD:1.4.0]" {
		t.Errorf("after the release, crm renders %v (the frozen CCCCCC and DDDDDD's pin keep 1.4.0)", got)
	}
	log := gitOut(t, repo, "log", "--format=%s")
	if want := "rollout crm-1-5: Complete, every wave is updated and baked\n" +
		"rollout crm-1-5: wave 2 admits DDDDDD\nrollout crm-1-5: wave 2 admits BBBBBB\n" +
		"rollout crm-1-5: wave 1 admits AAAAAA\ntenants and the crm release"; log != want {
		t.Errorf("history:\n%s\nwant:\n%s", log, want)
	}
	if !strings.Contains(gitOut(t, repo, "log", "-1", "--format=%b"), "Health: assumed Ready (--assume-ready)") {
		t.Error("the commit does not say the health was vouched for")
	}
	code, out = runEvactl(t, "rollout", "status", "--rollouts", rollouts)
	if code != ExitOK || !strings.Contains(out, "crm-1-5  Complete") || !strings.Contains(out, "skipped CCCCCC: frozen: quarter-end audit") {
		t.Errorf("status from the files: exit %d:\n%s", code, out)
	}
	head = gitOut(t, repo, "rev-parse", "HEAD")
	if code, out := promote(t, tenants, rollouts, "--assume-ready"); code != ExitOK || !strings.Contains(out, "nothing to promote: Complete") {
		t.Errorf("promoting a complete release: exit %d:\n%s", code, out)
	}
	if gitOut(t, repo, "rev-parse", "HEAD") != head {
		t.Error("promoting a complete release committed")
	}
}

// TestRolloutPromoteSupersedes: a release started later supersedes the one in flight,
// in the same commit; the older one cannot be promoted any more, and tenants keep what
// it gave them.
func TestRolloutPromoteSupersedes(t *testing.T) {
	repo, tenants, rollouts := newSourceRepo(t)
	if code, out := promote(t, tenants, rollouts, "--assume-ready"); code != ExitOK {
		t.Fatalf("promote: exit %d:\n%s", code, out)
	}
	newer := strings.NewReplacer("crm-1-5", "crm-1-6", "1.5.0", "1.6.0").Replace(crmRelease)
	if err := os.WriteFile(filepath.Join(rollouts, "crm-1-6.yaml"), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "rollouts/crm-1-6.yaml")
	gitOut(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "the crm 1.6 release")
	// A change someone staged would ride along: refused.
	tenantFile := filepath.Join(tenants, "BBBBBB.yaml")
	data, _ := os.ReadFile(tenantFile)
	if err := os.WriteFile(tenantFile, append(data, "  lifecycle: Active\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "tenants/BBBBBB.yaml")
	code, out := runEvactl(t, "rollout", "promote", "crm-1-6", "--tenants", tenants, "--rollouts", rollouts, "--assume-ready", "--verify-charts=false")
	if code == ExitOK || !strings.Contains(out, "tenants/BBBBBB.yaml has staged changes") {
		t.Fatalf("promote with another change staged: exit %d:\n%s", code, out)
	}
	if got := gitOut(t, repo, "status", "--porcelain"); got != "M  tenants/BBBBBB.yaml" {
		t.Errorf("a refused promote changed the worktree:\n%s", got)
	}
	gitOut(t, repo, "reset", "-q", "--hard")

	code, out = runEvactl(t, "rollout", "promote", "crm-1-6", "--tenants", tenants, "--rollouts", rollouts, "--assume-ready", "--verify-charts=false")
	if code != ExitOK || !strings.Contains(out, "rollout crm-1-6: wave 1 admits AAAAAA") {
		t.Fatalf("promote crm-1-6: exit %d:\n%s", code, out)
	}
	if got := gitOut(t, repo, "show", "--name-only", "--format=%b", "HEAD"); !strings.Contains(got, "Supersedes: crm-1-5.") ||
		!strings.Contains(got, "rollouts/crm-1-5.yaml") || !strings.Contains(got, "rollouts/crm-1-6.yaml") {
		t.Errorf("the superseding commit:\n%s", got)
	}
	if code, out := promote(t, tenants, rollouts, "--assume-ready"); code != ExitInvalid || !strings.Contains(out, "EvaRollout crm-1-6 started after crm-1-5 and supersedes it") {
		t.Errorf("promoting the superseded release: exit %d:\n%s", code, out)
	}
	code, out = runEvactl(t, "rollout", "status", "crm-1-5", "--rollouts", rollouts)
	if code != ExitOK || !strings.Contains(out, "crm-1-5  Superseded") {
		t.Errorf("status of the superseded release: exit %d:\n%s", code, out)
	}
	if got := renderedCrm(t, tenants, rollouts); got["AAAAAA"] != "1.6.0" || got["BBBBBB"] != "1.4.0" {
		t.Errorf("crm renders %v", got)
	}
}

// TestRolloutFileProblems: a release file that is wrong is refused with its file, line
// and field, as a tenant file is (an unknown field with the nearest known name), and
// nothing is rendered or promoted.
func TestRolloutFileProblems(t *testing.T) {
	_, tenants, rollouts := newSourceRepo(t)
	bad := strings.NewReplacer("crm: 1.5.0", "crm: latest", "maxUpdate: 1", "maxUpdate: 0").Replace(crmRelease) +
		"  - wave: 2\n"
	if err := os.WriteFile(filepath.Join(rollouts, "crm-1-5.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rollouts, "typo.yaml"), []byte("apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaRollout\nmetadata: {name: x, namespace: eva-system}\nspec:\n  version: {crm: 1.5.0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "gitops")
	code, msg := runEvactl(t, renderArgs(tenants, out, "--rollouts", rollouts, "--verify-charts=false")...)
	if code != ExitInvalid {
		t.Fatalf("render with a wrong release: exit %d: %s", code, msg)
	}
	file := filepath.Join(rollouts, "crm-1-5.yaml")
	for _, want := range []string{
		file + ":9:10: spec.versions.crm: \"latest\" is not an exact semantic version",
		file + ":13:16: spec.waves[1].maxUpdate: \"0\": a count of at least 1",
		file + ":14:11: spec.waves[2].wave: wave 2 is listed twice",
		filepath.Join(rollouts, "typo.yaml") + `:5:3: spec.version: unknown field (did you mean "versions"?)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("render output lacks %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a render refused for its release files wrote %s", out)
	}
	if code, msg := promote(t, tenants, rollouts, "--assume-ready"); code != ExitInvalid || !strings.Contains(msg, "nothing was promoted") {
		t.Errorf("promote with a wrong release: exit %d: %s", code, msg)
	}
}

// TestReleaseOfAMissingChartVersionRefused: a release naming a chart version that
// neither the charts folder nor the chart source holds is refused by validate, plan and
// promote, with the file, line and field, and promote writes and commits nothing.
func TestReleaseOfAMissingChartVersionRefused(t *testing.T) {
	repo, tenants, rollouts := newSourceRepo(t)
	charts := filepath.Join(repoRoot, "charts")
	const want = "crm-1-5.yaml:9:10: spec.versions.crm: chart eva-crm has no version 1.5.0"
	code, out := runEvactl(t, "validate", tenants, "--rollouts", rollouts, "--charts", charts)
	if code != ExitInvalid || !strings.Contains(out, want) {
		t.Errorf("validate: exit %d, want %d and %q:\n%s", code, ExitInvalid, want, out)
	}
	head := gitOut(t, repo, "rev-parse", "HEAD")
	for _, cmd := range [][]string{{"plan"}, {"promote", "--assume-ready"}} {
		args := append(append([]string{"rollout"}, cmd...), "crm-1-5", "--tenants", tenants, "--rollouts", rollouts, "--charts", charts)
		code, out := runEvactl(t, args...)
		if code != ExitInvalid || !strings.Contains(out, want) || !strings.Contains(out, "nothing was promoted") {
			t.Errorf("rollout %s: exit %d, want %d and %q:\n%s", cmd[0], code, ExitInvalid, want, out)
		}
	}
	if got := gitOut(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("a refused promote committed %s", got)
	}
	if status := gitOut(t, repo, "status", "--porcelain"); status != "" {
		t.Errorf("a refused promote wrote files:\n%s", status)
	}
}

// TestPromoteCommitsAsTheUser: a step's commit is made on the user's behalf and names
// them as git does (the repository's user.name and user.email); --author-name and
// --author-email, when given, win.
func TestPromoteCommitsAsTheUser(t *testing.T) {
	for _, v := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "EVA_GIT_AUTHOR_NAME", "EVA_GIT_AUTHOR_EMAIL"} {
		t.Setenv(v, "") // restored when the test ends
		os.Unsetenv(v)
	}
	repo, tenants, rollouts := newSourceRepo(t)
	gitOut(t, repo, "config", "user.name", "Rel Manager")
	gitOut(t, repo, "config", "user.email", "rel@example.com")
	if code, out := promote(t, tenants, rollouts, "--assume-ready"); code != ExitOK {
		t.Fatalf("promote: exit %d:\n%s", code, out)
	}
	if got := gitOut(t, repo, "log", "-1", "--format=%an <%ae>"); got != "Rel Manager <rel@example.com>" {
		t.Errorf("the step's commit names %q, want the repository's user", got)
	}
	if code, out := promote(t, tenants, rollouts, "--assume-ready", "--author-name", "release-bot", "--author-email", "bot@example.com"); code != ExitOK {
		t.Fatalf("second promote: exit %d:\n%s", code, out)
	}
	if got := gitOut(t, repo, "log", "-1", "--format=%an <%ae>"); got != "release-bot <bot@example.com>" {
		t.Errorf("the second step's commit names %q, want the --author flags", got)
	}
}
