package render

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/tenant"
)

// TestToMapMatchesConverter checks the fast ToMap against what it replaces, the
// apimachinery converter followed by Clean, on every object of every tier and of varied
// tenants (helm values with integers, floats and nested lists included): the same maps,
// down to the Go type of each number.
func TestToMapMatchesConverter(t *testing.T) {
	r := renderer(t)
	tenants := append(syntheticTenants(40),
		tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database"), withPin("whisper", "0.9.1"),
			withValues("crm", map[string]any{"replicaCount": 2, "ratio": 0.25, "whole": 3.0, "big": 1e3,
				"list": []any{1, "a", map[string]any{"x": nil}}})),
		tenantFor("OLDTNT", withLifecycle(evav1.LifecycleDecommissioned)),
		tenantFor("NOSEED", withSeeds("")))
	seen := map[string]bool{}
	for _, tn := range tenants {
		code := tn.Spec.CapsuleCode
		s := &scope{r: r, t: tn, code: code, ns: tenant.Namespace(code), tier: r.Catalog.Tiers[tn.Spec.Tier]}
		built, err := s.build()
		if err != nil {
			t.Fatal(err)
		}
		for _, bl := range built {
			want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bl.obj)
			if err != nil {
				t.Fatal(err)
			}
			manifest.Clean(want)
			got, err := manifest.ToMap(bl.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %T: ToMap differs from the converter\n got %#v\nwant %#v", code, bl.obj, got, want)
			}
			seen[reflect.TypeOf(bl.obj).String()] = true
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d kinds compared: %v", len(seen), seen)
	}
}
