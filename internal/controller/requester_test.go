package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// Decisions never rest on what a requester can write (issue 32): a requester allowed to
// write EvaTenants and their status cannot forge the operator's records, and what the
// operator decides from the cluster tells a requester nothing of other teams' tenants.

// TestOnlyOperatorWritesStatusOrDropsFinalizer installs base/ and gives mallory every
// verb on evatenants and evatenants/status in her namespace (what an `evatenants/*` role
// grants): she may edit her tenant, but not write its status nor remove Eva's finalizer;
// the operator's service account may do both, and so may a cluster administrator
// (system:masters, the break-glass).
func TestOnlyOperatorWritesStatusOrDropsFinalizer(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	ns := newTestNamespace(t)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "evatenant-star-test"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{evav1.GroupVersion.Group}, Resources: []string{"evatenants", "evatenants/status"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evatenant-star"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	mallory := impersonate(t, "mallory", "tenant-editors", "system:authenticated")
	operator := asOperator(t)

	const other = "example.com/other"
	tn := newTenant(ns, "STGARD", evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Finalizers = []string{tenant.Finalizer, other} })
	createTenant(t, tn)

	forgePhase := func(c client.Client, opts ...client.SubResourcePatchOption) error {
		cur := getTenant(t, tn)
		base := cur.DeepCopy()
		cur.Status.Phase = evav1.PhaseDecommissioned
		return c.Status().Patch(ctx, cur, client.MergeFrom(base), opts...)
	}
	dropFinalizer := func(c client.Client, name string) error {
		cur := getTenant(t, tn)
		controllerutil.RemoveFinalizer(cur, name)
		return c.Update(ctx, cur)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mallory") || !strings.Contains(err.Error(), "eva-operator") {
			t.Errorf("mallory %s: want refused by the status guard, got %v", what, err)
		}
	}

	// The policy takes effect a moment after it is created.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := forgePhase(mallory, client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mallory's write of status.phase is not refused after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// What mallory may not do.
	refused("writes status.phase", forgePhase(mallory))
	refused("removes Eva's finalizer", dropFinalizer(mallory, tenant.Finalizer))
	// What she may: her own edits, and finalizers that are not Eva's.
	if err := dropFinalizer(mallory, other); err != nil {
		t.Errorf("mallory removes another finalizer: %v", err)
	}
	cur := getTenant(t, tn)
	cur.Spec.Wave = 3
	if err := mallory.Update(ctx, cur); err != nil {
		t.Errorf("mallory changes the wave: %v", err)
	}
	if got := getTenant(t, tn); got.Status.Phase == evav1.PhaseDecommissioned || !slices.Contains(got.Finalizers, tenant.Finalizer) {
		t.Errorf("after mallory's writes: phase %q, finalizers %v", got.Status.Phase, got.Finalizers)
	}

	// The operator writes both; a cluster administrator passes (break-glass).
	if err := forgePhase(k8s, client.DryRunAll); err != nil {
		t.Errorf("system:masters writes status: %v", err)
	}
	if err := forgePhase(operator); err != nil {
		t.Errorf("the operator writes status: %v", err)
	}
	if err := dropFinalizer(operator, tenant.Finalizer); err != nil {
		t.Errorf("the operator removes its finalizer: %v", err)
	}
}

// TestForgedDecommissionedPhaseDoesNotSkipTeardown: status.phase Decommissioned,
// written by someone other than the operator (here a cluster administrator, whom the
// status guard lets through), then a delete. The operator must still run the saga:
// the tenant goes only once its namespace, releases and streams are gone.
func TestForgedDecommissionedPhaseDoesNotSkipTeardown(t *testing.T) {
	ctx := context.Background()
	op := startOperator(t, "")
	ns := newTestNamespace(t)
	const code = "FORGED"
	tns := tenant.Namespace(code)
	tn := newTenant(ns, code, evav1.TierStarter)
	createTenant(t, tn)
	startStandIn(t)
	waitPhase(t, tn, evav1.PhaseActive)

	// The forgery lands while no operator looks, so nothing rewrites the phase first.
	op.stop()
	cur := getTenant(t, tn)
	base := cur.DeepCopy()
	cur.Status.Phase = evav1.PhaseDecommissioned
	if err := k8s.Status().Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, cur); err != nil {
		t.Fatal(err)
	}
	startOperator(t, "")

	eventually(t, waitFor, "tenant gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), &evav1.EvaTenant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	if exists(t, &corev1.Namespace{}, "", tns) {
		t.Errorf("Namespace %s left behind: the forged phase skipped the teardown", tns)
	}
	for _, module := range []string{"crm", "itsm"} {
		if exists(t, &helmv2.HelmRelease{}, tns, module) {
			t.Errorf("HelmRelease %s/%s left behind", tns, module)
		}
	}
	for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if exists(t, &nackv1beta2.Stream{}, tns, tenant.StreamObjectName(stream)) {
			t.Errorf("Stream %s left behind", stream)
		}
	}
}

