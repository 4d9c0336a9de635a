package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestOnlyDecommissionersDecommission installs base/ (its decommission guard, and the
// ClusterRole granting the verb decommission bound to the group eva:decommissioners) and
// lets two users edit EvaTenants through RBAC:
// bob, a tenant editor, may change a tenant but not decommission it, clear its deletion
// protection or delete it; alice, in the eva:decommissioners group, may.
func TestOnlyDecommissionersDecommission(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	const ns = "decommission-guard"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	editor := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "evatenant-editor-test"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{evav1.GroupVersion.Group}, Resources: []string{"evatenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evatenant-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"},
		},
	}
	for _, o := range []client.Object{editor, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	alice := impersonate(t, "alice", "eva:decommissioners", "system:authenticated")
	bob := impersonate(t, "bob", "tenant-editors", "eva:tenant-requesters", "system:authenticated")

	// The policy takes effect a moment after it is created.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := newTenant(ns, "GUARDP", evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Spec.Lifecycle = evav1.LifecycleDecommissioned })
		err := bob.Create(ctx, probe, client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "eva-tenant-decommissioner") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the decommission guard is not enforced after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	protected := newTenant(ns, "GUARDA", evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Spec.DeletionProtection = true })
	plain := newTenant(ns, "GUARDB", evav1.TierStarter)
	for _, tn := range []*evav1.EvaTenant{protected, plain} {
		if err := bob.Create(ctx, tn); err != nil {
			t.Fatalf("bob creates an active tenant: %v", err)
		}
	}

	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "eva-tenant-decommissioner") || !strings.Contains(err.Error(), "bob") {
			t.Errorf("bob %s: want refused by the guard, got %v", what, err)
		}
	}
	edit := func(c client.Client, tn *evav1.EvaTenant, change func(*evav1.EvaTenant)) error {
		var cur evav1.EvaTenant
		if err := c.Get(ctx, client.ObjectKeyFromObject(tn), &cur); err != nil {
			return err
		}
		change(&cur)
		return c.Update(ctx, &cur)
	}
	// What bob may not do.
	refused("clears deletionProtection", edit(bob, protected, func(tn *evav1.EvaTenant) { tn.Spec.DeletionProtection = false }))
	refused("decommissions", edit(bob, plain, func(tn *evav1.EvaTenant) { tn.Spec.Lifecycle = evav1.LifecycleDecommissioned }))
	refused("deletes", bob.Delete(ctx, plain.DeepCopy()))
	// What bob may: any other edit.
	if err := edit(bob, protected, func(tn *evav1.EvaTenant) { tn.Spec.Wave = 3 }); err != nil {
		t.Errorf("bob changes the wave: %v", err)
	}
	// alice may do all of it.
	if err := edit(alice, protected, func(tn *evav1.EvaTenant) { tn.Spec.DeletionProtection = false }); err != nil {
		t.Errorf("alice clears deletionProtection: %v", err)
	}
	if err := edit(alice, plain, func(tn *evav1.EvaTenant) { tn.Spec.Lifecycle = evav1.LifecycleDecommissioned }); err != nil {
		t.Errorf("alice decommissions: %v", err)
	}
	// Once decommissioned, bob's other edits still pass: the guard looks at changes.
	if err := edit(bob, plain, func(tn *evav1.EvaTenant) { tn.Spec.Wave = 1 }); err != nil {
		t.Errorf("bob edits a decommissioned tenant's wave: %v", err)
	}
	if err := alice.Delete(ctx, protected.DeepCopy()); err != nil {
		t.Errorf("alice deletes: %v", err)
	}
}

// impersonate is a client acting as user with groups.
func impersonate(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
