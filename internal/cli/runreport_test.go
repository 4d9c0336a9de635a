package cli

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"sigs.k8s.io/yaml"
)

// renderReport runs evactl with -o format and reads its report from standard output.
func renderReport(t *testing.T, format string, args ...string) runReport {
	t.Helper()
	code, stdout, out := runEvactlStdout(t, append(args, "-o", format)...)
	var rep runReport
	unmarshal := json.Unmarshal
	if format == "yaml" {
		unmarshal = func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
	}
	if code != ExitOK {
		t.Fatalf("%s: exit %d\n%s", strings.Join(args[:2], " "), code, out)
	}
	if err := unmarshal(stdout, &rep); err != nil {
		t.Fatalf("%s -o %s: %v\n%s", strings.Join(args[:2], " "), format, err, stdout)
	}
	return rep
}

// TestRenderAndPublishReportTheRun: -o json and yaml print what a render or publish
// did, for a pipeline to read: the tenants rendered, the revision the destination now
// holds (the commit git shows) and the tenants added, changed and removed, per cell in
// an environment with cells; standard output holds the report alone.
func TestRenderAndPublishReportTheRun(t *testing.T) {
	tenants := copyTenants(t)
	out := filepath.Join(t.TempDir(), "gitops")
	args := renderArgs(tenants, out, "--verify-charts=false")

	first := renderReport(t, "json", args...)
	head := gitOut(t, out, "rev-parse", "HEAD")
	if first.Tree == nil || first.Tree.Revision != head || !first.Tree.Updated || first.Environment != "dev" ||
		first.Tenants < 2 || first.Rendered != first.Tenants || len(first.Tree.Added) != first.Tenants || !slices.Contains(first.Tree.Added, "DEVUSR") {
		t.Fatalf("first render's report (HEAD %s): %+v %+v", head, first, first.Tree)
	}

	file := filepath.Join(tenants, "DEVUSR.yaml")
	data, _ := os.ReadFile(file)
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), "replicaCount: 1", "replicaCount: 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	second := renderReport(t, "yaml", args...)
	if head = gitOut(t, out, "rev-parse", "HEAD"); second.Tree == nil || second.Tree.Revision != head ||
		second.Rendered != 1 || second.Tenants != first.Tenants || strings.Join(second.Tree.Changed, ",") != "DEVUSR" || len(second.Tree.Added) != 0 {
		t.Fatalf("a render after one tenant's change (HEAD %s): %+v %+v", head, second, second.Tree)
	}
	if third := renderReport(t, "json", args...); third.Tree == nil || third.Tree.Updated || third.Tree.Revision != head {
		t.Fatalf("an unchanged render: %+v %+v", third, third.Tree)
	}

	plain := renderReport(t, "json", renderArgs(tenants, filepath.Join(t.TempDir(), "plain"), "--verify-charts=false", "--git=false")...)
	if plain.Tree == nil || plain.Tree.Revision != "" || plain.Tree.Tenants != first.Tenants {
		t.Fatalf("a plain folder's report: %+v %+v", plain, plain.Tree)
	}
	if code, _, msg := runEvactlStdout(t, renderArgs(tenants, "-", "-o", "json")...); code != ExitUsage || !strings.Contains(msg, "-o json has nowhere to go") {
		t.Fatalf("render --out - -o json: exit %d\n%s", code, msg)
	}

	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	published := renderReport(t, "json", append(append([]string{"publish", "git"}, common(tenants)...),
		"--verify-charts=false", "--repo", bare, "--branch", "main", "--cache-dir", filepath.Join(t.TempDir(), "cache"))...)
	if rev := gitOut(t, bare, "rev-parse", "main"); published.Tree == nil || published.Tree.Revision != rev || len(published.Tree.Added) != first.Tenants {
		t.Fatalf("publish git's report (main at %s): %+v %+v", rev, published, published.Tree)
	}
}

// TestRenderWithCellsReportsEachCell: in an environment with cells, the report gives
// each cell's commit and the tenants placed on it.
func TestRenderWithCellsReportsEachCell(t *testing.T) {
	tenants, overlays := cellsFleet(t, 4, "")
	out := filepath.Join(t.TempDir(), "gitops")
	rep := renderReport(t, "json", "render", "--tenants", tenants, "--overlays", overlays, "--out", out, "--verify-charts=false")
	got := map[string]string{}
	for _, c := range rep.Cells {
		if head := gitOut(t, filepath.Join(out, "cells", c.Cell), "rev-parse", "HEAD"); c.Revision != head {
			t.Errorf("cell %s: report says %s, its repository's HEAD is %s", c.Cell, c.Revision, head)
		}
		got[c.Cell] = strings.Join(c.Added, ",")
	}
	if want := map[string]string{"us-1": "CELLAA", "eu-1": "CELLAB,CELLAC,CELLAD"}; !maps.Equal(got, want) || rep.Tree != nil {
		t.Fatalf("cells' report: %v, want %v (and no tree: %+v)", got, want, rep.Tree)
	}
}
