package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletionOffersWhatExists: the shell completion offers the environments of
// --overlays, the releases of --rollouts and the contexts of the kubeconfig; a command
// given an environment that does not exist lists those that do.
func TestCompletionOffersWhatExists(t *testing.T) {
	overlays := filepath.Join(repoRoot, "overlays")
	rollouts := t.TempDir()
	if err := os.WriteFile(filepath.Join(rollouts, "crm.yaml"), []byte(crmRelease), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rollouts, "broken.yaml"), []byte("metadata: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name the shell would read as two candidates, or as an escape, is not offered.
	if err := os.WriteFile(filepath.Join(rollouts, "hostile.yaml"), []byte("metadata:\n  name: \"x\\nrm -rf\\e[2J\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: prod, context: {cluster: c, user: u}}, {name: staging, context: {cluster: c, user: u}}]
current-context: prod
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"render", "--overlays", overlays, "--env", ""}, "airgap\ndev\nprod\n:4"},
		{[]string{"diff", "--overlays", overlays, "--env", ""}, "airgap\ndev\nprod\n:4"},
		{[]string{"rollout", "promote", "--rollouts", rollouts, ""}, "broken\ncrm-1-5\n:4"},
		{[]string{"rollout", "status", "--kubeconfig", kubeconfig, "--context", ""}, "prod\nstaging\n:4"},
	} {
		code, out, errOut := runCLI(t, append([]string{"__complete"}, tc.args...)...)
		if code != ExitOK || strings.TrimSpace(out) != tc.want {
			t.Errorf("completing %v: exit %d, got %q, want %q (%s)", tc.args, code, out, tc.want, errOut)
		}
	}
	code, _, errOut := runCLI(t, "render", "--overlays", overlays, "--env", "staging", "--out", t.TempDir())
	if want := "environment staging: no such environment under " + overlays + " (environments: airgap, dev, prod)"; code != ExitUsage || !strings.Contains(errOut, want) {
		t.Errorf("render --env staging: exit %d, want %q in:\n%s", code, want, errOut)
	}
}
