package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// TestOperatorsSplitByNamespace: operators that accept tenants from different namespaces
// (--tenant-namespaces) share a cluster. A tenant that its own operator serves draws no
// NamespaceNotAllowed warning from an operator started after it for other namespaces;
// a tenant in a namespace no operator accepts draws one from each.
func TestOperatorsSplitByNamespace(t *testing.T) {
	served, unserved := newTestNamespace(t), newTestNamespace(t)
	withNamespaces := func(recorder string, accepted ...string) func(*EvaTenantReconciler, ctrl.Manager) {
		return func(r *EvaTenantReconciler, mgr ctrl.Manager) {
			r.TenantNamespaces = accepted
			r.Recorder = mgr.GetEventRecorder(recorder)
		}
	}
	startOperatorWith(t, "", withNamespaces("eva-ns-served", served))
	taken := newTenant(served, "NSSERV", evav1.TierStarter)
	createTenant(t, taken)
	eventually(t, waitFor, "the served tenant taken up", func() error {
		if got := getTenant(t, taken); len(got.Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})

	// An operator for another namespace starts and lists every tenant.
	startOperatorWith(t, "", withNamespaces("eva-ns-other", "eva-elsewhere"))
	stray := newTenant(unserved, "NSNONE", evav1.TierStarter)
	createTenant(t, stray)
	eventually(t, waitFor, "each operator warns about the tenant no operator accepts", func() error {
		if got := notAllowedReporters(t, stray); len(got) != 2 {
			return fmt.Errorf("NamespaceNotAllowed reported by %v", got)
		}
		return nil
	})
	consistently(t, "no warning about the served tenant", func() error {
		if got := notAllowedReporters(t, taken); len(got) != 0 {
			return fmt.Errorf("NamespaceNotAllowed reported by %v", got)
		}
		return nil
	})
	if got := getTenant(t, stray); len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("a tenant no operator accepts was processed: finalizers %v, conditions %v", got.Finalizers, got.Status.Conditions)
	}
	if got := getTenant(t, taken); !slices.Contains(got.Finalizers, tenant.Finalizer) {
		t.Errorf("the served tenant lost its finalizer: %v", got.Finalizers)
	}
}

// notAllowedReporters lists the controllers that warned the tenant is in a namespace
// they do not accept.
func notAllowedReporters(t *testing.T, tn *evav1.EvaTenant) map[string]bool {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(tn.Namespace)); err != nil {
		t.Fatal(err)
	}
	by := map[string]bool{}
	for _, e := range list.Items {
		if e.Regarding.Name == tn.Name && e.Reason == status.ReasonNamespaceNotAllowed && e.Type == corev1.EventTypeWarning {
			by[e.ReportingController] = true
		}
	}
	return by
}
