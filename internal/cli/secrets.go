package cli

import (
	"fmt"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenantfile"
)

// reservedProblems refuses the Active tenants whose capsule code the environment
// reserves (reservedCodes), at their capsuleCode line: render would refuse them.
func reservedProblems(res *tenantfile.Result, env *overlay.Environment) []tenantfile.Problem {
	var problems []tenantfile.Problem
	for _, t := range res.Tenants {
		if t.Object == nil || t.Object.Spec.LifecycleOrDefault() != evav1.LifecycleActive || !env.Settings.Reserves(t.Object.Spec.CapsuleCode) {
			continue
		}
		problems = append(problems, t.ProblemAt("spec.capsuleCode", render.ReservedError(t.Object.Spec.CapsuleCode, env).Error()))
	}
	return problems
}

// secretProblems checks the tenants' encrypted Secret files against the environment
// they are rendered for: it must say how to decrypt them, and each must be encrypted
// for its own tenant's age recipients only (or the cluster could not decrypt it, or
// another tenant's key could).
func secretProblems(res *tenantfile.Result, env *overlay.Environment) []tenantfile.Problem {
	if len(res.Secrets) == 0 {
		return nil
	}
	settings := env.Settings.Secrets
	if settings == nil {
		var problems []tenantfile.Problem
		for _, s := range res.Secrets {
			problems = append(problems, tenantfile.Problem{File: s.File, Line: 1, Column: 1,
				Message: fmt.Sprintf("environment %s cannot decrypt tenant Secrets: its environment.yaml has no secrets settings (keySecretPrefix, recipients)", env.Name)})
		}
		return problems
	}
	return tenantfile.CheckRecipients(res.Secrets, settings.CheckFor, env.Name)
}
