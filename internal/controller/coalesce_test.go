package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/tenant"
)

// TestABurstOfChangesWakesATenantOnce changes an Active tenant's Namespace twenty
// times in a row, as the watch events of a reconcile's own applies or of releases
// turning Ready together come: the tenant is reconciled once for the burst (once more
// for each coalescing window the burst outlasted on a slow machine), not once per
// change. The reconciles are counted by the renders the operator's own metric
// records; the operator accepts only this test's namespace, so no other tenant's
// reconcile is counted.
func TestABurstOfChangesWakesATenantOnce(t *testing.T) {
	ns := newTestNamespace(t)
	var m *metrics.Metrics
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		var err error
		if m, err = metrics.New(prometheus.NewRegistry(), mgr.GetClient()); err != nil {
			t.Fatal(err)
		}
		r.Metrics, r.TenantNamespaces = m, []string{ns}
	})
	startStandIn(t)
	tn := newTenant(ns, "BURSTY", evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseActive)
	renders := func() uint64 {
		var out dto.Metric
		if err := m.RenderSeconds.Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetHistogram().GetSampleCount()
	}
	// Settled: no reconcile for two windows.
	var before uint64
	eventually(t, waitFor, "the tenant to settle", func() error {
		n := renders()
		time.Sleep(2 * CoalesceWindow)
		if before = renders(); before != n {
			return fmt.Errorf("%d reconciles in %s", before-n, 2*CoalesceWindow)
		}
		return nil
	})

	ctx := context.Background()
	key := types.NamespacedName{Name: tenant.Namespace("BURSTY")}
	start := time.Now()
	for i := range 20 {
		var nsObj corev1.Namespace
		if err := k8s.Get(ctx, key, &nsObj); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(nsObj.DeepCopy())
		if nsObj.Annotations == nil {
			nsObj.Annotations = map[string]string{}
		}
		nsObj.Annotations["test.eva.aidonow.com/burst"] = fmt.Sprint(i)
		if err := k8s.Patch(ctx, &nsObj, patch); err != nil {
			t.Fatal(err)
		}
	}
	burst := time.Since(start)
	// The burst's reconcile, then quiet again: what it cost is counted once it is over.
	var after uint64
	eventually(t, waitFor, "the burst's reconcile", func() error {
		if n := renders(); n == before {
			return fmt.Errorf("no reconcile since the burst")
		}
		n := renders()
		time.Sleep(2 * CoalesceWindow)
		if after = renders(); after != n {
			return fmt.Errorf("%d reconciles in %s", after-n, 2*CoalesceWindow)
		}
		return nil
	})
	// One reconcile a window the burst lasted, and one more for the watch delivering its
	// last events later than the patches returned (a loaded API server).
	allowed := 1 + uint64(burst/CoalesceWindow) + 1
	if got := after - before; got > allowed {
		t.Errorf("20 changes in %s woke the tenant %d times; want 1 to %d", burst.Round(time.Millisecond), got, allowed)
	}
}
