package controller

import (
	"context"
	"path/filepath"
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
	"github.com/aidonow/eva/internal/entitlement"
	"github.com/aidonow/eva/internal/testenv"
)

// prodEntitlements are a platform's entitlements: Starter and Customer and waves 2 and 3
// for every tenant, wave 1 granted to DEVUSR, Enterprise to GLOBEX, freezing to none.
var prodEntitlements = &entitlement.Rules{Tiers: []evav1.Tier{evav1.TierStarter, evav1.TierCustomer}, Waves: []int32{2, 3},
	Grants: map[string]entitlement.Grant{"DEVUSR": {Waves: []int32{1}}, "GLOBEX": {Tiers: []evav1.Tier{evav1.TierEnterprise}},
		"INITEC": {Tiers: []evav1.Tier{evav1.TierEnterprise}, Namespace: "entitled"}}}

// TestEntitlementsHoldKubectl installs overlays/prod on an API server of its own, with
// the ConfigMap eva-tenant-entitlements an environment of prodEntitlements generates
// (what the chart and the overlays write: their tests hold them to Params), and edits EvaTenants through
// RBAC as a requester and as a platform admin: what the entitlements do not give a code
// is refused for both (an identity's rights are not a code's entitlements), naming the
// rule; what they give is admitted; a decommissioned tenant claims nothing.
func TestEntitlementsHoldKubectl(t *testing.T) {
	crds := filepath.Join(testenv.RepoRoot(), "internal", "testenv", "crds")
	e, err := testenv.Start(filepath.Join(crds, "flux"), filepath.Join(crds, "addons"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	admin, err := client.New(e.Config, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := installOverlay(e, admin, "prod"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	params := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "eva-system", Name: "eva-tenant-entitlements"}, params); err != nil {
		t.Fatal(err)
	}
	params.Data = prodEntitlements.Params()
	if err := admin.Update(ctx, params); err != nil {
		t.Fatal(err)
	}
	const ns = "entitled"
	editor := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "evatenant-editor-test"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{evav1.GroupVersion.Group}, Resources: []string{"evatenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}}
	for _, o := range []client.Object{editor, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evatenant-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tenant-editors"}},
	}} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string, groups ...string) client.Client {
		cfg := rest.CopyConfig(e.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "tenant-editors", "system:authenticated")}
		c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	dave := as("dave", "eva:tenant-requesters")
	erin := as("erin", "eva:tenant-requesters", "eva:platform-admins")
	tenantOf := func(code string, tier evav1.Tier, wave int32) *evav1.EvaTenant {
		tn := newTenant(ns, code, tier)
		tn.Spec.Wave = wave
		return tn
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := dave.Create(ctx, tenantOf("ACMECO", evav1.TierCustomer, 1), client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "entitlements") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entitlements policy is not enforced after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused := func(who, what, want string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "eva-tenant-entitlements") {
			t.Errorf("%s %s: want refused with %q, got %v", who, what, want, err)
		}
	}
	admitted := func(who, what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s %s: %v", who, what, err)
		}
	}
	refused("erin", "makes FOOBAR Platform", "tier Platform is not FOOBAR's to take: the environment's entitlements give it to no tenant",
		erin.Create(ctx, tenantOf("FOOBAR", evav1.TierPlatform, 2), client.DryRunAll))
	refused("dave", "makes ACMECO Enterprise", "tier Enterprise is not ACMECO's to take: the environment's entitlements give it to GLOBEX,INITEC@entitled",
		dave.Create(ctx, tenantOf("ACMECO", evav1.TierEnterprise, 2), client.DryRunAll))
	admitted("dave", "makes GLOBEX Enterprise", dave.Create(ctx, tenantOf("GLOBEX", evav1.TierEnterprise, 3), client.DryRunAll))
	// INITEC's grant is for its requester namespace: whoever takes the code elsewhere
	// first gets nothing of it.
	admitted("dave", "makes INITEC Enterprise in its namespace", dave.Create(ctx, tenantOf("INITEC", evav1.TierEnterprise, 2), client.DryRunAll))
	squatter := tenantOf("INITEC", evav1.TierEnterprise, 2)
	squatter.Namespace = "squatters"
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "squatters"}}, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "squatters", Name: "evatenant-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tenant-editors"}},
	}} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's RBAC authorizer learns of the new binding from its own informer:
	// until it has, erin is refused by RBAC, not by the entitlements.
	refused("erin", "makes INITEC Enterprise in another namespace", "tier Enterprise is not INITEC's to take",
		onceBound(func() error { return erin.Create(ctx, squatter, client.DryRunAll) }))
	refused("erin", "puts ACMECO in wave 1", "wave 1 is not ACMECO's to choose: the environment's entitlements give it to DEVUSR",
		erin.Create(ctx, tenantOf("ACMECO", evav1.TierCustomer, 1), client.DryRunAll))
	admitted("dave", "puts DEVUSR in wave 1", dave.Create(ctx, tenantOf("DEVUSR", evav1.TierStarter, 1), client.DryRunAll))

	acmeco := tenantOf("ACMECO", evav1.TierCustomer, 2)
	admitted("dave", "creates ACMECO", dave.Create(ctx, acmeco))
	edit := func(c client.Client, change func(*evav1.EvaTenant)) error {
		var cur evav1.EvaTenant
		if err := c.Get(ctx, client.ObjectKeyFromObject(acmeco), &cur); err != nil {
			return err
		}
		change(&cur)
		return c.Update(ctx, &cur)
	}
	refused("dave", "moves ACMECO into wave 1", "wave 1 is not ACMECO's to choose", edit(dave, func(tn *evav1.EvaTenant) { tn.Spec.Wave = 1 }))
	refused("dave", "freezes ACMECO", "ACMECO may not freeze itself off platform releases: the environment's entitlements grant freezing to no tenant",
		edit(dave, func(tn *evav1.EvaTenant) { tn.Spec.Frozen = "quarter-end" }))
	admitted("dave", "moves ACMECO to wave 3", edit(dave, func(tn *evav1.EvaTenant) { tn.Spec.Wave = 3 }))
	decommissioned := tenantOf("OLDTNT", evav1.TierPlatform, 1)
	decommissioned.Spec.Lifecycle = evav1.LifecycleDecommissioned
	if err := erin.Create(ctx, decommissioned, client.DryRunAll); err != nil && strings.Contains(err.Error(), "eva-tenant-entitlements") {
		t.Errorf("a decommissioned tenant's claims were checked: %v", err)
	}
}

// onceBound calls create until RBAC stops refusing it (for at most 30 seconds) and returns
// its last error: a RoleBinding just created reaches the API server's authorizer through
// an informer, so a request made at once may still be refused for want of it.
func onceBound(create func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := create()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
