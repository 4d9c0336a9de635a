package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateBlamesTheOverlayForItsValues: the shipped air-gap environment's image
// digests are placeholders until images.txt is pinned. The chart refuses them once per
// module, at the overlay patch that sets them, not once per tenant at a tenant file
// that never mentions them.
func TestValidateBlamesTheOverlayForItsValues(t *testing.T) {
	code, out, errOut := runCLI(t, "validate", "--env", "airgap", "--overlays", filepath.Join("..", "..", "overlays"),
		"--charts", filepath.Join("..", "..", "charts"), filepath.Join("..", "..", "tenants"))
	if code != ExitInvalid {
		t.Fatalf("exit %d, want %d: %s %s", code, ExitInvalid, out, errOut)
	}
	report := out + errOut
	overlay := filepath.Join("..", "..", "overlays", "airgap", "tenant", "kustomization.yaml")
	for _, want := range []string{
		overlay + ":16:5: patches: sets spec.values.image.digest of HelmRelease crm, which chart eva-crm",
		overlay + ":71:5: patches: sets spec.values.image.digest of HelmRelease gateway, which chart eva-gateway",
	} {
		if strings.Count(report, want) != 1 {
			t.Errorf("want once: %q\nin:\n%s", want, report)
		}
	}
	if strings.Contains(report, "tenants/") {
		t.Errorf("a tenant file was blamed for the overlay's values:\n%s", report)
	}
}
