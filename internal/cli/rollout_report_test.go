package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// runEvactlStdout runs evactl and returns its exit code, its standard output alone and
// both streams together (for failure messages).
func runEvactlStdout(t *testing.T, args ...string) (int, []byte, string) {
	t.Helper()
	var stdout, both bytes.Buffer
	code := Execute(args, &stdout, &both)
	return code, stdout.Bytes(), both.String() + stdout.String()
}

// TestRolloutPlanAndPromoteReportTheStep: -o json and yaml print the step as a program
// reads it (who is admitted, at which wave, the files and the commit promote wrote, the
// release's status after it), the same step the text describes.
func TestRolloutPlanAndPromoteReportTheStep(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	repo, tenants, rollouts := newSourceRepo(t)
	args := func(verb string, extra ...string) []string {
		return append([]string{"rollout", verb, "crm-1-5", "--tenants", tenants, "--rollouts", rollouts, "--verify-charts=false"}, extra...)
	}
	if code, _, out := runEvactlStdout(t, args("plan", "-o", "table")...); code != ExitUsage || !strings.Contains(out, `--output "table"`) {
		t.Fatalf("plan -o table: exit %d:\n%s", code, out)
	}

	var planned stepReport
	code, stdout, out := runEvactlStdout(t, args("plan", "--assume-ready", "-o", "json")...)
	if code != ExitOK || json.Unmarshal(stdout, &planned) != nil {
		t.Fatalf("plan -o json: exit %d:\n%s", code, out)
	}
	if got := admittedCodes(planned); got != "AAAAAA@1" || !planned.Promotes || planned.Commit != "" ||
		planned.Subject != "rollout crm-1-5: wave 1 admits AAAAAA" || planned.Status.CurrentWave != 1 {
		t.Fatalf("plan -o json: %+v (admitted %s)", planned, got)
	}
	head := gitOut(t, repo, "rev-parse", "HEAD")

	var taken stepReport
	code, stdout, out = runEvactlStdout(t, args("promote", "--assume-ready", "-o", "yaml")...)
	if code != ExitOK || yaml.Unmarshal(stdout, &taken) != nil {
		t.Fatalf("promote -o yaml: exit %d:\n%s", code, out)
	}
	if now := gitOut(t, repo, "rev-parse", "HEAD"); now == head || taken.Commit != now {
		t.Errorf("promote -o yaml reports commit %q; HEAD moved from %s to %s", taken.Commit, head, now)
	}
	if got := admittedCodes(taken); got != "AAAAAA@1" || len(taken.Files) != 1 || !strings.HasSuffix(taken.Files[0], "crm-1-5.yaml") {
		t.Errorf("promote -o yaml: admitted %s, files %v", got, taken.Files)
	}

	code, stdout, out = runEvactlStdout(t, args("plan", "--assume-ready", "-o", "json")...)
	planned = stepReport{}
	if code != ExitOK || json.Unmarshal(stdout, &planned) != nil {
		t.Fatalf("second plan: exit %d:\n%s", code, out)
	}
	// Vouched Ready, wave 1 is done (no bake time); wave 2 admits one at a time.
	if got := admittedCodes(planned); got != "BBBBBB@2" || planned.Status.Phase != evav1.RolloutProgressing || planned.Status.CurrentWave != 2 {
		t.Errorf("after wave 1's admission the plan admits %q, phase %s, wave %d: want BBBBBB@2", got, planned.Status.Phase, planned.Status.CurrentWave)
	}
}

// admittedCodes lists a report's admitted tenants as CODE@wave.
func admittedCodes(r stepReport) string {
	var s []string
	for _, a := range r.Admitted {
		s = append(s, fmt.Sprintf("%s@%d", a.Code, a.Wave))
	}
	return strings.Join(s, ",")
}
