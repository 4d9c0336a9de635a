package entitlement

import (
	"maps"
	"strings"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func tenant(code string, tier evav1.Tier, wave int32, frozen string) *evav1.EvaTenant {
	return &evav1.EvaTenant{Spec: evav1.EvaTenantSpec{CapsuleCode: code, Tier: tier, Wave: wave, Frozen: frozen}}
}

var prod = &Rules{Tiers: []evav1.Tier{evav1.TierStarter, evav1.TierCustomer}, Waves: []int32{2, 3},
	Grants: map[string]Grant{"GLOBEX": {Tiers: []evav1.Tier{evav1.TierEnterprise}}, "PLATFM": {Tiers: []evav1.Tier{evav1.TierPlatform}, Waves: []int32{1}, Freeze: true}}}

// TestCheck: what every tenant may take, what a grant adds for its code alone, and
// nothing for a decommissioned tenant or without rules.
func TestCheck(t *testing.T) {
	cases := map[string]struct {
		t    *evav1.EvaTenant
		want []string // the fields refused
	}{
		"every tenant's":           {tenant("ACMECO", evav1.TierCustomer, 2, ""), nil},
		"another code's grant":     {tenant("ACMECO", evav1.TierEnterprise, 2, ""), []string{"spec.tier"}},
		"its own grant":            {tenant("GLOBEX", evav1.TierEnterprise, 3, ""), nil},
		"a wave granted elsewhere": {tenant("GLOBEX", evav1.TierStarter, 1, ""), []string{"spec.wave"}},
		"the default wave is 1":    {tenant("ACMECO", evav1.TierStarter, 0, ""), []string{"spec.wave"}},
		"freezing":                 {tenant("ACMECO", evav1.TierStarter, 2, "audit"), []string{"spec.frozen"}},
		"all of a grant":           {tenant("PLATFM", evav1.TierPlatform, 1, "audit"), nil},
		"all at once":              {tenant("FOOBAR", evav1.TierPlatform, 1, "audit"), []string{"spec.tier", "spec.wave", "spec.frozen"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range prod.Check(tc.t, "the rules") {
				got = append(got, e.Field)
				if !strings.Contains(e.Detail, "the rules") || !strings.Contains(e.Detail, tc.t.Spec.CapsuleCode) {
					t.Errorf("%s: %q names neither the rules nor the code", e.Field, e.Detail)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("refused %v, want %v", got, tc.want)
			}
		})
	}
	gone := tenant("FOOBAR", evav1.TierPlatform, 1, "audit")
	gone.Spec.Lifecycle = evav1.LifecycleDecommissioned
	if errs := prod.Check(gone, "the rules"); len(errs) > 0 {
		t.Errorf("a decommissioned tenant's claims refused: %v", errs)
	}
	var none *Rules
	if errs := none.Check(tenant("FOOBAR", evav1.TierPlatform, 1, "audit"), "the rules"); len(errs) > 0 {
		t.Errorf("no rules, yet refused: %v", errs)
	}
}

// TestParams: the admission policy's parameters say, for each claim, the codes that may
// make it: "*" for every tenant's, the granted codes sorted, "" for none.
func TestParams(t *testing.T) {
	want := map[string]string{"tier.Starter": "*", "tier.Customer": "*", "tier.Enterprise": "GLOBEX", "tier.Platform": "PLATFM",
		"wave.1": "PLATFM", "wave.2": "*", "wave.3": "*", "freeze": "PLATFM"}
	if got := prod.Params(); !maps.Equal(got, want) {
		t.Errorf("params %v, want %v", got, want)
	}
	var none *Rules
	for k, v := range none.Params() {
		if v != "*" {
			t.Errorf("no rules: %s=%q, want *", k, v)
		}
	}
}

// TestValidate names the field of a rule that cannot hold.
func TestValidate(t *testing.T) {
	cases := map[string]struct {
		r    *Rules
		want string
	}{
		"tier":  {&Rules{Tiers: []evav1.Tier{"Gold"}}, `entitlements.tiers[0]: "Gold" is not a tier`},
		"wave":  {&Rules{Waves: []int32{4}}, "entitlements.waves[0]: 4 is not a wave"},
		"code":  {&Rules{Grants: map[string]Grant{"acme": {}}}, `entitlements.grants: "acme" is not a capsule code`},
		"grant": {&Rules{Grants: map[string]Grant{"ACMECO": {Waves: []int32{0}}}}, "entitlements.grants.ACMECO.waves[0]: 0 is not a wave"},
	}
	for name, tc := range cases {
		if err := tc.r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if err := prod.Validate(); err != nil {
		t.Errorf("valid rules refused: %v", err)
	}
}

// TestGrantForOneNamespace: a grant naming a requester namespace goes to the code's
// EvaTenant there only: a requester elsewhere who takes the code first gets nothing of
// it. A tenant file (no namespace) gets it; the policy's parameters say CODE@namespace.
func TestGrantForOneNamespace(t *testing.T) {
	r := &Rules{Tiers: []evav1.Tier{evav1.TierStarter}, Waves: []int32{2},
		Grants: map[string]Grant{"GLOBEX": {Tiers: []evav1.Tier{evav1.TierEnterprise}, NoQuota: true, Namespace: "team-globex"}}}
	tn := func(ns string) *evav1.EvaTenant {
		x := &evav1.EvaTenant{Spec: evav1.EvaTenantSpec{CapsuleCode: "GLOBEX", Tier: evav1.TierEnterprise, Wave: 2}}
		x.Namespace = ns
		return x
	}
	if errs := r.Check(tn("team-globex"), "rules"); len(errs) != 0 {
		t.Errorf("GLOBEX in its namespace: %v", errs)
	}
	if errs := r.Check(tn(""), "rules"); len(errs) != 0 {
		t.Errorf("GLOBEX's tenant file: %v", errs)
	}
	if errs := r.Check(tn("squatters"), "rules"); len(errs) != 1 {
		t.Errorf("GLOBEX taken first in another namespace: %v, want the tier refused", errs)
	}
	if r.Unquoted(tn("squatters")) || !r.Unquoted(tn("team-globex")) {
		t.Error("the quota exemption follows the grant's namespace")
	}
	if got := r.Params()["tier.Enterprise"]; got != "GLOBEX@team-globex" {
		t.Errorf("tier.Enterprise = %q", got)
	}
	bad := &Rules{Grants: map[string]Grant{"GLOBEX": {Namespace: "Team_Globex"}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "entitlements.grants.GLOBEX.namespace") {
		t.Errorf("a grant's namespace that is no name: %v", err)
	}
}
