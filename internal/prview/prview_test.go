package prview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/tenantfile"
	"github.com/aidonow/eva/internal/treediff"
)

// TestMarkdownShowsTheChangeByWaveAndCell: the tenants the change touches are listed by
// wave, then cell, then code, a moved one with both cells; the objects kind by kind with
// their fields; each cell's room; the refusals at their line.
func TestMarkdownShowsTheChangeByWaveAndCell(t *testing.T) {
	r := &treediff.Report{Added: []string{"ZEBRAA"}, Changed: []string{"ACMECO", "GLOBEX"}, Removed: []string{"OLDIES"},
		Objects: []treediff.ObjectChange{
			{Tenant: "ACMECO", Object: "HelmRelease eva-tenant-acmeco/crm", Status: "changed",
				Fields: []treediff.FieldChange{{Field: "spec.values.replicaCount", Old: "2", New: "3"}}},
			{Tenant: "GLOBEX", Object: "Namespace eva-tenant-globex", Status: "added"},
			{Tenant: "ZEBRAA", Object: "HelmRelease eva-tenant-zebraa/crm", Status: "added"},
			{Tenant: "OLDIES", Object: "HelmRelease eva-tenant-oldies/crm", Status: "removed"},
		},
		Files: make([]treediff.FileDiff, 4)}
	pods := int64(12)
	got := Markdown(Preview{Environment: "prod", Report: r,
		Tenants: map[string]Tenant{"ZEBRAA": {Wave: 0, Cell: "eu-1"}, "ACMECO": {Wave: 2, Cell: "eu-1"}, "GLOBEX": {Wave: 0, Cell: "eu-1 → eu-2"}},
		Cells:   []Cell{{Name: "eu-1", Tenants: 7, CPU: "1500m", Memory: "3Gi", Pods: &pods}},
		Problems: []tenantfile.Problem{{File: "tenants/BADONE.yaml", Line: 4, Column: 3, Field: "spec.tier",
			Message: "tier enterprise: the environment's entitlements do not give tenant BADONE"}}})
	for _, want := range []string{
		"### Eva: environment prod",
		"**1** tenant(s) added, **2** changed, **1** removed: 4 object(s) in 4 file(s).",
		"| tenants/BADONE&#46;yaml&#58;4&#58;3 | spec&#46;tier | tier enterprise&#58; the environment&#39;s entitlements do not give tenant BADONE |",
		"| 0 | eu-1 | ZEBRAA | added | +1 ~0 -0 |\n| 0 | eu-1 → eu-2 | GLOBEX | changed | +1 ~0 -0 |\n| 2 | eu-1 | ACMECO | changed | +0 ~1 -0 |\n| - | - | OLDIES | removed | +0 ~0 -1 |",
		"<details><summary>HelmRelease: 1 added, 1 changed, 1 removed</summary>",
		"| ACMECO | eva-tenant-acmeco/crm | spec&#46;values&#46;replicaCount | 2 | 3 |",
		"| OLDIES | eva-tenant-oldies/crm | (removed) |  |  |",
		"<details><summary>Namespace: 1 added</summary>",
		"| eu-1 | 7 | 1500m | 3Gi | 12 | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the preview lacks\n%s\n---\n%s", want, got)
		}
	}
}

// TestMarkdownOpensNothing: a hostile value (a tag, a link, a table cell, a mention)
// reaches the preview as text.
func TestMarkdownOpensNothing(t *testing.T) {
	hostile := "x | <img src=x onerror=alert(1)> [a](https://evil.example) @platform-team `y`"
	r := &treediff.Report{Changed: []string{"ACMECO"}, Objects: []treediff.ObjectChange{{Tenant: "ACMECO",
		Object: "ConfigMap eva-tenant-acmeco/x", Status: "changed",
		Fields: []treediff.FieldChange{{Field: "data[\"" + hostile + "\"]", Old: hostile, New: "b"}}}}, Files: make([]treediff.FileDiff, 1)}
	got := Markdown(Preview{Environment: "dev", Report: r})
	for _, never := range []string{"<img", "](", "@platform", "`y`", "x | <"} {
		if strings.Contains(got, never) {
			t.Errorf("the preview holds %q:\n%s", never, got)
		}
	}
}

// TestMarkdownStaysWithinAComment: a change of many objects is cut at MaxBytes, the
// rows left out counted and the folded section closed.
func TestMarkdownStaysWithinAComment(t *testing.T) {
	r := &treediff.Report{Files: make([]treediff.FileDiff, 1)}
	for i := range 5000 {
		code := fmt.Sprintf("T%05d", i)
		r.Changed = append(r.Changed, code)
		r.Objects = append(r.Objects, treediff.ObjectChange{Tenant: code, Object: "HelmRelease eva-tenant-x/crm", Status: "changed",
			Fields: []treediff.FieldChange{{Field: "spec.values.replicaCount", Old: "1", New: "2"}}})
	}
	got := Markdown(Preview{Environment: "dev", Report: r})
	if len(got) > MaxBytes+200 || !strings.Contains(got, "more row(s) not shown") {
		t.Fatalf("preview of %d bytes, want at most %d and the rows left out counted:\n%s", len(got), MaxBytes, got[len(got)-300:])
	}
	if strings.Count(got, "<details>") != strings.Count(got, "</details>") {
		t.Errorf("a folded section is left open")
	}
}
