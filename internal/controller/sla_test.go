package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/sla"
)

// TestSLAReport provisions tenants of every tier end to end (the operator, with a Flux
// stand-in) and writes the SLA report: per-condition seconds per tenant and, per tier,
// pass/fail against the budgets. `make sla` runs it with more tenants and keeps the
// report (EVA_SLA_REPORT, EVA_SLA_TENANTS).
func TestSLAReport(t *testing.T) {
	perTier := 2
	if n := os.Getenv("EVA_SLA_TENANTS"); n != "" {
		if _, err := fmt.Sscan(n, &perTier); err != nil {
			t.Fatalf("EVA_SLA_TENANTS: %v", err)
		}
	}
	out := os.Getenv("EVA_SLA_REPORT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "sla.json")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startOperator(t, "")
	startFluxPlayer(t, ctx)
	ns := newTestNamespace(t)
	var tenants []*evav1.EvaTenant
	for ti, tier := range evav1.Tiers {
		for i := range perTier {
			tn := newTenant(ns, fmt.Sprintf("SL%c%c%c%c", 'A'+ti, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26), tier)
			createTenant(t, tn)
			tenants = append(tenants, tn)
		}
	}
	for _, tn := range tenants {
		waitPhase(t, tn, evav1.PhaseActive)
	}
	var list evav1.EvaTenantList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	report := sla.Build(list.Items)
	data, _ := json.MarshalIndent(report, "", "  ")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("SLA report (%d tenants) written to %s", len(list.Items), out)
	for tier, s := range report.Tiers {
		t.Logf("%s: %d tenants, p50 %.0fs, p95 %.0fs, max %.0fs", tier, s.Tenants, s.P50, s.P95, s.Max)
	}
	if len(report.Tenants) != len(tenants) {
		t.Fatalf("report has %d tenants, want %d", len(report.Tenants), len(tenants))
	}
	if !report.Pass {
		t.Fatalf("SLA budgets missed: %s", data)
	}
}
