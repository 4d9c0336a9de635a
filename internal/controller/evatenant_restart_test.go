package controller

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

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
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.APIVersion)
		u.SetKind(ref.Kind)
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
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
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(ref.APIVersion)
			u.SetKind(ref.Kind)
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
				return err
			}
			if u.GetResourceVersion() != versions[refString(ref)] {
				return fmt.Errorf("%s rewritten", refString(ref))
			}
		}
		return nil
	})
}
