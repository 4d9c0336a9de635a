package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// TestUnservedTenantIsMarkedAndPassedOver: a tenant of an operator version that no
// running operator announces keeps, without Presence, the Active and Ready its last
// operator wrote, and a rollout would admit it and wait on it for ever. The running
// operator marks it Unserved (Ready Unknown) and the rollout passes over it, saying so,
// while the served tenant gets the release.
func TestUnservedTenantIsMarkedAndPassedOver(t *testing.T) {
	startStandIn(t)
	startOperatorWith(t, "1.0.0", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		r.Presence = &Presence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: claimsNamespace,
			Version: "1.0.0", Every: time.Second}
		if err := mgr.Add(r.Presence); err != nil {
			t.Fatal(err)
		}
		ro := &EvaRolloutReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(recorderName("1.0.0")), Presence: r.Presence}
		if err := ro.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	ns := newTestNamespace(t)
	served := newTenant(ns, "SERVED", evav1.TierStarter)
	served.Annotations = map[string]string{tenant.AnnotationOperatorVersion: "1.0.0"}
	createTenant(t, served)
	gone := newTenant(ns, "GONEAA", evav1.TierStarter)
	gone.Annotations = map[string]string{tenant.AnnotationOperatorVersion: "9.9.9"}
	createTenant(t, gone)
	// The last status its operator (9.9.9, stopped since) wrote: Active and Ready.
	got := getTenant(t, gone)
	got.Status.Phase, got.Status.ObservedGeneration = evav1.PhaseActive, got.Generation
	apimeta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: evav1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: status.ReasonReady, Message: "ready", ObservedGeneration: got.Generation})
	if err := k8s.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "GONEAA marked Unserved", func() error {
		c := apimeta.FindStatusCondition(getTenant(t, gone).Status.Conditions, evav1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != status.ReasonUnserved || !strings.Contains(c.Message, `"9.9.9"`) {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	var lease coordinationv1.Lease
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: claimsNamespace, Name: PresenceLeaseName("1.0.0")}, &lease); err != nil ||
		lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "1.0.0" {
		t.Fatalf("the running operator's presence Lease: %v %+v", err, lease.Spec)
	}

	ro := &evav1.EvaRollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm-next"},
		Spec: evav1.EvaRolloutSpec{Versions: map[string]evav1.ModuleVersion{"crm": "9.9.9"}, Waves: []evav1.RolloutWave{{Wave: 2}}}}
	if err := k8s.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "the rollout complete without GONEAA", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: ro.Name}, ro); err != nil {
			return err
		}
		if ro.Status.Phase != evav1.RolloutComplete || ro.Status.Updated != 1 || len(ro.Status.Waves) != 1 {
			return fmt.Errorf("%s, updated %d: %s", ro.Status.Phase, ro.Status.Updated, ro.Status.Message)
		}
		w := ro.Status.Waves[0]
		if len(w.Skipped) != 1 || w.Skipped[0].Code != "GONEAA" || !strings.HasPrefix(w.Skipped[0].Reason, "unserved: no running operator serves") {
			return fmt.Errorf("skipped %+v", w.Skipped)
		}
		return nil
	})
}