// TestOrphanedClaimIsReported: a cluster administrator removes Eva's finalizer and
// deletes a tenant, so no saga runs and its code's claim stays. The next tenant given
// that code is told the claim is orphaned (its holder no longer exists), naming the
// Lease to delete once the leftovers are cleaned up, never the dead holder; once the
// Lease is deleted, the code is free again.
func TestOrphanedClaimIsReported(t *testing.T) {
	ctx := context.Background()
	startOperator(t, "")
	nsA, nsB := newTestNamespace(t), newTestNamespace(t)
	const code = "ORPHAN"
	lease := types.NamespacedName{Namespace: claimsNamespace, Name: claim.Name(code)}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: lease.Namespace, Name: lease.Name}})
	})

	gone := newTenant(nsA, code, evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Name = "rtaown" })
	createTenant(t, gone)
	eventually(t, waitFor, "the first tenant claims the code and applies its namespace", func() error {
		if err := k8s.Get(ctx, lease, &coordinationv1.Lease{}); err != nil {
			return err
		}
		var namespace corev1.Namespace
		if err := k8s.Get(ctx, types.NamespacedName{Name: tenant.Namespace(code)}, &namespace); err != nil {
			return err
		}
		return nil
	})
	gone = getTenant(t, gone)
	patch := client.MergeFrom(gone.DeepCopy())
	gone.Finalizers = nil
	if err := k8s.Patch(ctx, gone, patch); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "first tenant gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(gone), &evav1.EvaTenant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	next := newTenant(nsB, code, evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Name = "next" })
	createTenant(t, next)
	var msg string
	eventually(t, waitFor, "orphaned claim reported", func() error {
		c := condition(getTenant(t, next), evav1.ConditionStalled)
		msg = c.Message
		if c.Status != "True" || c.Reason != status.ReasonCapsuleCodeInUse || !strings.Contains(c.Message, "no longer exists") ||
			!strings.Contains(c.Message, lease.String()) {
			return fmt.Errorf("Stalled: %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	assertNamesNoOther(t, "condition", msg, gone)
	eventually(t, waitFor, "orphan event", func() error {
		for _, note := range eventNotes(t, next, status.ReasonCapsuleCodeInUse) {
			if strings.Contains(note, "no longer exists") {
				assertNamesNoOther(t, "event", note, gone)
				return nil
			}
		}
		return errNot("an event reporting the orphaned claim")
	})

	// The documented step: delete the Lease. The code is free; what the first tenant
	// left behind (its namespace) is reported next, still without naming it.
	if err := k8s.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: lease.Namespace, Name: lease.Name}}); err != nil {
		t.Fatal(err)
	}
	poke(t, next, "after-lease-deleted")
	eventually(t, waitFor, "code claimed by the next tenant", func() error {
		c := condition(getTenant(t, next), evav1.ConditionStalled)
		if c.Reason != status.ReasonNamespaceInUse {
			return fmt.Errorf("Stalled: %s %s %q", c.Status, c.Reason, c.Message)
		}
		msg = c.Message
		return nil
	})
	assertNamesNoOther(t, "NamespaceInUse condition", msg, gone)
}

