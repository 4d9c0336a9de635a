package scaffold

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// workflowSteps reads the scaffolded pull-request workflow's steps by name.
func workflowSteps(t *testing.T, o Options) map[string]string {
	t.Helper()
	var wf struct {
		Jobs map[string]struct {
			Steps []struct{ Name, Run string }
		}
	}
	if err := yaml.Unmarshal([]byte(Files(o)[".github/workflows/validate-tenants.yaml"]), &wf); err != nil {
		t.Fatalf("the workflow is not YAML: %v", err)
	}
	steps := map[string]string{}
	for _, s := range wf.Jobs["validate"].Steps {
		steps[s.Name] = s.Run
	}
	return steps
}

// runStep runs a step's script with bash in a fleet whose eva.yaml is evaYAML, with
// stand-ins for the commands GitHub's runner has (go, gh, and evactl as installed):
// each records its arguments in calls.log. It returns the exit status and what the
// step printed.
func runStep(t *testing.T, script, evaYAML string, env ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls.log")
	for name, body := range map[string]string{
		"go":     `echo "go $*" >> "$CALLS"`,
		"gh":     `echo "gh $*" >> "$CALLS"`,
		"evactl": `echo "evactl $*" >> "$CALLS"; echo "### Eva: environment dev"; exit "${EVACTL_STATUS:-0}"`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "eva.yaml"), []byte(evaYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary.md")
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "CALLS=" + log, "GITHUB_STEP_SUMMARY=" + summary,
		"GITHUB_REPOSITORY=acme/fleet"}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(log)
	got, _ := os.ReadFile(summary)
	return code, string(out), string(calls) + string(got)
}

// TestWorkflowInstallsTheFleetsRelease: the workflow installs the evactl release
// eva.yaml names; a development build, which cannot be installed, fails the step
// saying what to do. Seen failing before: init from a development build wrote
// go install …@v0.0.0-devel into the workflow.
func TestWorkflowInstallsTheFleetsRelease(t *testing.T) {
	install := workflowSteps(t, Options{Release: "0.0.0-devel", Env: "dev"})["Install the evactl release eva.yaml names"]
	if install == "" {
		t.Fatal("the workflow has no install step")
	}
	for evaYAML, want := range map[string]string{
		"kind: Fleet\neva: 0.3.1\n":             "go install github.com/aidonow/eva/cmd/evactl@v0.3.1",
		"kind: Fleet\neva: v0.4.0   # pinned\n": "go install github.com/aidonow/eva/cmd/evactl@v0.4.0",
		"kind: Fleet\n":                         "go install github.com/aidonow/eva/cmd/evactl@latest",
	} {
		if code, out, calls := runStep(t, install, evaYAML); code != 0 || strings.TrimSpace(calls) != want {
			t.Errorf("eva.yaml %q: exit %d, ran %q, want %q\n%s", evaYAML, code, calls, want, out)
		}
	}
	code, out, calls := runStep(t, install, "kind: Fleet\neva: 0.0.0-devel\n")
	if code == 0 || calls != "" || !strings.Contains(out, "::error file=eva.yaml::") || !strings.Contains(out, "released version") {
		t.Errorf("a development build: exit %d, ran %q:\n%s", code, calls, out)
	}
}

// TestWorkflowPostsThePreview: the diff step runs evactl diff with the fleet's own
// environment and target (no flag of its own), appends the preview to the job summary,
// posts it as a comment on a pull request of the repository itself (not a fork's), and
// fails as diff fails; without a publish target it says so and passes.
func TestWorkflowPostsThePreview(t *testing.T) {
	diff := workflowSteps(t, Options{Env: "prod"})["evactl diff (fails where publish would)"]
	published := "kind: Fleet\nenvironment: prod\npublish:\n  repo: https://git.example.com/p.git\n"
	code, out, calls := runStep(t, diff, published, "HEAD_REPO=acme/fleet", "PR_NUMBER=7", "EVACTL_STATUS=1")
	for _, want := range []string{"evactl diff --output markdown\n", "gh pr comment 7 --body-file preview.md --edit-last --create-if-none\n", "### Eva: environment dev"} {
		if !strings.Contains(calls, want) {
			t.Errorf("diff step ran/wrote %q, want %q\n%s", calls, want, out)
		}
	}
	if code != 1 || strings.Contains(calls, "--env") {
		t.Errorf("diff step: exit %d (want diff's 1), calls %q", code, calls)
	}
	if _, _, calls := runStep(t, diff, published, "HEAD_REPO=someone/fork", "PR_NUMBER=8"); strings.Contains(calls, "gh ") {
		t.Errorf("a fork's pull request: %q", calls)
	}
	code, out, calls = runStep(t, diff, "kind: Fleet\n")
	if code != 0 || calls != "" || !strings.Contains(out, "no publish: target") {
		t.Errorf("no publish target: exit %d, ran %q:\n%s", code, calls, out)
	}
}
