package cli

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/aidonow/eva/internal/publish"
)

// placementsOf runs evactl cells -o json over the published tree dir ("" for none).
func placementsOf(t *testing.T, tenants, overlays, dir string) (int, cellReport, string) {
	t.Helper()
	args := []string{"cells", "--tenants", tenants, "--overlays", overlays, "-o", "json"}
	if dir != "" {
		args = append(args, "--published", dir)
	}
	code, out := runEvactl(t, args...)
	var report cellReport
	if code == ExitOK {
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("cells -o json: %v\n%s", err, out)
		}
	}
	return code, report, out
}

// TestCellTreesRecordPlacement renders and publishes an environment with two cells:
// each cell's tree holds the tenants placed on it, and is the record the next placement
// reads. A tenant whose code sorts first, added to the fleet, goes where there is room
// and every other tenant stays where it was published (placed afresh, in code order,
// CELLAD would change cells); a tenant found in two cells' trees is refused; publish git writes each cell's
// tree below --path, its Kustomizations naming that folder, and diff then shows nothing.
func TestCellTreesRecordPlacement(t *testing.T) {
	tenants, overlays := cellsFleet(t, 4, "")
	out := filepath.Join(t.TempDir(), "gitops")
	render := []string{"render", "--tenants", tenants, "--overlays", overlays, "--out", out, "--verify-charts=false", "-q"}
	if code, msg := runEvactl(t, render...); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, msg)
	}
	want := map[string]string{"CELLAA": "us-1", "CELLAB": "eu-1", "CELLAC": "eu-1", "CELLAD": "eu-1"}
	for code, cell := range want {
		dir := filepath.Join(out, "cells", cell, "tenants", strings.ToLower(code))
		if _, err := os.Stat(filepath.Join(dir, "manifests.yaml")); err != nil {
			t.Fatalf("%s is not in cell %s's tree: %v", code, cell, err)
		}
	}
	if ks, _ := os.ReadFile(filepath.Join(out, "cells", "us-1", "flux", "cellaa.yaml")); !strings.Contains(string(ks), `path: "./tenants/cellaa"`) {
		t.Fatalf("a cell's own repository names its tenants from its root:\n%s", ks)
	}

	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	target := []string{"--repo", bare, "--branch", "main", "--path", "clusters/dev", "--cache-dir", filepath.Join(t.TempDir(), "cache")}
	args := append([]string{"--tenants", tenants, "--overlays", overlays, "--verify-charts=false"}, target...)
	if code, msg := runEvactl(t, append([]string{"publish", "git"}, args...)...); code != ExitOK || !strings.Contains(msg, "eu-1 ") || !strings.Contains(msg, "us-1 ") {
		t.Fatalf("publish git: exit %d\n%s", code, msg)
	}
	if files := gitOut(t, bare, "ls-tree", "-r", "--name-only", "main"); strings.Contains(files, "clusters/dev/tenants/") || !strings.Contains(files, "clusters/dev/cells/eu-1/tenants/cellad/manifests.yaml") {
		t.Fatalf("published tree:\n%s", files)
	}

	// A published tenant whose placement changes moves (TestCellTreesMoveATenantFile):
	// validate accepts it, from the folder or from the branch.
	moved := filepath.Join(tenants, "CELLAB.yaml")
	before, _ := os.ReadFile(moved)
	writeCellTenant(t, tenants, "CELLAB", "  placement:\n    labels: {region: us}\n")
	if code, msg := runEvactl(t, "validate", tenants, "--overlays", overlays, "--verify-charts=false", "--published", out); code != ExitOK {
		t.Fatalf("validate of a move: exit %d\n%s", code, msg)
	}
	// The record read from the published branch itself, as the scaffolded pull-request
	// workflow reads it.
	fromBranch := append([]string{"validate", tenants, "--overlays", overlays, "--verify-charts=false"}, target...)
	if code, msg := runEvactl(t, fromBranch...); code != ExitOK {
		t.Fatalf("validate --repo of a move: exit %d\n%s", code, msg)
	}
	if err := os.WriteFile(moved, before, 0o644); err != nil {
		t.Fatal(err)
	}

	writeCellTenant(t, tenants, "ABCDEF", "")
	if code, fresh, msg := placementsOf(t, tenants, overlays, ""); code != ExitOK || fresh.Placements["CELLAD"] != "us-1" {
		t.Fatalf("placed afresh in code order, CELLAD would go to us-1: exit %d, %v\n%s", code, fresh.Placements, msg)
	}
	code, report, msg := placementsOf(t, tenants, overlays, out)
	want["ABCDEF"] = "us-1"
	if code != ExitOK || len(report.Placements) != len(want) {
		t.Fatalf("cells --published: exit %d, placements %v\n%s", code, report.Placements, msg)
	}
	for c, cell := range want {
		if report.Placements[c] != cell {
			t.Fatalf("cells --published: %s on %q, want %s (%v)", c, report.Placements[c], cell, report.Placements)
		}
	}
	if code, msg := runEvactl(t, render...); code != ExitOK {
		t.Fatalf("render of the added tenant: exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(filepath.Join(out, "cells", "us-1", "tenants", "abcdef", "manifests.yaml")); err != nil {
		t.Fatalf("the added tenant is not in us-1's tree: %v", err)
	}

	// Published on two cells: the record must name one.
	twice := filepath.Join(t.TempDir(), "twice")
	if err := os.CopyFS(twice, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(twice, "cells", "us-1", "tenants", "cellab"), os.DirFS(filepath.Join(out, "cells", "eu-1", "tenants", "cellab"))); err != nil {
		t.Fatal(err)
	}
	if code, _, msg := placementsOf(t, tenants, overlays, twice); code != ExitUsage || !strings.Contains(msg, "tenant CELLAB is published on cells eu-1 and us-1") {
		t.Fatalf("cells over a tenant in two trees: exit %d\n%s", code, msg)
	}

	// publish reads the record from the branch: CELLAD stays on eu-1, so ABCDEF goes to
	// us-1 (placed afresh it would go to eu-1).
	if code, msg := runEvactl(t, append([]string{"publish", "git"}, args...)...); code != ExitOK {
		t.Fatalf("publish git of the added tenant: exit %d\n%s", code, msg)
	}
	if ks := gitOut(t, bare, "show", "main:clusters/dev/cells/us-1/flux/abcdef.yaml"); !strings.Contains(ks, `path: "./clusters/dev/cells/us-1/tenants/abcdef"`) {
		t.Fatalf("a cell's Kustomization does not point at its folder below --path:\n%s", ks)
	}
	if code, msg := runEvactl(t, append([]string{"diff", "--exit-code"}, args...)...); code != ExitOK || !strings.Contains(msg, "no changes") {
		t.Fatalf("diff right after publish: exit %d\n%s", code, msg)
	}
}

