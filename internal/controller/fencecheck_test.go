package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/status"
)

// TestFenceMismatchIsReportedOnTheTenant: an operator rendering with an environment
// whose domain is not the one the cluster's fence enforces (the chart installed with a
// shipped environment, not the fleet's) says so on every tenant's Provisioned
// condition, naming both digests and the fix, instead of leaving the tenant to find
// its Ingress refused.
func TestFenceMismatchIsReportedOnTheTenant(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	var own string
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		env := *r.Renderer.Env
		env.Settings.Domain = "tenants.acme.test"
		r.Renderer.Env = &env
		own = env.Settings.FenceParams()[overlay.FenceDigestKey]
		r.Fence = &FenceCheck{Reader: mgr.GetAPIReader(), Namespace: claimsNamespace, Env: &env}
		if err := mgr.Add(r.Fence); err != nil {
			t.Fatal(err)
		}
	})
	tn := newTenant(newTestNamespace(t), "FENCEM", evav1.TierStarter)
	createTenant(t, tn)
	enforced := devFenceDigest()
	eventually(t, waitFor, "Provisioned to name the mismatch", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		c := condition(tn, evav1.ConditionProvisioned)
		if c.Reason != status.ReasonFenceMismatch || !strings.Contains(c.Message, own) || !strings.Contains(c.Message, enforced) ||
			!strings.Contains(c.Message, "evactl operator values") {
			return fmt.Errorf("Provisioned: %s: %s", c.Reason, c.Message)
		}
		return nil
	})
}
