package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// applyLog records the kinds of the server-side applies an operator sends (dry runs
// apart), as the API server receives them.
type applyLog struct {
	client.Client
	mu    *sync.Mutex
	kinds *[]string
}

func (a applyLog) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	if p.Type() == types.ApplyPatchType && !isDryRun(opts) {
		a.mu.Lock()
		*a.kinds = append(*a.kinds, o.GetObjectKind().GroupVersionKind().Kind)
		a.mu.Unlock()
	}
	return a.Client.Patch(ctx, o, p, opts...)
}

// TestASpecChangeAppliesOnlyWhatChanged changes an Active tenant's seeds version, which
// changes its seed Job and nothing else of its foundation: the objects no controller
// writes after the operator (ServiceAccount, RoleBindings, LimitRange, NetworkPolicy,
// PrometheusRule) are still exactly what the operator applied, at the version it
// applied them, and are not applied again. Before, a new bundle applied every object.
func TestASpecChangeAppliesOnlyWhatChanged(t *testing.T) {
	ns := newTestNamespace(t)
	var mu sync.Mutex
	var kinds []string
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.TenantNamespaces = []string{ns}
		r.Client = applyLog{Client: r.Client, mu: &mu, kinds: &kinds}
	})
	startStandIn(t)
	tn := newTenant(ns, "FEWAPP", evav1.TierStarter)
	createTenant(t, tn)
	got := waitPhase(t, tn, evav1.PhaseActive)
	before := got.Status.AppliedDigest
	mu.Lock()
	kinds = nil
	mu.Unlock()

	ctx := context.Background()
	eventually(t, waitFor, "changing the seeds version", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		tn.Spec.SeedsVersion = "seeds-2"
		return k8s.Update(ctx, tn)
	})
	eventually(t, waitFor, "the new bundle applied", func() error {
		got = getTenant(t, tn)
		if got.Status.AppliedDigest == before || got.Status.AppliedDigest == "" {
			return fmt.Errorf("applied digest still %q", got.Status.AppliedDigest)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(kinds, "Job") {
		t.Errorf("the new seed Job was not applied; applied: %v", kinds)
	}
	for _, untouched := range []string{"ServiceAccount", "RoleBinding", "LimitRange", "NetworkPolicy", "PrometheusRule"} {
		if slices.Contains(kinds, untouched) {
			t.Errorf("%s applied again though unchanged; applied: %v", untouched, kinds)
		}
	}
}
