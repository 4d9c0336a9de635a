package controller

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestReconcileIsIdempotent restarts the operator over an Active tenant: the new one
// checks the whole bundle for drift, and no object (nor the tenant) changes.
// TestDriftCheckWritesOnlyWhatDrifted checks it does so without a write.
func TestReconcileIsIdempotent(t *testing.T) {
	ns := newTestNamespace(t)
	op := startOperator(t, "")
	tn := newTenant(ns, "IDEMPO", evav1.TierEnterprise)
	createTenant(t, tn)
	startStandIn(t)
	got := waitPhase(t, tn, evav1.PhaseActive)
	versions := map[string]string{"tenant": got.ResourceVersion}
	for _, ref := range got.Status.Inventory {
		u := objectOf(ref)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		versions[refString(ref)] = u.GetResourceVersion()
	}
	op.stop()
	startOperator(t, "")
	consistently(t, "nothing rewritten", func() error {
		if v := getTenant(t, tn).ResourceVersion; v != versions["tenant"] {
			return fmt.Errorf("tenant resourceVersion %s → %s", versions["tenant"], v)
		}
		for _, ref := range got.Status.Inventory {
			u := objectOf(ref)
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
				return err
			}
			if u.GetResourceVersion() != versions[refString(ref)] {
				return fmt.Errorf("%s rewritten", refString(ref))
			}
		}
		return nil
	})
}
