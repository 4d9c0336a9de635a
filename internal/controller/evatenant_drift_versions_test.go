package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
	"github.com/aidonow/eva/internal/tenant"
)

// TestDriftOfObjectsCachedAsVersions: the kinds whose cache keeps only names and
// versions (versionOnlyKinds) are checked against the API server once their version
// moved. With the operator's memo of its own applies in place (no restart), a
// RoleBinding deleted and re-created by hand under its name and labels with another
// subject, a NetworkPolicy stripped of the capsule label (so it leaves the cache) and an
// alert rule rewritten are each re-applied at the next drift check and hold the bundle
// again; nothing else is written.
func TestDriftOfObjectsCachedAsVersions(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	tenantNS := tenant.Namespace("VERSNS")
	log := &writeLog{ns: tenantNS}
	clock := &testClock{}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.Client = recordingClient{r.Client, log}
		r.Now = clock.now
	})
	tn := newTenant(ns, "VERSNS", evav1.TierStarter)
	createTenant(t, tn)
	startStandIn(t)
	got := waitPhase(t, tn, evav1.PhaseActive)
	before := log.list()

	var rb rbacv1.RoleBinding
	if err := k8s.Get(ctx, refKey(t, got, "RoleBinding"), &rb); err != nil {
		t.Fatal(err)
	}
	wantSubjects := rb.Subjects
	forged := rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: rb.Namespace, Name: rb.Name, Labels: rb.Labels, Annotations: rb.Annotations},
		RoleRef:    rb.RoleRef,
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "intruder", Namespace: "elsewhere"}},
	}
	if err := k8s.Delete(ctx, &rb); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &forged, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(ctx, refKey(t, got, "NetworkPolicy"), np); err != nil {
		t.Fatal(err)
	}
	delete(np.Labels, tenant.LabelCapsule)
	if err := k8s.Update(ctx, np, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	var rule monitoringv1.PrometheusRule
	if err := k8s.Get(ctx, refKey(t, got, "PrometheusRule"), &rule); err != nil {
		t.Fatal(err)
	}
	wantExpr := rule.Spec.Groups[0].Rules[0].Expr
	rule.Spec.Groups[0].Rules[0].Expr = "vector(0)"
	if err := k8s.Update(ctx, &rule, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}

	clock.advance(ResyncActive + time.Minute)
	poke(t, tn, "1") // stands for the resync timer, which runs on the real clock
	want := []string{"patch NetworkPolicy " + np.Name, "patch PrometheusRule " + rule.Name, "patch RoleBinding " + rb.Name}
	eventually(t, time.Minute, "the drifted objects re-applied", func() error {
		if w := writtenSince(before, log.list()); !slices.Equal(w, want) {
			return fmt.Errorf("writes %v, want %v", w, want)
		}
		return nil
	})
	consistently(t, "nothing more written", func() error {
		if w := writtenSince(before, log.list()); len(w) != len(want) {
			return fmt.Errorf("writes %v", w)
		}
		return nil
	})
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: rb.Namespace, Name: rb.Name}, &rb); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(rb.Subjects, wantSubjects) {
		t.Errorf("RoleBinding subjects %v, want %v", rb.Subjects, wantSubjects)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: np.Namespace, Name: np.Name}, np); err != nil {
		t.Fatal(err)
	}
	if np.Labels[tenant.LabelCapsule] != got.Spec.CapsuleCode {
		t.Errorf("NetworkPolicy labels %v: the capsule label is not back", np.Labels)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: rule.Namespace, Name: rule.Name}, &rule); err != nil {
		t.Fatal(err)
	}
	if got := rule.Spec.Groups[0].Rules[0].Expr; got != wantExpr {
		t.Errorf("alert rule expr %q, want %q", got, wantExpr)
	}
}

// writtenSince returns the entries of the sorted write log now that are not in the
// earlier sorted log before, each entry of before matching one of now.
func writtenSince(before, now []string) []string {
	var out []string
	for _, w := range now {
		if i := slices.Index(before, w); i >= 0 {
			before = slices.Delete(slices.Clone(before), i, i+1)
			continue
		}
		out = append(out, w)
	}
	return out
}
