package cli

import (
	"fmt"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenantfile"
)

// entitlementProblems refuses what the tenant files claim beyond the environment's
// entitlements (a tier, a wave, freezing), each at its field's line, with the rule and
// the file that writes it: what render, and the operator, would refuse.
func entitlementProblems(res *tenantfile.Result, env *overlay.Environment) []tenantfile.Problem {
	rules := env.Settings.Entitlements
	if rules == nil {
		return nil
	}
	source := render.EntitlementsOf(env)
	var problems []tenantfile.Problem
	for _, t := range res.Tenants {
		if t.Object == nil {
			continue
		}
		for _, e := range rules.Check(t.Object, source) {
			problems = append(problems, t.ProblemAt(e.Field, e.Detail))
		}
	}
	if limit := rules.TenantLimit(); limit > 0 && len(res.Tenants) > limit {
		// Each file holds a capsule code until it is removed (decommissioned ones
		// too, until their teardown): the operator's claims count the same.
		problems = append(problems, res.Tenants[limit].ProblemAt("spec.capsuleCode", fmt.Sprintf(
			"%d tenant files, beyond the fleet's cap of %d tenants in the %s (maxTenants): this file and those after it in path order are %d too many",
			len(res.Tenants), limit, source, len(res.Tenants)-limit)))
	}
	return problems
}
