package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// reporters lists which operators recorded events about a tenant.
func reporters(t *testing.T, tn *evav1.EvaTenant) map[string]bool {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range list.Items {
		if e.Regarding.Name == tn.Name && e.Regarding.Namespace == tn.Namespace {
			out[e.ReportingController] = true
		}
	}
	return out
}

func TestBlueGreenOwnership(t *testing.T) {
	blue := startOperator(t, "1.0.0")
	green := startOperator(t, "2.0.0")
	ns := newTestNamespace(t)
	annotated := func(code, version string) *evav1.EvaTenant {
		tn := newTenant(ns, code, evav1.TierStarter)
		tn.Annotations = map[string]string{tenant.AnnotationOperatorVersion: version}
		return tn
	}
	blueTenant := annotated("BLUEAA", "1.0.0")
	greenTenant := annotated("GREENA", "2.0.0")
	reserved := newTenant(ns, "RESERV", evav1.TierStarter) // unannotated, spec names green
	reserved.Spec.OperatorVersion = "2.0.0"
	foreign := annotated("FOREIG", "3.0.0") // nobody running owns it
	for _, tn := range []*evav1.EvaTenant{blueTenant, greenTenant, reserved, foreign} {
		createTenant(t, tn)
	}
	for tn, owner := range map[*evav1.EvaTenant]string{blueTenant: "1.0.0", greenTenant: "2.0.0", reserved: "2.0.0"} {
		eventually(t, waitFor, tn.Spec.CapsuleCode+" provisioned by "+owner, func() error {
			got := getTenant(t, tn)
			if got.Annotations[tenant.AnnotationOperatorVersion] != owner {
				return fmt.Errorf("annotation %q", got.Annotations[tenant.AnnotationOperatorVersion])
			}
			if got.Status.Phase != evav1.PhaseProvisioning {
				return fmt.Errorf("phase %q", got.Status.Phase)
			}
			r := reporters(t, got)
			if !r[recorderName(owner)] || len(r) != 1 {
				return fmt.Errorf("events reported by %v", r)
			}
			return nil
		})
	}
	consistently(t, "a tenant of a version nobody runs is left alone", func() error {
		got := getTenant(t, foreign)
		if got.Status.Phase != "" || len(got.Finalizers) != 0 || len(reporters(t, got)) != 0 {
			return fmt.Errorf("touched: phase %q finalizers %v", got.Status.Phase, got.Finalizers)
		}
		return nil
	})
	blue.stop()
	green.stop()

	// An operator without a version processes only unannotated tenants, and leaves them
	// unannotated.
	startOperator(t, "")
	plain := newTenant(ns, "PLAINA", evav1.TierStarter)
	createTenant(t, plain)
	got := waitPhase(t, plain, evav1.PhaseProvisioning)
	if v, ok := got.Annotations[tenant.AnnotationOperatorVersion]; ok {
		t.Errorf("an unversioned operator annotated the tenant with %q", v)
	}
	before := getTenant(t, blueTenant).ResourceVersion
	consistently(t, "annotated tenants are not touched by an unversioned operator", func() error {
		if getTenant(t, blueTenant).ResourceVersion != before {
			return fmt.Errorf("BLUEAA was rewritten")
		}
		return nil
	})
	var nsList corev1.NamespaceList
	_ = k8s.List(context.Background(), &nsList)
	for _, n := range nsList.Items {
		if n.Name == tenant.Namespace("FOREIG") {
			t.Error("a tenant nobody owns got a namespace")
		}
	}
	_ = metav1.Now
}
