package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// cellIdentity is the fleet cluster's identity of a cell's operator, as the chart's
// cellIdentities value creates it.
func cellIdentity(cell string) string {
	return "system:serviceaccount:" + claimsNamespace + ":eva-cell-" + cell
}

// overGrant grants the ServiceAccount sa of the claims namespace every right on Leases
// there, beyond what eva-cell-claims grants.
func overGrant(t testing.TB, sa string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "fence-overgrant", Namespace: claimsNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fence-overgrant-" + sa, Namespace: claimsNamespace},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: claimsNamespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, binding) })
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
// rights eva-cell grants and Lease rights beyond them: it reports on the tenants placed
// on us-1 (as their source) or moving to it (as their target, its own report only), and
// reaches nothing else. Another cell's tenant, a tenant's spec, placement or metadata,
// the move's plan, the other side's report, claims and Leases, a namespace, a Secret:
// each is refused by the API server (eva-cell-fence, or RBAC). Every write is a dry run.
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
	toUS := placed("FENCTO", "eu-1", &evav1.Move{From: "eu-1", To: "us-1", Step: evav1.MoveProvisioningTarget, StartedAt: metav1.Now()})
	fromUS := placed("FENCFR", "us-1", &evav1.Move{From: "us-1", To: "eu-1", Step: evav1.MoveProvisioningTarget, StartedAt: metav1.Now()})
	us := impersonate(t, cellIdentity("us-1"), "system:serviceaccounts", "system:serviceaccounts:"+claimsNamespace, "system:authenticated")
	// Whatever RBAC grants a cell beyond eva-cell, the fence holds: here, Leases.
	overGrant(t, "eva-cell-us-1")

	// edit re-reads the tenant and writes change (of its status when status is true) as us-1.
	edit := func(tn *evav1.EvaTenant, status bool, change func(*evav1.EvaTenant)) error {
		var cur evav1.EvaTenant
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), &cur); err != nil {
			t.Fatal(err)
		}
		base := cur.DeepCopy()
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		change(&cur)
		if status {
			return us.Status().Patch(ctx, &cur, client.MergeFrom(base), client.DryRunAll)
		}
		return us.Patch(ctx, &cur, client.MergeFrom(base), client.DryRunAll)
	}
	// The policy takes effect a moment after it is created.
	eventually(t, waitFor, "eva-cell-fence enforced", func() error {
		if err := edit(onEU, true, func(tn *evav1.EvaTenant) { tn.Status.Phase = evav1.PhaseFailed }); !fenced(err) {
			return fmt.Errorf("cell us-1 wrote the status of a tenant on eu-1: %v", err)
		}
		return nil
	})
	lease := func(name string, labels map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: claimsNamespace, Labels: labels}}
	}
	claimLabel := map[string]string{tenant.LabelCapsule: "FENCEU"}
	if err := k8s.Create(ctx, lease("capsule-fenceu", claimLabel)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, lease("fence-leader", nil)); err != nil {
		t.Fatal(err)
	}

	allowed := map[string]error{
		"report on its own tenant": edit(onUS, true, func(tn *evav1.EvaTenant) { tn.Status.Revision = "main@sha1:0123" }),
		"add Eva's finalizer, its version and wave to its own tenant": edit(onUS, false, func(tn *evav1.EvaTenant) {
			tn.Finalizers = append(tn.Finalizers, tenant.Finalizer)
			tn.Annotations = map[string]string{tenant.AnnotationOperatorVersion: "1.0.0"}
			tn.Labels[tenant.LabelWave] = "3"
		}),
		"report as a move's target": edit(toUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move.TargetPhase, tn.Status.Move.TargetMessage = evav1.PhaseProvisioning, "provisioning"
			tn.Status.Move.TargetPublished = &evav1.Publication{Revision: "main@sha1:0123"}
		}),
		"report as a move's source": edit(fromUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move.SourceMessage, tn.Status.DecommissionStep = "draining", evav1.StepTrafficRemoved
		}),
	}
	for what, err := range allowed {
		if err != nil {
			t.Errorf("cell us-1 may %s: %v", what, err)
		}
	}

	now := metav1.Now()
	refused := map[string]error{
		"write the status of a tenant on eu-1":     edit(onEU, true, func(tn *evav1.EvaTenant) { tn.Status.Revision = "forged" }),
		"remove the finalizer of a tenant on eu-1": edit(onEU, false, func(tn *evav1.EvaTenant) { tn.Finalizers = nil }),
		"label a tenant on eu-1 for itself": edit(onEU, false, func(tn *evav1.EvaTenant) {
			tn.Labels[tenant.CellLabel("us-1")] = ""
		}),
		"change its own tenant's spec":   edit(onUS, false, func(tn *evav1.EvaTenant) { tn.Spec.Tier = evav1.TierEnterprise }),
		"place its own tenant elsewhere": edit(onUS, true, func(tn *evav1.EvaTenant) { tn.Status.Cell = "eu-1" }),
		"start a move": edit(onUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move = &evav1.Move{From: "us-1", To: "eu-1", Step: evav1.MoveProvisioningTarget, StartedAt: metav1.Now()}
		}),
		"take a move to its next step": edit(toUS, true, func(tn *evav1.EvaTenant) { tn.Status.Move.Step = evav1.MoveRemovingSource }),
		"cancel a move":                edit(toUS, true, func(tn *evav1.EvaTenant) { tn.Status.Move.Cancelled = true }),
		"as the target, report the source removed": edit(toUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move.SourceRemovedAt, tn.Status.Move.TrafficMovedAt = &now, &now
		}),
		"as the target, write the tenant's record": edit(toUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.DecommissionStep = evav1.StepRemoved
		}),
		"as the target, claim the tenant for an operator version": edit(toUS, false, func(tn *evav1.EvaTenant) {
			tn.Annotations = map[string]string{tenant.AnnotationOperatorVersion: "bogus"}
		}),
		"as the source, report the target's copy removed": edit(fromUS, true, func(tn *evav1.EvaTenant) {
			tn.Status.Move.TargetRemovedAt, tn.Status.Move.TargetPhase = &now, evav1.PhaseActive
		}),
		"give its own tenant an owner": edit(onUS, false, func(tn *evav1.EvaTenant) {
			tn.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "0000"}}
		}),
		"add another finalizer": edit(onUS, false, func(tn *evav1.EvaTenant) {
			tn.Finalizers = append(tn.Finalizers, "example.com/hold")
		}),
		"label its own tenant": edit(onUS, false, func(tn *evav1.EvaTenant) { tn.Labels["eva.aidonow.com/shard"] = "b" }),
		// The Lease rights just granted take a moment to reach the authorizer.
		"record an event about a Secret": us.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "fence", Namespace: ns},
			EventTime: metav1.NowMicro(), Reason: "Forged", Action: "Forged", ReportingController: "eva-operator", ReportingInstance: "x",
			Type: corev1.EventTypeNormal, Regarding: corev1.ObjectReference{Kind: "Secret", Namespace: ns, Name: "db"}}, client.DryRunAll),
		"claim a capsule code": untilFenced(waitFor, func() error {
			return us.Create(ctx, lease("capsule-fencex", claimLabel), client.DryRunAll)
		}),
		"release another cell's claim": untilFenced(waitFor, func() error {
			return us.Delete(ctx, lease("capsule-fenceu", nil), client.DryRunAll)
		}),
		"take a leader election Lease": untilFenced(waitFor, func() error {
			return us.Patch(ctx, lease("fence-leader", nil),
				client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"eva.aidonow.com/capsule":"X"}}}`)), client.DryRunAll)
		}),
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

// TestCellFenceCoversEveryStatusField: eva-cell-fence lists the status fields each side
// of a move may write one by one, so a field added to the API without a rule there
// would be the target's to forge. Every field of EvaTenantStatus and Move is named.
func TestCellFenceCoversEveryStatusField(t *testing.T) {
	policy, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "base", "rbac", "cell_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for prefix, typ := range map[string]reflect.Type{
		"object.?status.?":       reflect.TypeFor[evav1.EvaTenantStatus](),
		"object.?status.?move.?": reflect.TypeFor[evav1.Move](),
	} {
		for field := range typ.Fields() {
			name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
			if name == "move" {
				continue // its fields are checked one by one
			}
			// The whole name: "to" must not pass for "targetPhase".
			if !regexp.MustCompile(regexp.QuoteMeta(prefix+name) + `\b`).Match(policy) {
				t.Errorf("eva-cell-fence does not name %s%s: who of the cells may write it?", prefix, name)
			}
		}
	}
}
