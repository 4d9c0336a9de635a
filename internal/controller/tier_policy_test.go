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
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestOnlyTierUsersSetTiers installs base/ (the tier guard of base/rbac/tier_policy.yaml,
// its ClusterRoles and their bindings to eva:tenant-requesters and eva:platform-admins)
// and lets three users edit EvaTenants through RBAC. carol, an editor in no tier group,
// may not create a tenant of any tier; dave, a requester, creates a Customer tenant and
// edits it, but may not make it Platform (no quota); erin, a platform admin, may; and a
// RoleBinding of eva-tenant-platform-tier in one namespace lets dave use Platform there
// only.
func TestOnlyTierUsersSetTiers(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	const ns, other = "tier-guard", "tier-guard-other"
	editor := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "evatenant-tier-editor-test"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{evav1.GroupVersion.Group}, Resources: []string{"evatenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
	}
	objects := []client.Object{editor}
	for _, n := range []string{ns, other} {
		objects = append(objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "evatenant-editors"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tenant-editors"}},
		})
	}
	objects = append(objects, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "dave-platform"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-tenant-platform-tier"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dave"}},
	})
	for _, o := range objects {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	carol := impersonate(t, "carol", "tenant-editors", "system:authenticated")
	dave := impersonate(t, "dave", "tenant-editors", "eva:tenant-requesters", "system:authenticated")
	erin := impersonate(t, "erin", "tenant-editors", "eva:tenant-requesters", "eva:platform-admins", "system:authenticated")

	// The policy takes effect a moment after it is created.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := carol.Create(ctx, newTenant(ns, "TIERPR", evav1.TierStarter), client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "tiers/Starter") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tier guard is not enforced after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused := func(who, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "needs the verb use on tiers/") || !strings.Contains(err.Error(), who) {
			t.Errorf("%s %s: want refused by the tier guard, got %v", who, what, err)
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

	refused("carol", "creates a Starter tenant", carol.Create(ctx, newTenant(ns, "TIERCA", evav1.TierStarter)))
	refused("dave", "creates a Platform tenant", dave.Create(ctx, newTenant(ns, "TIERDP", evav1.TierPlatform)))
	customer := newTenant(ns, "TIERDC", evav1.TierCustomer)
	if err := dave.Create(ctx, customer); err != nil {
		t.Fatalf("dave creates a Customer tenant: %v", err)
	}
	refused("dave", "makes his tenant Platform", edit(dave, customer, func(tn *evav1.EvaTenant) { tn.Spec.Tier = evav1.TierPlatform }))
	// Edits that keep the tier are not the guard's: carol may change the wave.
	if err := edit(carol, customer, func(tn *evav1.EvaTenant) { tn.Spec.Wave = 3 }); err != nil {
		t.Errorf("carol changes the wave: %v", err)
	}
	if err := edit(erin, customer, func(tn *evav1.EvaTenant) { tn.Spec.Tier = evav1.TierPlatform }); err != nil {
		t.Errorf("erin makes the tenant Platform: %v", err)
	}
	// A namespace's RoleBinding grants the tier in that namespace only.
	if err := dave.Create(ctx, newTenant(other, "TIERDO", evav1.TierPlatform)); err != nil {
		t.Errorf("dave creates a Platform tenant where he may: %v", err)
	}
}
