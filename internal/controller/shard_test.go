package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// TestShardsSplitTheTenants: two operators, each started for one shard, reconcile only
// the tenants of their shard (every event about a tenant comes from its shard's
// operator, every object rendered for it carries its shard label), a tenant of no shard
// is left to an operator that holds the unlabelled ones, and a tenant moved to the
// other shard is taken over by that shard's operator (its objects relabelled, still
// Active) while the first operator writes nothing more to it.
func TestShardsSplitTheTenants(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	startStandIn(t)
	logs := map[string]*writeLog{"a": {ns: tenant.Namespace("SHARDB")}, "b": {ns: tenant.Namespace("SHARDB")}}
	for _, name := range []string{"a", "b"} {
		sel, err := shard.Parse(shard.Label + "=ctl-" + name)
		if err != nil {
			t.Fatal(err)
		}
		startShardOperator(t, "", sel, func(r *EvaTenantReconciler, mgr ctrl.Manager) {
			r.Recorder = mgr.GetEventRecorder("eva-shard-" + name)
			r.Client = recordingClient{r.Client, logs[name]}
		})
	}
	inShard := func(s string) tenantOpt {
		return func(tn *evav1.EvaTenant) { tn.Labels = map[string]string{shard.Label: s} }
	}
	ta := newTenant(ns, "SHARDA", evav1.TierStarter, inShard("ctl-a"))
	tb := newTenant(ns, "SHARDB", evav1.TierStarter, inShard("ctl-b"))
	tc := newTenant(ns, "SHARDC", evav1.TierStarter)
	for _, tn := range []*evav1.EvaTenant{ta, tb, tc} {
		createTenant(t, tn)
	}
	gotA, gotB := waitPhase(t, ta, evav1.PhaseActive), waitPhase(t, tb, evav1.PhaseActive)
	assertShardLabels(t, gotA, "ctl-a")
	assertShardLabels(t, gotB, "ctl-b")
	assertReportedBy(t, ta, "eva-shard-a")
	assertReportedBy(t, tb, "eva-shard-b")
	consistently(t, "the tenant of no shard left alone", func() error {
		if got := getTenant(t, tc); len(got.Finalizers) > 0 || got.Status.Phase != "" {
			return fmt.Errorf("reconciled: finalizers %v, phase %q", got.Finalizers, got.Status.Phase)
		}
		return nil
	})

	// The unlabelled tenant goes to an operator for the tenants of no shard.
	unsharded, err := shard.Parse("!" + shard.Label)
	if err != nil {
		t.Fatal(err)
	}
	startShardOperator(t, "", unsharded, func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		r.Recorder = mgr.GetEventRecorder("eva-shard-none")
	})
	waitPhase(t, tc, evav1.PhaseActive)
	assertReportedBy(t, tc, "eva-shard-none")

	// SHARDB moves to shard a.
	bWrites := len(logs["b"].list())
	cur := getTenant(t, tb)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Labels[shard.Label] = "ctl-a"
	if err := k8s.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "SHARDB's objects relabelled by shard a", func() error {
		var nsObj corev1.Namespace
		if err := k8s.Get(ctx, types.NamespacedName{Name: tenant.Namespace("SHARDB")}, &nsObj); err != nil {
			return err
		}
		if got := nsObj.Labels[shard.Label]; got != "ctl-a" {
			return fmt.Errorf("namespace shard label %q", got)
		}
		return nil
	})
	// The workloads follow the foundation in a later pass: Active alone (which the
	// tenant still was before the move) does not say they were applied again.
	eventually(t, time.Minute, "every object of SHARDB relabelled by shard a", func() error {
		moved := getTenant(t, tb)
		if moved.Status.Phase != evav1.PhaseActive {
			return fmt.Errorf("phase %s", moved.Status.Phase)
		}
		return shardLabelMismatch(t, moved, "ctl-a")
	})
	if len(logs["a"].list()) == 0 {
		t.Error("shard a's operator wrote nothing to the tenant it took over")
	}
	consistently(t, "shard b's operator lets the moved tenant go", func() error {
		if w := logs["b"].list(); len(w) != bWrites {
			return fmt.Errorf("shard b wrote %v after the move", w[bWrites:])
		}
		return nil
	})
}

// assertShardLabels checks every object of a tenant's inventory carries the shard label.
func assertShardLabels(t *testing.T, tn *evav1.EvaTenant, want string) {
	t.Helper()
	if err := shardLabelMismatch(t, tn, want); err != nil {
		t.Error(err)
	}
}

// shardLabelMismatch names the objects of a tenant's inventory that do not carry the
// shard label want.
func shardLabelMismatch(t *testing.T, tn *evav1.EvaTenant, want string) error {
	t.Helper()
	if len(tn.Status.Inventory) == 0 {
		return fmt.Errorf("%s has no inventory", tn.Name)
	}
	var wrong []error
	for _, ref := range tn.Status.Inventory {
		u := refObject(t, ref)
		if got := u.GetLabels()[shard.Label]; got != want {
			wrong = append(wrong, fmt.Errorf("%s %s/%s of %s: shard label %q, want %q", ref.Kind, ref.Namespace, ref.Name, tn.Name, got, want))
		}
	}
	return errors.Join(wrong...)
}

// assertReportedBy checks every event about a tenant was recorded by one operator.
func assertReportedBy(t *testing.T, tn *evav1.EvaTenant, controller string) {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(tn.Namespace)); err != nil {
		t.Fatal(err)
	}
	var by []string
	for _, e := range list.Items {
		if e.Regarding.Name == tn.Name && !slices.Contains(by, e.ReportingController) {
			by = append(by, e.ReportingController)
		}
	}
	if !slices.Equal(by, []string{controller}) {
		t.Errorf("events about %s reported by %v, want only %s", tn.Name, by, controller)
	}
}

// refObject reads an inventory entry's object from the API server.
func refObject(t *testing.T, ref evav1.ObjectRef) *unstructured.Unstructured {
	t.Helper()
	u := objectOf(ref)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatalf("%s %s/%s: %v", ref.Kind, ref.Namespace, ref.Name, err)
	}
	return u
}
