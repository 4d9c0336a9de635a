package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// nestedValues is a helmValues override of about size bytes of JSON that its YAML
// inflates: a list of small numbers depth maps down, each item a line indented by the
// depth.
func nestedValues(depth, size int) map[string]any {
	items := make([]any, size/2)
	for i := range items {
		items[i] = 1
	}
	var v any = items
	for range depth {
		v = map[string]any{"n": v}
	}
	return map[string]any{"extra": v}
}

// TestBudgetRefusesInflatedTenant: a tenant whose helmValues are within the spec's
// limits (32 KiB of JSON a module) but nested so deep that their YAML takes many times
// that is refused by the render, naming the tenant, the total, the budget, the largest
// file and the largest object.
func TestBudgetRefusesInflatedTenant(t *testing.T) {
	for layout, tc := range map[string]struct {
		r       func(testing.TB) *Renderer
		largest string
	}{
		"flux":   {renderer, "tenants/bigval/workloads/manifests.yaml"},
		"argocd": {argoRenderer, "argocd/bigval.yaml"},
	} {
		t.Run(layout, func(t *testing.T) {
			r := tc.r(t)
			// As deep as the spec allows (16 levels with the list and "extra"), 30 KiB of
			// JSON for one module and 16 for another: each well under the spec's limits.
			tn := tenantFor("BIGVAL", withTier(evav1.TierEnterprise), withValues("crm", nestedValues(14, 30<<10)), withValues("itsm", nestedValues(14, 16<<10)))
			if errs := r.Catalog.Validate(tn); len(errs) > 0 {
				t.Fatalf("the inflated tenant is not valid, so the budget is not what refuses it: %v", errs.ToAggregate())
			}
			_, err := r.Bundle(tn)
			if err == nil {
				raw, _ := json.Marshal(tn.Spec.HelmValues)
				t.Fatalf("a tenant with %d bytes of nested helmValues rendered within the budget", len(raw))
			}
			t.Log(err)
			if !errors.Is(err, ErrOverBudget) {
				t.Errorf("error %q is not ErrOverBudget", err)
			}
			for _, want := range []string{
				"tenant BIGVAL: rendered manifests over budget: ",
				fmt.Sprintf("more than the %d a tenant's", MaxTenantManifestBytes),
				"the largest file is " + tc.largest,
				"the largest object HelmRelease crm",
				"spec.helmValues",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if _, err := r.TenantFiles(tn); err == nil {
				t.Error("TenantFiles laid out the inflated tenant")
			}
		})
	}
}

// TestBudgetLeavesRoomForShippedTenants: the example tenants render in every shipped
// environment with at least ten times their size to spare.
func TestBudgetLeavesRoomForShippedTenants(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	examples, err := tenantfile.Load([]string{filepath.Join("..", "..", "tenants")}, catalog)
	if err != nil || !examples.Valid() {
		t.Fatalf("example tenants: %v %v", err, examples.Problems)
	}
	for _, env := range []string{"dev", "prod"} {
		e, err := overlay.Load(filepath.Join("..", "..", "overlays"), env)
		if err != nil {
			t.Fatal(err)
		}
		r := &Renderer{Catalog: catalog, Env: e}
		for _, ex := range examples.Tenants {
			b, err := r.Bundle(ex.Object)
			if err != nil {
				t.Fatalf("%s, %s: %v", env, ex.Object.Spec.CapsuleCode, err)
			}
			data, err := b.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %d bytes of manifests", env, ex.Object.Spec.CapsuleCode, len(data))
			if len(data)*10 > MaxTenantManifestBytes {
				t.Errorf("%s, %s: %d bytes of manifests, less than ten times under the budget (%d)", env, ex.Object.Spec.CapsuleCode, len(data), MaxTenantManifestBytes)
			}
		}
	}
}
