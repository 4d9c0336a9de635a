package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// prodEntitlements is what a platform adds to the prod environment: Starter and
// Customer, waves 2 and 3 for every tenant; DEVUSR granted wave 1, GLOBEX Enterprise;
// freezing for none.
const prodEntitlements = `entitlements:
  tiers: [Starter, Customer]
  waves: [2, 3]
  grants:
    DEVUSR: {waves: [1]}
    GLOBEX: {tiers: [Enterprise]}
`

// entitledOverlays is a copy of the shipped overlays whose prod environment has
// prodEntitlements.
func entitledOverlays(t *testing.T) string {
	t.Helper()
	dir := copyDir(t, filepath.Join(repoRoot, "overlays"))
	appendToFile(t, filepath.Join(dir, "prod", "tenant", "environment.yaml"), prodEntitlements)
	return dir
}

// TestTenantFilesAreHeldToEntitlements is the pull-request path of the entitlements:
// with the prod environment and prodEntitlements, evactl validate refuses
// a tenant file's tier, wave and freeze past them, each at its line with the rule and
// where it is written, and accepts what a grant allows; render refuses the same and
// writes nothing.
func TestTenantFilesAreHeldToEntitlements(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"FOOBAR.yaml": tenantWith("FOOBAR", "Platform", "  wave: 1\n  frozen: quarter-end\n"),
		"GLOBEX.yaml": tenantWith("GLOBEX", "Enterprise", "  wave: 3\n"),
		"DEVUSR.yaml": tenantWith("DEVUSR", "Starter", "  wave: 1\n"),
		"ACMECO.yaml": tenantWith("ACMECO", "Enterprise", "  wave: 2\n"),
	})
	env := []string{"--env", "prod", "--overlays", entitledOverlays(t), "--charts", filepath.Join(repoRoot, "charts")}
	code, out, _ := runValidate(t, append(append([]string{"--output", "json"}, env...), dir)...)
	var report struct {
		Problems []struct {
			File, Field, Message string
			Line                 int
		}
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("validate -o json: %v\n%s", err, out)
	}
	const source = "the entitlements of environment prod (entitlements in its environment.yaml)"
	want := map[string]struct {
		line int
		text string
	}{
		"FOOBAR.yaml spec.tier":   {7, "tier Platform is not FOOBAR's to take: " + source + " let every tenant take Starter, Customer, and grant FOOBAR nothing more"},
		"FOOBAR.yaml spec.wave":   {8, "wave 1 is not FOOBAR's to choose: " + source + " let every tenant choose 2, 3, and grant FOOBAR nothing more"},
		"FOOBAR.yaml spec.frozen": {9, "FOOBAR may not freeze itself off platform releases: " + source + " grant freezing to none"},
		"ACMECO.yaml spec.tier":   {7, "tier Enterprise is not ACMECO's to take: " + source + " let every tenant take Starter, Customer, and grant ACMECO nothing more"},
	}
	for _, p := range report.Problems {
		key := filepath.Base(p.File) + " " + p.Field
		w, ok := want[key]
		if !ok {
			t.Errorf("unexpected problem %s:%d %s: %s", filepath.Base(p.File), p.Line, p.Field, p.Message)
			continue
		}
		if p.Line != w.line || p.Message != w.text {
			t.Errorf("%s: line %d %q, want line %d %q", key, p.Line, p.Message, w.line, w.text)
		}
		delete(want, key)
	}
	for key := range want {
		t.Errorf("no problem reported at %s", key)
	}
	if code != ExitInvalid {
		t.Errorf("validate exit %d, want %d", code, ExitInvalid)
	}

	gitops := filepath.Join(t.TempDir(), "gitops")
	if code, out := runEvactl(t, append([]string{"render", "--tenants", dir, "--out", gitops, "--verify-charts=false"}, env...)...); code != ExitInvalid {
		t.Errorf("render of tenants past their entitlements: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(gitops); !os.IsNotExist(err) {
		t.Errorf("render wrote %s for tenants past their entitlements (%v)", gitops, err)
	}
}

// TestFleetCapOnTenantFiles: the entitlements' maxTenants caps the tenant files as the
// operator caps its claims: one file past it is refused by validate and render, at the
// first file past the cap; within it, nothing is. A code granted noQuota renders no
// ResourceQuota; every other tenant keeps its tier's.
func TestFleetCapOnTenantFiles(t *testing.T) {
	overlays := copyDir(t, filepath.Join(repoRoot, "overlays"))
	appendToFile(t, filepath.Join(overlays, "prod", "tenant", "environment.yaml"),
		"entitlements:\n  tiers: [Starter, Customer]\n  waves: [2, 3]\n  maxTenants: 2\n  grants:\n    ACMECO: {noQuota: true}\n")
	files := map[string]string{
		"ACMECO.yaml": tenantWith("ACMECO", "Starter", "  wave: 2\n"),
		"GLOBEX.yaml": tenantWith("GLOBEX", "Starter", "  wave: 2\n"),
	}
	env := []string{"--env", "prod", "--overlays", overlays, "--charts", filepath.Join(repoRoot, "charts")}
	within := writeFiles(t, files)
	if code, out, errOut := runValidate(t, append(env, within)...); code != ExitOK {
		t.Fatalf("two tenants within a cap of 2: exit %d:\n%s%s", code, out, errOut)
	}
	gitops := filepath.Join(t.TempDir(), "gitops")
	if code, out := runEvactl(t, append([]string{"render", "--tenants", within, "--out", gitops, "--verify-charts=false"}, env...)...); code != ExitOK {
		t.Fatalf("render: exit %d:\n%s", code, out)
	}
	for code, wantQuota := range map[string]bool{"acmeco": false, "globex": true} {
		data, err := os.ReadFile(filepath.Join(gitops, "tenants", code, "manifests.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(data), "kind: ResourceQuota"); got != wantQuota {
			t.Errorf("%s renders a ResourceQuota: %v, want %v", code, got, wantQuota)
		}
	}
	files["INITEC.yaml"] = tenantWith("INITEC", "Starter", "  wave: 2\n")
	over := writeFiles(t, files)
	code, out, _ := runValidate(t, append(env, over)...)
	if code != ExitInvalid || !strings.Contains(out, "INITEC.yaml:") ||
		!strings.Contains(out, "3 tenant files, beyond the fleet's cap of 2 tenants in the entitlements of environment prod") {
		t.Fatalf("three tenants over a cap of 2: exit %d:\n%s", code, out)
	}
	gitops = filepath.Join(t.TempDir(), "gitops")
	if code, out := runEvactl(t, append([]string{"render", "--tenants", over, "--out", gitops, "--verify-charts=false"}, env...)...); code != ExitInvalid {
		t.Errorf("render over the cap: exit %d:\n%s", code, out)
	}
}
