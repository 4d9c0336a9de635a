package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/testenv"
)

// TestValidateBlamesTheOverlayForItsValues: the shipped air-gap environment's image
// digests are placeholders until images.txt is pinned. The chart refuses them once per
// module, at the overlay patch that sets them, not once per tenant at a tenant file
// that never mentions them. (The air-gap environment installs only charts pinned by
// digest: the charts are pushed first, as a platform team does.)
func TestValidateBlamesTheOverlayForItsValues(t *testing.T) {
	code, out, errOut := runCLI(t, "validate", "--env", "airgap", "--overlays", filepath.Join("..", "..", "overlays"),
		"--charts", pushedCharts(t), filepath.Join("..", "..", "tenants"))
	if code != ExitInvalid {
		t.Fatalf("exit %d, want %d: %s %s", code, ExitInvalid, out, errOut)
	}
	report := out + errOut
	overlay := filepath.Join("..", "..", "overlays", "airgap", "tenant", "kustomization.yaml")
	for _, want := range []string{
		overlay + ":17:5: patches: sets spec.values.image.digest of HelmRelease crm, which chart eva-crm",
		overlay + ":72:5: patches: sets spec.values.image.digest of HelmRelease gateway, which chart eva-gateway",
	} {
		if strings.Count(report, want) != 1 {
			t.Errorf("want once: %q\nin:\n%s", want, report)
		}
	}
	if strings.Contains(report, "tenants/") {
		t.Errorf("a tenant file was blamed for the overlay's values:\n%s", report)
	}
}

// pushedCharts is a copy of the module charts pushed with evactl charts push to a
// registry of the test's own, with the published.yaml that writes.
func pushedCharts(t *testing.T) string {
	t.Helper()
	charts := filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(charts, os.DirFS(filepath.Join("..", "..", "charts"))); err != nil {
		t.Fatal(err)
	}
	source := "oci://" + testenv.Registry(t) + "/eva/charts"
	if code, out, errOut := runCLI(t, "charts", "push", "--charts", charts, "--to", source, "--insecure"); code != ExitOK {
		t.Fatalf("charts push: exit %d %s%s", code, out, errOut)
	}
	return charts
}
