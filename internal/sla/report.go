// Package sla turns provisioned tenants into a service-level report: per tenant, the
// seconds from the start of provisioning until each condition first became True, and
// per tier, the distribution against the tier's budget.
package sla

import (
	"slices"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Budgets are the provisioning time budgets per tier (seed paper: Starter 300 s,
// Enterprise 480 s). A tier without a budget is reported without a verdict.
var Budgets = map[evav1.Tier]time.Duration{
	evav1.TierStarter:    300 * time.Second,
	evav1.TierEnterprise: 480 * time.Second,
}

// TenantTimes is one tenant's elapsed seconds per condition.
type TenantTimes struct {
	Code       string             `json:"code"`
	Tier       evav1.Tier         `json:"tier"`
	Conditions map[string]float64 `json:"conditions"`
	// Ready is the seconds until the tenant was Ready (all five True); -1 if it never was.
	Ready float64 `json:"readySeconds"`
}

// TierSummary summarises a tier.
type TierSummary struct {
	Tenants       int      `json:"tenants"`
	NotReady      int      `json:"notReady"`
	P50           float64  `json:"p50Seconds"`
	P95           float64  `json:"p95Seconds"`
	Max           float64  `json:"maxSeconds"`
	BudgetSeconds *float64 `json:"budgetSeconds,omitempty"`
	Pass          *bool    `json:"pass,omitempty"`
}

// Report is the whole SLA report.
type Report struct {
	Tenants []TenantTimes               `json:"tenants"`
	Tiers   map[evav1.Tier]*TierSummary `json:"tiers"`
	Pass    bool                        `json:"pass"`
}

// Build computes the report from tenants' statuses.
func Build(tenants []evav1.EvaTenant) Report {
	r := Report{Tiers: map[evav1.Tier]*TierSummary{}, Pass: true}
	readyByTier := map[evav1.Tier][]float64{}
	for _, t := range tenants {
		tt := TenantTimes{Code: t.Spec.CapsuleCode, Tier: t.Spec.Tier, Conditions: map[string]float64{}, Ready: -1}
		start := t.Status.ProvisioningStartedAt
		for ct, at := range t.Status.FirstTrue {
			if start != nil {
				tt.Conditions[ct] = at.Sub(start.Time).Seconds()
			}
		}
		if v, ok := tt.Conditions[evav1.ConditionReady]; ok {
			tt.Ready = v
		}
		r.Tenants = append(r.Tenants, tt)
		s := r.Tiers[t.Spec.Tier]
		if s == nil {
			s = &TierSummary{}
			r.Tiers[t.Spec.Tier] = s
		}
		s.Tenants++
		if tt.Ready < 0 {
			s.NotReady++
			continue
		}
		readyByTier[t.Spec.Tier] = append(readyByTier[t.Spec.Tier], tt.Ready)
	}
	slices.SortFunc(r.Tenants, func(a, b TenantTimes) int {
		switch {
		case a.Code < b.Code:
			return -1
		case a.Code > b.Code:
			return 1
		}
		return 0
	})
	for tier, s := range r.Tiers {
		times := readyByTier[tier]
		slices.Sort(times)
		s.P50, s.P95, s.Max = percentile(times, 0.50), percentile(times, 0.95), percentile(times, 1)
		if budget, ok := Budgets[tier]; ok {
			b := budget.Seconds()
			pass := s.NotReady == 0 && s.Max <= b
			s.BudgetSeconds, s.Pass = &b, &pass
			r.Pass = r.Pass && pass
		}
	}
	return r
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}
