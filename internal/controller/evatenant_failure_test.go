package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

func TestInvalidTenantFailsWithoutHotLoop(t *testing.T) {
	startOperator(t, "")
	ns := newTestNamespace(t)
	// The CRD cannot check that a module belongs to the tier; the operator does.
	tn := newTenant(ns, "BADMOD", evav1.TierStarter)
	tn.Spec.Versions = map[string]evav1.ModuleVersion{"forge": "0.6.0"}
	createTenant(t, tn)
	got := waitPhase(t, tn, evav1.PhaseFailed)
	c := condition(got, evav1.ConditionReady)
	if c.Reason != status.ReasonInvalidSpec || !strings.Contains(c.Message, "spec.versions[forge]") {
		t.Fatalf("Ready = %s %q", c.Reason, c.Message)
	}
	rv := got.ResourceVersion
	// Nothing was applied, and the tenant is not rewritten over and over.
	if namespacesOf(t, "BADMOD") != 0 {
		t.Errorf("an invalid tenant got a namespace")
	}
	consistently(t, "tenant not rewritten", func() error {
		if getTenant(t, tn).ResourceVersion != rv {
			return errNot("stable resourceVersion")
		}
		return nil
	})
}

// TestTenantPastEntitlementsFails: an operator whose environment has entitlements
// (prodEntitlements) renders nothing for an EvaTenant that claims a tier its code is not
// granted (the admission policy would refuse it; here the cluster enforces another
// environment's, so only the operator stands), and fails it naming the rule.
func TestTenantPastEntitlementsFails(t *testing.T) {
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		env := *r.Renderer.Env
		env.Settings.Entitlements = prodEntitlements
		r.Renderer = &render.Renderer{Catalog: r.Renderer.Catalog, Env: &env, Charts: r.Renderer.Charts}
	})
	ns := newTestNamespace(t)
	tn := newTenant(ns, "PASTEN", evav1.TierEnterprise)
	createTenant(t, tn)
	got := waitPhase(t, tn, evav1.PhaseFailed)
	c := condition(got, evav1.ConditionReady)
	if c.Reason != status.ReasonInvalidSpec || !strings.Contains(c.Message, "tier Enterprise is not PASTEN's to take: the entitlements of environment") {
		t.Fatalf("Ready = %s %q", c.Reason, c.Message)
	}
	if namespacesOf(t, "PASTEN") != 0 {
		t.Errorf("a tenant past its entitlements got a namespace")
	}
}

// namespacesOf counts the namespaces carrying a capsule's label.
func namespacesOf(t *testing.T, code string) int {
	t.Helper()
	var list unstructured.UnstructuredList
	list.SetAPIVersion("v1")
	list.SetKind("NamespaceList")
	if err := k8s.List(context.Background(), &list, client.MatchingLabels{tenant.LabelCapsule: code}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
