package controller

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestPlannerViewIgnoresStatusChurn: a tenant's status writes that the planner does not
// read wake no rollout; a change of its readiness, release or spec does.
func TestPlannerViewIgnoresStatusChurn(t *testing.T) {
	base := newTenant("tenants", "VIEWED", evav1.TierStarter)
	base.Generation = 3
	base.Status.Phase, base.Status.ObservedGeneration = evav1.PhaseActive, 3
	apimeta.SetStatusCondition(&base.Status.Conditions, metav1.Condition{Type: evav1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Ready", Message: "tenant provisioned", ObservedGeneration: 3})
	view := plannerView(base)

	churn := base.DeepCopy()
	churn.Status.AppliedDigest = "sha256:other"
	churn.Status.Inventory = append(churn.Status.Inventory, evav1.ObjectRef{})
	apimeta.SetStatusCondition(&churn.Status.Conditions, metav1.Condition{Type: evav1.ConditionIngressReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	if plannerView(churn) != view {
		t.Error("status the planner does not read changed the view")
	}
	for name, change := range map[string]func(*evav1.EvaTenant){
		"not Ready": func(t *evav1.EvaTenant) {
			apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: evav1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing"})
		},
		"release":    func(t *evav1.EvaTenant) { t.Status.Release = "crm-1-5" },
		"generation": func(t *evav1.EvaTenant) { t.Generation = 4 },
		"frozen":     func(t *evav1.EvaTenant) { t.Spec.Frozen = "audit" },
		"phase":      func(t *evav1.EvaTenant) { t.Status.Phase = evav1.PhaseFailed },
	} {
		changed := base.DeepCopy()
		change(changed)
		if plannerView(changed) == view {
			t.Errorf("%s: the view did not change", name)
		}
	}
}