// TestCellTreesAsOCIArtifacts publishes an environment with two cells as OCI
// artifacts: one repository per cell below the --ref's, each artifact a tree of its own
// whose Kustomizations name their folders from its root; the artifacts are the record
// the next publish reads (ABCDEF goes to us-1 because CELLAD stays on eu-1).
func TestCellTreesAsOCIArtifacts(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tenants, overlays := cellsFleet(t, 4, "")
	asOCISource(t, overlays)
	args := []string{"publish", "oci", "--ref", "oci://" + host + "/eva/tenants:dev", "--insecure", "--revision", "main@sha1:abc", "--source", "https://example.com/t.git",
		"--tenants", tenants, "--overlays", overlays, "--verify-charts=false"}
	if code, msg := runEvactl(t, args...); code != ExitOK {
		t.Fatalf("publish oci: exit %d\n%s", code, msg)
	}
	writeCellTenant(t, tenants, "ABCDEF", "")
	if code, msg := runEvactl(t, args...); code != ExitOK || !strings.Contains(msg, "cell eu-1: nothing changed") {
		t.Fatalf("publish oci of the added tenant: exit %d\n%s", code, msg)
	}
	read := func(cell string) map[string][]byte {
		t.Helper()
		o := &publish.OCI{Ref: host + "/eva/tenants/cells/" + cell + ":dev", Insecure: true}
		tree, digest, err := o.Read(context.Background())
		if err != nil || digest == "" {
			t.Fatalf("reading cell %s's artifact: %q, %v", cell, digest, err)
		}
		return tree
	}
	us, eu := read("us-1"), read("eu-1")
	if ks := string(us["flux/abcdef.yaml"]); !strings.Contains(ks, `path: "./tenants/abcdef"`) {
		t.Fatalf("us-1's artifact does not hold ABCDEF from its root: %v\n%s", slices.Sorted(maps.Keys(us)), ks)
	}
	if _, ok := eu["tenants/cellad/manifests.yaml"]; !ok {
		t.Fatalf("eu-1's artifact lost CELLAD: %v", slices.Sorted(maps.Keys(eu)))
	}
}
