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
	// Conditions are, per condition, the seconds until it first became True, over the
	// tier's tenants that reached it.
	Conditions map[string]Spread `json:"conditions,omitempty"`
}

// Spread is a distribution of seconds.
type Spread struct {
	Tenants int     `json:"tenants"`
	P50     float64 `json:"p50Seconds"`
	P95     float64 `json:"p95Seconds"`
	Max     float64 `json:"maxSeconds"`
}

// Report is the whole SLA report.
type Report struct {
	// Environment says where it was measured and what was simulated there.
	Environment map[string]string           `json:"environment,omitempty"`
	Tenants     []TenantTimes               `json:"tenants"`
	Tiers       map[evav1.Tier]*TierSummary `json:"tiers"`
	Pass        bool                        `json:"pass"`
}

// Build computes the report from tenants' statuses.
func Build(tenants []evav1.EvaTenant) Report {
	r := Report{Tiers: map[evav1.Tier]*TierSummary{}, Pass: true}
	readyByTier := map[evav1.Tier][]float64{}
	byCondition := map[evav1.Tier]map[string][]float64{}
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
		if byCondition[t.Spec.Tier] == nil {
			byCondition[t.Spec.Tier] = map[string][]float64{}
		}
		for ct, v := range tt.Conditions {
			byCondition[t.Spec.Tier][ct] = append(byCondition[t.Spec.Tier][ct], v)
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
		for ct, v := range byCondition[tier] {
			slices.Sort(v)
			if s.Conditions == nil {
				s.Conditions = map[string]Spread{}
			}
			s.Conditions[ct] = Spread{Tenants: len(v), P50: percentile(v, 0.50), P95: percentile(v, 0.95), Max: percentile(v, 1)}
		}
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
