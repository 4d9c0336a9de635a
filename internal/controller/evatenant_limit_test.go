package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// TestFleetTenantLimit: with the entitlements' maxTenants reached, a new tenant claims
// no code and gets nothing (no namespace), Stalled with the reason; the tenants within
// the limit are provisioned.
func TestFleetTenantLimit(t *testing.T) {
	ctx := context.Background()
	var claims coordinationv1.LeaseList
	if err := k8s.List(ctx, &claims, client.InNamespace(claimsNamespace), client.HasLabels{tenant.LabelCapsule}); err != nil {
		t.Fatal(err)
	}
	limit := len(claims.Items) + 2 // earlier tests' claims stay in the shared namespace
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) { r.Claims.Limit = limit })
	ns := newTestNamespace(t)
	for _, code := range []string{"LIMITA", "LIMITB"} {
		tn := newTenant(ns, code, evav1.TierStarter)
		createTenant(t, tn)
		waitPhase(t, tn, evav1.PhaseProvisioning)
	}
	over := newTenant(ns, "LIMITC", evav1.TierStarter)
	createTenant(t, over)
	got := waitPhase(t, over, evav1.PhaseFailed)
	c := findCondition(got, evav1.ConditionStalled)
	if c.Status != "True" || c.Reason != status.ReasonTenantLimit || !strings.Contains(c.Message, fmt.Sprintf("maxTenants %d", limit)) {
		t.Fatalf("Stalled %+v", c)
	}
	var lease coordinationv1.Lease
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: claimsNamespace, Name: claim.Name("LIMITC")}, &lease); !apierrors.IsNotFound(err) {
		t.Errorf("the tenant over the limit claimed its code: %v", err)
	}
	var n corev1.Namespace
	if err := k8s.Get(ctx, client.ObjectKey{Name: tenant.Namespace("LIMITC")}, &n); !apierrors.IsNotFound(err) {
		t.Errorf("the tenant over the limit got a namespace: %v", err)
	}
}
