package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cellsFleet writes an environment with two cells (eu-1 holds three Starter tenants,
// us-1 two) and n Starter tenants, the first of them required in region us; extra is
// appended to the last tenant's spec.
func cellsFleet(t *testing.T, n int, extra string) (tenants, overlays string) {
	t.Helper()
	root := t.TempDir()
	overlays = filepath.Join(root, "overlays")
	env := filepath.Join(overlays, "dev", "tenant")
	if err := os.CopyFS(env, os.DirFS(filepath.Join(repoRoot, "overlays", "dev", "tenant"))); err != nil {
		t.Fatal(err)
	}
	cells := `
cells:
  - name: eu-1
    labels: {region: eu}
    path: cells/eu-1
    capacity: {cpu: "6", memory: 12Gi}
  - name: us-1
    labels: {region: us}
    path: cells/us-1
    capacity: {cpu: "4", memory: 8Gi, tenants: 2}
`
	appendToFile(t, filepath.Join(env, "environment.yaml"), cells)
	tenants = filepath.Join(root, "tenants")
	if err := os.Mkdir(tenants, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		code := fmt.Sprintf("CELL%c%c", 'A'+i/26, 'A'+i%26)
		switch {
		case i == 0:
			writeCellTenant(t, tenants, code, "  placement:\n    labels: {region: us}\n")
		case i == n-1:
			writeCellTenant(t, tenants, code, extra)
		default:
			writeCellTenant(t, tenants, code, "")
		}
	}
	return tenants, overlays
}

// writeCellTenant writes a Starter tenant of code into the folder tenants, with extra
// appended to its spec.
func writeCellTenant(t *testing.T, tenants, code, extra string) {
	t.Helper()
	template, err := os.ReadFile(filepath.Join(repoRoot, "tenants", "DEVUSR.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.NewReplacer("name: devusr", "name: "+strings.ToLower(code), "capsuleCode: DEVUSR", "capsuleCode: "+code).Replace(string(template))
	if err := os.WriteFile(filepath.Join(tenants, code+".yaml"), []byte(body+extra), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCellsPlacesByCapacity places five Starter tenants on two cells: the one that
// requires region us goes to us-1, the rest by headroom, filling both; a sixth is
// refused by validate and by evactl cells at its tier's line, naming what each cell
// lacks; a tenant pinned to a cell that does not exist is refused at its placement.
func TestCellsPlacesByCapacity(t *testing.T) {
	tenants, overlays := cellsFleet(t, 5, "")
	code, out := runEvactl(t, "cells", "--tenants", tenants, "--overlays", overlays, "-o", "json")
	if code != ExitOK {
		t.Fatalf("cells: exit %d\n%s", code, out)
	}
	var report cellReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("cells -o json: %v\n%s", err, out)
	}
	if report.Placements["CELLAA"] != "us-1" || len(report.Placements) != 5 || report.Cells[0].Tenants != 3 || report.Cells[1].Tenants != 2 {
		t.Fatalf("placements %v, cells %+v", report.Placements, report.Cells)
	}
	if report.Cells[0].Headroom.CPU != "0" || *report.Cells[1].Headroom.Tenants != 0 {
		t.Fatalf("headroom: %+v", report.Cells)
	}
	if code, out := runEvactl(t, "cells", "--tenants", tenants, "--overlays", overlays); code != ExitOK || !strings.Contains(out, "eu-1  region=eu  3/-") {
		t.Fatalf("cells table: exit %d\n%s", code, out)
	}

	if code, out := runEvactl(t, "render", "--tenants", tenants, "--overlays", overlays, "--out", filepath.Join(t.TempDir(), "gitops"), "--verify-charts=false", "-q"); code != ExitOK {
		t.Fatalf("render of five placeable tenants: exit %d\n%s", code, out)
	}

	tenants, overlays = cellsFleet(t, 6, "")
	code, out = runEvactl(t, "validate", tenants, "--overlays", overlays, "--verify-charts=false")
	want := "CELLAF.yaml:9:9: spec.tier: environment dev: no cell has room: eu-1 lacks cpu (8 of 6), memory (16Gi of 12Gi); us-1 lacks cpu (6 of 4), memory (12Gi of 8Gi), tenants (3 of 2)"
	if code != ExitInvalid || !strings.Contains(out, want) {
		t.Fatalf("validate with six tenants for room for five: exit %d, want %q in\n%s", code, want, out)
	}
	if code, out := runEvactl(t, "cells", "--tenants", tenants, "--overlays", overlays); code != ExitInvalid || !strings.Contains(out, want) {
		t.Fatalf("cells with six tenants: exit %d\n%s", code, out)
	}
	// render (and so publish, which prepares the same way) refuses it too: nothing is
	// written.
	gitops := filepath.Join(t.TempDir(), "gitops")
	if code, out := runEvactl(t, "render", "--tenants", tenants, "--overlays", overlays, "--out", gitops, "--verify-charts=false"); code != ExitInvalid || !strings.Contains(out, want) {
		t.Fatalf("render with six tenants: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(gitops); err == nil {
		t.Fatal("render wrote its output although a tenant could not be placed")
	}

	tenants, overlays = cellsFleet(t, 2, "  placement:\n    cell: ap-1\n")
	code, out = runEvactl(t, "validate", tenants, "--overlays", overlays, "--verify-charts=false")
	if code != ExitInvalid || !strings.Contains(out, `CELLAB.yaml:19:3: spec.placement: environment dev: no cell matches cell "ap-1"`) {
		t.Fatalf("validate with a missing cell: exit %d\n%s", code, out)
	}
}
