// Package entitlement decides what a tenant may claim for itself: its tier, its rollout
// wave, whether it may freeze itself off platform releases. These are the platform's
// decisions, written once in the environment (environment.yaml, entitlements:) and
// enforced from that one source on both paths a tenant reaches the platform: evactl
// (validate, render, diff, publish) and the operator check tenant files and EvaTenants
// with Check, and the admission policy eva-tenant-entitlements holds kubectl to the same
// rules through the parameters Params generates (the overlays' and the chart's ConfigMap
// eva-tenant-entitlements, which tests hold equal to Params).
package entitlement

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Waves are the rollout waves a tenant may be in (the CRD's bounds).
var Waves = []int32{1, 2, 3}

// Rules are an environment's entitlements: what every tenant may take, and what named
// capsule codes may take beyond that.
type Rules struct {
	// Tiers any tenant may take.
	Tiers []evav1.Tier `json:"tiers"`
	// Waves any tenant may choose.
	Waves []int32 `json:"waves"`
	// Freeze lets any tenant set spec.frozen (keep platform releases off itself).
	Freeze bool `json:"freeze,omitempty"`
	// MaxTenants caps the fleet: how many capsule codes may be claimed at once, every
	// requester together (tenant files and EvaTenants alike); zero: no cap. evactl
	// validate counts the tenant files, the operator the claims.
	MaxTenants int `json:"maxTenants,omitempty"`
	// MaxTenantsPerNamespace caps how many EvaTenants one requester namespace may hold:
	// the operator chart's ResourceQuota eva-tenants (count/evatenants) in each of its
	// tenantNamespaces, enforced by the API server; zero: no cap.
	MaxTenantsPerNamespace int `json:"maxTenantsPerNamespace,omitempty"`
	// Grants are what a capsule code may take beyond the rest, by code.
	Grants map[string]Grant `json:"grants,omitempty"`
}

// Grant is what one capsule code may take beyond every tenant's entitlements.
type Grant struct {
	Tiers  []evav1.Tier `json:"tiers,omitempty"`
	Waves  []int32      `json:"waves,omitempty"`
	Freeze bool         `json:"freeze,omitempty"`
	// NoQuota exempts the code from its tier's ResourceQuota: its namespace gets none
	// (the LimitRange stays). Every other tenant is bounded by its tier's quota.
	NoQuota bool `json:"noQuota,omitempty"`
	// Namespace, when set, is the requester namespace whose EvaTenant of the code the
	// grant is for: an EvaTenant of the code elsewhere (a requester who took the code
	// first) gets nothing of it. Tenant files, reviewed in the fleet repository, name no
	// namespace and get the grant.
	Namespace string `json:"namespace,omitempty"`
}

// grantOf is what the rules grant the tenant beyond every tenant's: its code's grant,
// unless that grant is for another requester namespace.
func (r *Rules) grantOf(t *evav1.EvaTenant) Grant {
	g := r.Grants[t.Spec.CapsuleCode]
	if g.Namespace != "" && t.Namespace != "" && t.Namespace != g.Namespace {
		return Grant{}
	}
	return g
}

// TenantLimit is the fleet's cap on tenants (maxTenants), zero for none.
func (r *Rules) TenantLimit() int {
	if r == nil {
		return 0
	}
	return r.MaxTenants
}

// Unquoted reports whether the rules exempt the tenant from its tier's quota.
func (r *Rules) Unquoted(t *evav1.EvaTenant) bool { return r != nil && r.grantOf(t).NoQuota }

var capsuleCodeRE = regexp.MustCompile(`^[A-Z]{6}$`)

// Validate checks the rules themselves, naming the field of environment.yaml at fault.
func (r *Rules) Validate() error {
	if r == nil {
		return nil
	}
	check := func(at string, tiers []evav1.Tier, waves []int32) error {
		for i, tier := range tiers {
			if !slices.Contains(evav1.Tiers, tier) {
				return fmt.Errorf("%s.tiers[%d]: %q is not a tier (%v)", at, i, tier, evav1.Tiers)
			}
		}
		for i, wave := range waves {
			if !slices.Contains(Waves, wave) {
				return fmt.Errorf("%s.waves[%d]: %d is not a wave (%v)", at, i, wave, Waves)
			}
		}
		return nil
	}
	if err := check("entitlements", r.Tiers, r.Waves); err != nil {
		return err
	}
	if r.MaxTenants < 0 || r.MaxTenantsPerNamespace < 0 {
		return fmt.Errorf("entitlements: maxTenants and maxTenantsPerNamespace are at least 0 (0: no cap)")
	}
	for _, code := range sortedCodes(r.Grants) {
		if !capsuleCodeRE.MatchString(code) {
			return fmt.Errorf("entitlements.grants: %q is not a capsule code (six capital letters)", code)
		}
		g := r.Grants[code]
		if err := check("entitlements.grants."+code, g.Tiers, g.Waves); err != nil {
			return err
		}
		if g.Namespace != "" && len(validation.IsDNS1123Label(g.Namespace)) > 0 {
			return fmt.Errorf("entitlements.grants.%s.namespace: %q is not a namespace name", code, g.Namespace)
		}
	}
	return nil
}

// Check lists what an active tenant claims beyond the rules, each at its field with the
// rule broken and where it is written (source, such as "entitlements of environment
// prod"). No rules: every claim is the tenant's. A decommissioned tenant claims nothing
// any more: its teardown is never refused.
func (r *Rules) Check(t *evav1.EvaTenant, source string) field.ErrorList {
	if r == nil || t.Spec.LifecycleOrDefault() != evav1.LifecycleActive {
		return nil
	}
	code := t.Spec.CapsuleCode
	g := r.grantOf(t)
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if !r.tierAllowed(t, t.Spec.Tier) {
		errs = append(errs, field.Forbidden(spec.Child("tier"), fmt.Sprintf("tier %s is not %s's to take: the %s let every tenant take %s%s",
			t.Spec.Tier, code, source, list(r.Tiers), granted(g.Tiers, code))))
	}
	if wave := t.Spec.WaveOrDefault(); !slices.Contains(r.Waves, wave) && !slices.Contains(g.Waves, wave) {
		errs = append(errs, field.Forbidden(spec.Child("wave"), fmt.Sprintf("wave %d is not %s's to choose: the %s let every tenant choose %s%s",
			wave, code, source, list(r.Waves), granted(g.Waves, code))))
	}
	if t.Spec.Frozen != "" && !r.Freeze && !g.Freeze {
		errs = append(errs, field.Forbidden(spec.Child("frozen"), fmt.Sprintf("%s may not freeze itself off platform releases: the %s grant freezing to %s",
			code, source, list(r.freezers()))))
	}
	return errs
}

// TierAllowed reports whether the rules let the tenant file of code take tier (Check's
// rule of spec.tier): the operator asks it of what a tenant file's published objects
// say, such as the tier its NACK Account's label names. No rules: every tier.
func (r *Rules) TierAllowed(code string, tier evav1.Tier) bool {
	return r == nil || r.tierAllowed(&evav1.EvaTenant{Spec: evav1.EvaTenantSpec{CapsuleCode: code}}, tier)
}

func (r *Rules) tierAllowed(t *evav1.EvaTenant, tier evav1.Tier) bool {
	return slices.Contains(r.Tiers, tier) || slices.Contains(r.grantOf(t).Tiers, tier)
}

// freezers are the codes granted freezing (every tenant's rule aside).
func (r *Rules) freezers() []string {
	var out []string
	for _, code := range sortedCodes(r.Grants) {
		if r.Grants[code].Freeze {
			out = append(out, code)
		}
	}
	return out
}

// Params are the rules as the admission policy eva-tenant-entitlements reads them, the
// data of the ConfigMap eva-tenant-entitlements: for each tier (tier.<Tier>), each wave
// (wave.<N>) and freezing (freeze), the capsule codes that may claim it, comma-separated
// and sorted, "*" for every tenant, "" for none; a grant for one requester namespace is
// "<CODE>@<namespace>". No rules: "*" everywhere.
func (r *Rules) Params() map[string]string {
	out := map[string]string{}
	who := func(everyone bool, granted func(Grant) bool) string {
		if r == nil || everyone {
			return "*"
		}
		var codes []string
		for _, code := range sortedCodes(r.Grants) {
			if g := r.Grants[code]; granted(g) {
				if g.Namespace != "" {
					code += "@" + g.Namespace
				}
				codes = append(codes, code)
			}
		}
		return strings.Join(codes, ",")
	}
	for _, tier := range evav1.Tiers {
		out["tier."+string(tier)] = who(r != nil && slices.Contains(r.Tiers, tier), func(g Grant) bool { return slices.Contains(g.Tiers, tier) })
	}
	for _, wave := range Waves {
		out["wave."+strconv.Itoa(int(wave))] = who(r != nil && slices.Contains(r.Waves, wave), func(g Grant) bool { return slices.Contains(g.Waves, wave) })
	}
	out["freeze"] = who(r != nil && r.Freeze, func(g Grant) bool { return g.Freeze })
	return out
}

func sortedCodes(grants map[string]Grant) []string {
	codes := make([]string, 0, len(grants))
	for code := range grants {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	return codes
}

// list is a list of claims as a reader wants them: "Starter, Customer", "none".
func list[T any](items []T) string {
	if len(items) == 0 {
		return "none"
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprint(it)
	}
	return strings.Join(parts, ", ")
}

// granted says what a code's grant adds, or that it has none.
func granted[T any](items []T, code string) string {
	if len(items) == 0 {
		return ", and grant " + code + " nothing more"
	}
	return ", and grant " + code + " " + list(items)
}
