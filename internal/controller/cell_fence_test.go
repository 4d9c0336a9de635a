package controller

import (
	"context"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// cellIdentity is the fleet cluster's identity of a cell's operator, as the chart's
// cellIdentities value creates it.
func cellIdentity(cell string) string {
	return "system:serviceaccount:" + claimsNamespace + ":eva-cell-" + cell
}

// bindCellIdentity binds a cell's identity to eva-cell and eva-cell-claims on the
// suite's API server, as the chart's cellIdentities value does.
func bindCellIdentity(t testing.TB, c client.Client, cell string) {
	t.Helper()
	ctx := context.Background()
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "eva-cell-" + cell, Namespace: claimsNamespace}}
	for _, b := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "eva-cell-" + cell}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-cell"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "eva-cell-" + cell, Namespace: claimsNamespace}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "eva-cell-claims"}},
	} {
		if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// TestCellIdentityIsFenced acts as cell us-1's operator on the fleet cluster, with the
// rights eva-cell grants: it reports on the tenants placed on or moving to us-1, and
// reaches nothing else. Another cell's tenant, a tenant's spec or placement, the move's
// plan, a Lease that is not a claim, a namespace, a Secret: each is refused by the API
// server (eva-cell-fence, or RBAC).
func TestCellIdentityIsFenced(t *testing.T) {
	applyOperatorBase(t)
	bindCellIdentity(t, k8s, "us-1")
	ctx := context.Background()
	ns := newTestNamespace(t)
	placed := func(code, cell string, move *evav1.Move) *evav1.EvaTenant {
		tn := newTenant(ns, code, evav1.TierStarter)
		createTenant(t, tn)
		tn.Status = evav1.EvaTenantStatus{Cell: cell, Move: move, Phase: evav1.PhaseActive}
		if err := k8s.Status().Update(ctx, tn); err != nil { // as an administrator
			t.Fatal(err)
		}
		return tn
	}
	onEU := placed("FENCEU", "eu-1", nil)
	onUS := placed("FENCUS", "us-1", nil)
	moving := placed("FENCMV", "eu-1", &evav1.Move{From: "eu-1", To: "us-1", Step: evav1.MoveProvisioningTarget, StartedAt: metav1.Now()})
	us := impersonate(t, cellIdentity("us-1"), "system:serviceaccounts", "system:serviceaccounts:"+claimsNamespace, "system:authenticated")

	// edit re-reads the tenant and writes change (of its status when status is true) as us-1.
	edit := func(tn *evav1.EvaTenant, status bool, change func(*evav1.EvaTenant)) error {
		var cur evav1.EvaTenant
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), &cur); err != nil {
			t.Fatal(err)
		}
		base := cur.DeepCopy()
		change(&cur)
		if status {
			return us.Status().Patch(ctx, &cur, client.MergeFrom(base))
		}
		return us.Patch(ctx, &cur, client.MergeFrom(base))
	}
	// The policy takes effect a moment after it is created.
	eventually(t, waitFor, "eva-cell-fence enforced", func() error {
		if err := edit(onEU, true, func(tn *evav1.EvaTenant) { tn.Status.Phase = evav1.PhaseFailed }); !fenced(err) {
			return fmt.Errorf("cell us-1 wrote the status of a tenant on eu-1: %v", err)
		}
		return nil
	})

	allowed := map[string]error{
		"report on its own tenant": edit(onUS, true, func(tn *evav1.EvaTenant) { tn.Status.Revision = "main@sha1:0123" }),
		"add Eva's finalizer to its own tenant": edit(onUS, false, func(tn *evav1.EvaTenant) {
			tn.Finalizers = append(tn.Finalizers, tenant.Finalizer)
		}),
		"report as a move's target": edit(moving, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move.TargetPhase, tn.Status.Move.TargetMessage = evav1.PhaseProvisioning, "provisioning"
		}),
		"claim a capsule code": us.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "fence-claim",
			Namespace: claimsNamespace, Labels: map[string]string{tenant.LabelCapsule: "FENCUS"}}}, client.DryRunAll),
	}
	for what, err := range allowed {
		if err != nil {
			t.Errorf("cell us-1 may %s: %v", what, err)
		}
	}

	refused := map[string]error{
		"write the status of a tenant on eu-1":     edit(onEU, true, func(tn *evav1.EvaTenant) { tn.Status.Revision = "forged" }),
		"remove the finalizer of a tenant on eu-1": edit(onEU, false, func(tn *evav1.EvaTenant) { tn.Finalizers = nil }),
		"label a tenant on eu-1 for itself": edit(onEU, false, func(tn *evav1.EvaTenant) {
			tn.Labels = map[string]string{tenant.CellLabel("us-1"): ""}
		}),
		"change its own tenant's spec":   edit(onUS, false, func(tn *evav1.EvaTenant) { tn.Spec.Tier = evav1.TierEnterprise }),
		"place its own tenant elsewhere": edit(onUS, true, func(tn *evav1.EvaTenant) { tn.Status.Cell = "eu-1" }),
		"start a move": edit(onUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move = &evav1.Move{From: "us-1", To: "eu-1", Step: evav1.MoveProvisioningTarget, StartedAt: metav1.Now()}
		}),
		"take a move to its next step": edit(moving, true, func(tn *evav1.EvaTenant) { tn.Status.Move.Step = evav1.MoveRemovingSource }),
		"cancel a move":                edit(moving, true, func(tn *evav1.EvaTenant) { tn.Status.Move.Cancelled = true }),
		"write a Lease that is not a claim": us.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: "eva-fleet.eva.aidonow.com", Namespace: claimsNamespace}}, client.DryRunAll),
	}
	for what, err := range refused {
		if !fenced(err) {
			t.Errorf("cell us-1 may not %s; eva-cell-fence answered %v", what, err)
		}
	}
	// What eva-cell does not grant at all.
	for what, err := range map[string]error{
		"create a namespace": us.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eva-tenant-fenced"}}, client.DryRunAll),
		"read a Secret":      us.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: "any"}, &corev1.Secret{}),
		"delete a tenant":    us.Delete(ctx, onUS.DeepCopy(), client.DryRunAll),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("cell us-1 may not %s; RBAC answered %v", what, err)
		}
	}
}
