package sla

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func tenantReadyAfter(code string, tier evav1.Tier, seconds int) evav1.EvaTenant {
	start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t := evav1.EvaTenant{Spec: evav1.EvaTenantSpec{CapsuleCode: code, Tier: tier}}
	t.Status.ProvisioningStartedAt = &start
	if seconds >= 0 {
		t.Status.FirstTrue = map[string]metav1.Time{
			evav1.ConditionNamespaceReady: metav1.NewTime(start.Add(time.Second)),
			evav1.ConditionReady:          metav1.NewTime(start.Add(time.Duration(seconds) * time.Second)),
		}
	}
	return t
}

func TestBuild(t *testing.T) {
	r := Build([]evav1.EvaTenant{
		tenantReadyAfter("AAAAAA", evav1.TierStarter, 100), tenantReadyAfter("AAAAAB", evav1.TierStarter, 200),
		tenantReadyAfter("AAAAAC", evav1.TierEnterprise, 500), tenantReadyAfter("AAAAAD", evav1.TierCustomer, 50),
	})
	if !*r.Tiers[evav1.TierStarter].Pass || r.Tiers[evav1.TierStarter].Max != 200 {
		t.Errorf("Starter: %+v", r.Tiers[evav1.TierStarter])
	}
	if *r.Tiers[evav1.TierEnterprise].Pass || r.Pass {
		t.Errorf("an Enterprise tenant over 480 s passed: %+v", r.Tiers[evav1.TierEnterprise])
	}
	if r.Tiers[evav1.TierCustomer].Pass != nil {
		t.Error("Customer has no budget but got a verdict")
	}
	if r.Tenants[0].Conditions[evav1.ConditionNamespaceReady] != 1 {
		t.Errorf("per-condition time: %+v", r.Tenants[0])
	}
	never := Build([]evav1.EvaTenant{tenantReadyAfter("AAAAAE", evav1.TierStarter, -1)})
	if never.Pass || never.Tiers[evav1.TierStarter].NotReady != 1 {
		t.Errorf("a tenant never Ready passed: %+v", never.Tiers[evav1.TierStarter])
	}
}