// TestRefusalNamesNoTenantOfAnotherNamespace: a requester creating a tenant with a code
// that an EvaTenant of another namespace holds learns that the code is taken, not who
// holds it (namespace, name or UID), in the condition or in the event.
func TestRefusalNamesNoTenantOfAnotherNamespace(t *testing.T) {
	startOperator(t, "")
	nsA, nsB := newTestNamespace(t), newTestNamespace(t)
	const code = "HIDDEN"
	owner := newTenant(nsA, code, evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Name = "secret-project" })
	createTenant(t, owner)
	eventually(t, waitFor, "owner holds the code", func() error {
		if !slices.Contains(getTenant(t, owner).Finalizers, tenant.Finalizer) {
			return errNot("finalizer")
		}
		return nil
	})
	owner = getTenant(t, owner)

	prober := newTenant(nsB, code, evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Name = "prober" })
	createTenant(t, prober)
	var msg string
	eventually(t, waitFor, "prober refused", func() error {
		c := condition(getTenant(t, prober), evav1.ConditionStalled)
		msg = c.Message
		if c.Status != "True" || c.Reason != status.ReasonCapsuleCodeInUse {
			return fmt.Errorf("Stalled: %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if !strings.Contains(msg, code) || !strings.Contains(msg, "another namespace") {
		t.Errorf("refusal %q: want the code and that it is taken in another namespace", msg)
	}
	assertNamesNoOther(t, "condition", msg, owner)
	eventually(t, waitFor, "refusal event", func() error {
		notes := eventNotes(t, prober, status.ReasonCapsuleCodeInUse)
		if len(notes) == 0 {
			return errNot("CapsuleCodeInUse event")
		}
		for _, note := range notes {
			assertNamesNoOther(t, "event", note, owner)
		}
		return nil
	})
}

// assertNamesNoOther fails when text names other (its namespace, name or UID).
func assertNamesNoOther(t *testing.T, what, text string, other *evav1.EvaTenant) {
	t.Helper()
	for _, s := range []string{other.Namespace, other.Name, string(other.UID)} {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s %q names %q of EvaTenant %s/%s in another namespace", what, text, s, other.Namespace, other.Name)
		}
	}
}

// eventNotes lists the messages of the events with reason recorded about a tenant.
func eventNotes(t testing.TB, tn *evav1.EvaTenant, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(tn.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == tn.Name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestRefusal: the message of a tenant refused its code names the holder only in the
// tenant's own namespace, and an orphaned claim names the Lease and the step that frees
// the code.
func TestRefusal(t *testing.T) {
	tn := newTenant("team-a", "REFUSE", evav1.TierStarter)
	lease := types.NamespacedName{Namespace: "eva-system", Name: "capsule-refuse"}
	cases := map[string]struct {
		holder   claim.Owner
		orphaned bool
		want     []string
		never    []string
	}{
		"same namespace": {
			holder: claim.Owner{Namespace: "team-a", Name: "first", UID: "uid-1"},
			want:   []string{"REFUSE", "team-a/first", "uid-1"},
		},
		"another namespace": {
			holder: claim.Owner{Namespace: "team-b", Name: "hidden", UID: "uid-2"},
			want:   []string{"REFUSE", "taken", "another namespace"},
			never:  []string{"team-b", "hidden", "uid-2"},
		},
		"orphaned, another namespace": {
			holder: claim.Owner{Namespace: "team-b", Name: "hidden", UID: "uid-2"}, orphaned: true,
			want:  []string{"REFUSE", "orphaned", "eva-system/capsule-refuse", "eva-tenant-refuse", "delete the Lease"},
			never: []string{"team-b", "hidden", "uid-2"},
		},
		"orphaned, same namespace": {
			holder: claim.Owner{Namespace: "team-a", Name: "first", UID: "uid-1"}, orphaned: true,
			want:  []string{"orphaned", "team-a/first", "eva-system/capsule-refuse"},
			never: []string{"uid-1"},
		},
		"orphaned, naming no tenant": {
			orphaned: true,
			want:     []string{"orphaned", "eva-system/capsule-refuse"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg := refusal(tn, tc.holder, tc.orphaned, lease)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(msg, n) {
					t.Errorf("%q names %q", msg, n)
				}
			}
		})
	}
}
