package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

func exists(t *testing.T, obj client.Object, ns, name string) bool {
	t.Helper()
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil && obj.GetDeletionTimestamp() == nil
}

func setSpec(t *testing.T, tn *evav1.EvaTenant, mutate func(*evav1.EvaTenantSpec)) error {
	t.Helper()
	cur := getTenant(t, tn)
	mutate(&cur.Spec)
	return k8s.Update(context.Background(), cur)
}

func TestDecommissionSaga(t *testing.T) {
	startOperator(t, "")
	ns := newTestNamespace(t)
	code := "DECOMM"
	modules := []string{"crm", "itsm"}
	tn := newTenant(ns, code, evav1.TierStarter)
	tn.Spec.DeletionProtection = true
	createTenant(t, tn)
	startStandIn(t)
	waitPhase(t, tn, evav1.PhaseActive)
	holdUninstall(t, code, modules)
	tns := tenant.Namespace(code)

	// Protected: refused, with a condition and an event, and nothing deleted.
	if err := setSpec(t, tn, func(s *evav1.EvaTenantSpec) { s.Lifecycle = evav1.LifecycleDecommissioned }); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "refusal", func() error {
		got := getTenant(t, tn)
		if c := condition(got, evav1.ConditionReady); c.Reason != status.ReasonDeletionProtected {
			return fmt.Errorf("Ready reason %q", c.Reason)
		}
		// One story: refused is Failed and Stalled, never Active beside Stalled.
		if c := condition(got, evav1.ConditionStalled); got.Status.Phase != evav1.PhaseFailed || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %s with Stalled %s", got.Status.Phase, c.Status)
		}
		if !slices.Contains(eventReasons(t, tn), "DeprovisionRefused") {
			return errNot("DeprovisionRefused event")
		}
		return nil
	})
	if !exists(t, &nackv1beta2.Stream{}, tns, "eva-decomm-events") || !exists(t, &helmv2.HelmRelease{}, tns, "crm") {
		t.Fatal("a protected tenant lost objects")
	}
	// Lifecycle cannot go back.
	if err := setSpec(t, tn, func(s *evav1.EvaTenantSpec) { s.Lifecycle = evav1.LifecycleActive }); err == nil {
		t.Fatal("Decommissioned → Active accepted")
	}

	// Unprotected: streams and rules go, releases are deleted, and the namespace waits
	// for them.
	if err := setSpec(t, tn, func(s *evav1.EvaTenantSpec) { s.DeletionProtection = false }); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "steps 1-3 before the namespace", func() error {
		got := getTenant(t, tn)
		if got.Status.Phase != evav1.PhaseDecommissioning {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		if exists(t, &nackv1beta2.Stream{}, tns, "eva-decomm-events") || exists(t, &nackv1beta2.Stream{}, tns, "eva-decomm-commands") {
			return errNot("streams deleted")
		}
		if exists(t, &monitoringv1.PrometheusRule{}, tns, render.AlertRulesName(code)) {
			return errNot("alert rules deleted")
		}
		if exists(t, &helmv2.HelmRelease{}, tns, "crm") {
			return errNot("releases marked for deletion")
		}
		return nil
	})
	consistently(t, "namespace kept while releases uninstall", func() error {
		if !exists(t, &corev1.Namespace{}, "", tns) {
			return fmt.Errorf("namespace deleted before the releases were gone")
		}
		return nil
	})

	finishUninstall(t, code, modules)
	got := waitPhase(t, tn, evav1.PhaseDecommissioned)
	if s := kstatusOf(t, got); s != kstatus.CurrentStatus {
		t.Errorf("kstatus of the decommissioned tenant: %s, want Current (done, not in progress)", s)
	}
	if exists(t, &corev1.Namespace{}, "", tns) {
		t.Error("namespace not deleted")
	}
	// Events reach the API server a moment after the status that explains them.
	eventually(t, waitFor, "saga events", func() error {
		if reasons := eventReasons(t, got); !slices.Contains(reasons, "DeprovisionStarted") || !slices.Contains(reasons, "DeprovisionComplete") {
			return fmt.Errorf("events: %v", reasons)
		}
		return nil
	})
	if !slices.Contains(got.Finalizers, tenant.Finalizer) {
		t.Error("the finalizer went before the tenant was deleted")
	}

	// Protection set again on a tenant already gone protects nothing: it stays
	// Decommissioned, with no refusal, and deleting it still lets it go.
	refusals := countOf(eventReasons(t, got), "DeprovisionRefused")
	if err := setSpec(t, tn, func(s *evav1.EvaTenantSpec) { s.DeletionProtection = true }); err != nil {
		t.Fatal(err)
	}
	consistently(t, "still Decommissioned", func() error {
		if phase := getTenant(t, tn).Status.Phase; phase != evav1.PhaseDecommissioned {
			return fmt.Errorf("phase %s", phase)
		}
		if n := countOf(eventReasons(t, got), "DeprovisionRefused"); n != refusals {
			return fmt.Errorf("%d more DeprovisionRefused event(s)", n-refusals)
		}
		return nil
	})
	got = getTenant(t, tn)

	// Deleting the decommissioned tenant removes the finalizer and the object.
	if err := k8s.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "tenant gone", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: tn.Name}, &evav1.EvaTenant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errNot("deleted")
	})
}

func TestDeletingActiveTenantRunsSaga(t *testing.T) {
	startOperator(t, "")
	ns := newTestNamespace(t)
	tn := newTenant(ns, "DELETE", evav1.TierStarter)
	createTenant(t, tn)
	startStandIn(t)
	waitPhase(t, tn, evav1.PhaseActive)
	if err := k8s.Delete(context.Background(), getTenant(t, tn)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "tenant gone after the saga", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: tn.Name}, &evav1.EvaTenant{})
		if !apierrors.IsNotFound(err) {
			return errNot("deleted")
		}
		if exists(t, &corev1.Namespace{}, "", tenant.Namespace("DELETE")) {
			return errNot("namespace deleted")
		}
		return nil
	})
}

// countOf counts the items equal to v.
func countOf(items []string, v string) int {
	n := 0
	for _, i := range items {
		if i == v {
			n++
		}
	}
	return n
}
