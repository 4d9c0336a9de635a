package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenantfile"
)

// chartProblems finds, for every tenant whose file is otherwise valid, what the chart
// check of a render would refuse: each release is rendered in memory exactly as
// render does (catalog ⊕ tier ⊕ capsule identity ⊕ helmValues, environment patches
// applied) and checked against its chart's values.schema.json and templates with the
// Helm SDK. Each failure is mapped back to the line of the tenant file that set the
// value, so validate reports it as file:line:col instead of render failing later with
// no position. Tenants are checked on every core; the checker caches per chart and
// values, so the render that follows checks nothing twice.
func chartProblems(res *tenantfile.Result, r *render.Renderer, checker *chartcheck.Checker) []tenantfile.Problem {
	bad := map[string]bool{}
	for _, p := range res.Problems {
		bad[p.File] = true
	}
	var todo []*tenantfile.Tenant
	for _, t := range res.Tenants {
		// A reused tenant (a stub) was checked by the render the cache describes, with
		// the same charts; it is not rendered now.
		if !bad[safetext.Escape(t.File)] && t.Object != nil && !t.Reused {
			todo = append(todo, t)
		}
	}
	plain := *r
	plain.Check = nil // the bundle is checked here, release by release
	var mu sync.Mutex
	var out []tenantfile.Problem
	work := make(chan *tenantfile.Tenant)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range work {
				ps := tenantChartProblems(t, &plain, checker)
				mu.Lock()
				out = append(out, ps...)
				mu.Unlock()
			}
		}()
	}
	for _, t := range todo {
		work <- t
	}
	close(work)
	wg.Wait()
	tenantfile.SortProblems(out)
	// A value the environment's overlay sets is refused once, not once per tenant.
	return slices.Compact(out)
}

// patchSetting returns the last of the environment's patches that sets the values path
// of a module's HelmRelease (the one whose value the chart saw), or nil.
func patchSetting(env *overlay.Environment, objects []map[string]any, module string, path []string) *overlay.Patch {
	if env == nil {
		return nil
	}
	for _, obj := range objects {
		if meta, _ := obj["metadata"].(map[string]any); obj["kind"] != "HelmRelease" || meta["name"] != module {
			continue
		}
		id, full := overlay.IdentityOf(obj), append([]string{"spec", "values"}, path...)
		for i := len(env.Patches) - 1; i >= 0; i-- {
			if p := &env.Patches[i]; p.File != "" && p.Writes(id, full) {
				return p
			}
		}
	}
	return nil
}

// overlayProblem blames an environment overlay's patch for a value a chart refuses.
func overlayProblem(p *overlay.Patch, module, chart string, v chartcheck.Violation) tenantfile.Problem {
	field := "spec.values"
	if len(v.Path) > 0 {
		field += "." + strings.Join(v.Path, ".")
	}
	return tenantfile.ProblemIn(p.File, p.Line, p.Column, "patches",
		fmt.Sprintf("sets %s of HelmRelease %s, which chart %s refuses (values.schema.json): %s", field, module, chart, v.Message))
}

func tenantChartProblems(t *tenantfile.Tenant, r *render.Renderer, checker *chartcheck.Checker) []tenantfile.Problem {
	b, err := r.Bundle(t.Object)
	if err != nil {
		return []tenantfile.Problem{t.ProblemAt("spec", "cannot be rendered: "+err.Error())}
	}
	var out []tenantfile.Problem
	for _, rel := range chartcheck.ReleasesIn(b.Code, b.Objects()) {
		violations, err := checker.Violations(rel)
		var missing *chartcheck.MissingVersionError
		switch {
		case errors.As(err, &missing):
			out = append(out, missingVersionProblem(t, rel.Module, missing))
			continue
		case err != nil:
			out = append(out, t.ProblemAt(modulePath(rel.Module).String(), fmt.Sprintf("module %s: %v", rel.Module, err)))
			continue
		}
		chart := rel.Chart + " " + rel.Version
		for _, v := range violations {
			p, own := valuesPath(rel.Module, v.Path, rel.Values, tenantValues(t, rel.Module))
			var msg string
			switch {
			case v.Template:
				msg = fmt.Sprintf("chart %s cannot render these values: %s", chart, v.Message)
			case own:
				msg = fmt.Sprintf("refused by chart %s (values.schema.json): %s", chart, v.Message)
			default:
				if patch := patchSetting(r.Env, b.Objects(), rel.Module, v.Path); patch != nil {
					out = append(out, overlayProblem(patch, rel.Module, chart, v))
					continue
				}
				msg = fmt.Sprintf("refused by chart %s (values.schema.json) after merging the catalog, tier and environment values: %s", chart, v.Message)
			}
			out = append(out, t.ProblemAt(p.String(), msg))
		}
	}
	return out
}

// missingVersionProblem points at the tenant's pin of the module, or, when the tenant
// pins nothing, at its tier (whose catalog default is the version missing).
func missingVersionProblem(t *tenantfile.Tenant, module string, err *chartcheck.MissingVersionError) tenantfile.Problem {
	if _, pinned := t.Object.Spec.Versions[module]; pinned {
		return t.ProblemAt(field.NewPath("spec", "versions").Key(module).String(),
			fmt.Sprintf("module %s: %v: pin a published version", module, err))
	}
	return t.ProblemAt(field.NewPath("spec", "tier").String(),
		fmt.Sprintf("module %s: the catalog's version: %v: publish it (evactl charts push) or fix the catalog", module, err))
}

// modulePath is where a module's overrides live in a tenant file.
func modulePath(module string) *field.Path {
	return field.NewPath("spec", "helmValues").Key(module)
}

// tenantValues returns the tenant's own overrides of a module (nil when it has none).
func tenantValues(t *tenantfile.Tenant, module string) any {
	raw, ok := t.Object.Spec.HelmValues[module]
	if !ok {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return nil
	}
	return v
}

// valuesPath turns a JSON pointer into the merged values of a module into the field
// path of the tenant file (spec.helmValues[crm].image.repository, lists by index), and
// reports whether the tenant's own overrides hold that place.
func valuesPath(module string, tokens []string, merged, own any) (*field.Path, bool) {
	p := modulePath(module)
	cur, mine := merged, own
	for _, tok := range tokens {
		if list, ok := cur.([]any); ok {
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(list) {
				return p.Child(tok), false
			}
			p = p.Index(i)
			cur = list[i]
			if ml, ok := mine.([]any); ok && i < len(ml) {
				mine = ml[i]
			} else {
				mine = nil
			}
			continue
		}
		p = p.Child(tok)
		if m, ok := cur.(map[string]any); ok {
			cur = m[tok]
		} else {
			cur = nil
		}
		if mm, ok := mine.(map[string]any); ok {
			mine = mm[tok]
		} else {
			mine = nil
		}
	}
	return p, own != nil && mine != nil
}
