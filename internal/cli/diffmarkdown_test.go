package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
)

// TestDiffMarkdownPreviewsTheChange: the preview a pull request shows of a cell fleet's
// change names every tenant it touches with its wave and cell (a move with both), the
// fields by kind, each cell's room after it, and, for a refused change, each problem
// at its file and line (exit 1).
func TestDiffMarkdownPreviewsTheChange(t *testing.T) {
	tenants, overlays := cellsFleet(t, 3, "")
	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	args := []string{"--tenants", tenants, "--overlays", overlays, "--verify-charts=false",
		"--repo", bare, "--branch", "main", "--cache-dir", filepath.Join(t.TempDir(), "cache")}
	if code, msg := runEvactl(t, append([]string{"publish", "git"}, args...)...); code != ExitOK {
		t.Fatalf("publish git: exit %d\n%s", code, msg)
	}
	file := filepath.Join(tenants, "CELLAB.yaml")
	data, _ := os.ReadFile(file)
	if err := os.WriteFile(file, []byte(strings.NewReplacer("replicaCount: 1", "replicaCount: 2", "wave: 1", "wave: 3").Replace(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
	writeCellTenant(t, tenants, "ABCDEF", "")
	code, out := runEvactl(t, append([]string{"diff", "-o", "markdown"}, args...)...)
	for _, want := range []string{
		"### Eva: environment dev",
		"**1** tenant(s) added, **1** changed, **0** removed",
		"| 1 | eu-1 | ABCDEF | added |",
		"| 3 | eu-1 | CELLAB | changed |",
		"| CELLAB | eva-tenant-cellab/crm | spec&#46;values&#46;replicaCount | 1 | 2 |",
		"| eu-1 | 3 | 0 | 0 | - | - |",
		"| us-1 | 1 | 2 | 4Gi | - | 1 |",
	} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Fatalf("diff -o markdown: exit %d, want\n%s\nin:\n%s", code, want, out)
		}
	}

	writeCellTenant(t, tenants, "CELLAC", "  placement:\n    labels: {region: us}\n")
	if code, out = runEvactl(t, append([]string{"diff", "-o", "markdown"}, args...)...); code != ExitOK || !strings.Contains(out, "| 1 | eu-1 → us-1 | CELLAC | changed |") {
		t.Fatalf("diff -o markdown of a move: exit %d, want CELLAC from eu-1 to us-1:\n%s", code, out)
	}
	writeCellTenant(t, tenants, "NOWHER", "  placement:\n    cell: mars-1\n")
	code, out = runEvactl(t, append([]string{"diff", "-o", "markdown"}, args...)...)
	want := "| " + strings.ReplaceAll(strings.ReplaceAll(filepath.Join(tenants, "NOWHER.yaml"), ".", "&#46;"), "_", "&#95;")
	if code != ExitInvalid || !strings.Contains(out, "#### Refused") || !strings.Contains(out, want) || !strings.Contains(out, "mars-1") {
		t.Fatalf("diff -o markdown of a refused change: exit %d, want %d and the problem at %s:\n%s", code, ExitInvalid, want, out)
	}
}
