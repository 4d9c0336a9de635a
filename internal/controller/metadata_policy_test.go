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
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// platformMetadataKeys are the label and annotation keys an EvaTenant may carry that
// are the platform's: every key Eva reads or writes there, and a key of a subdomain no
// code names yet (the rule is the prefix, as for tenant files).
var platformMetadataKeys = []string{
	tenant.AnnotationOperatorVersion, tenant.AnnotationSeedLoaded, shard.Label, tenant.CellLabel("eu-1"),
	tenant.LabelCapsule, tenant.LabelTier, tenant.LabelWave, tenant.AnnotationOwnerUID, "team.eva.aidonow.com/anything",
}

// TestOnlyThePlatformSetsTenantMetadata installs base/ (eva-tenant-metadata-guard of
// base/rbac/metadata_policy.yaml) and lets a requester edit EvaTenants through RBAC:
// dave, in eva:tenant-requesters, may create and edit his tenant, but may not create
// one carrying a platform key, nor add, change or remove one, as a label or an
// annotation, for each key; nor give it an ownerReference. erin, a platform admin, and
// the operator's service account may; a key outside the platform's prefix is anyone's.
func TestOnlyThePlatformSetsTenantMetadata(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	const ns = "metadata-guard"
	editor := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "evatenant-metadata-editor-test"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{evav1.GroupVersion.Group}, Resources: []string{"evatenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
	}
	for _, o := range []client.Object{editor, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evatenant-editors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tenant-editors"},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:eva-system:eva-operator"}},
	}} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dave := impersonate(t, "dave", "tenant-editors", "eva:tenant-requesters", "system:authenticated")
	erin := impersonate(t, "erin", "tenant-editors", "eva:tenant-requesters", "eva:platform-admins", "system:authenticated")
	operator := impersonate(t, "system:serviceaccount:eva-system:eva-operator", "system:serviceaccounts", "system:authenticated")

	withKey := func(code, kind, key string) *evav1.EvaTenant {
		tn := newTenant(ns, code, evav1.TierStarter)
		if kind == "label" {
			tn.Labels = map[string]string{key: "b"}
		} else {
			tn.Annotations = map[string]string{key: "b"}
		}
		return tn
	}
	// The policy takes effect a moment after it is created.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := dave.Create(ctx, withKey("METAWT", "annotation", tenant.AnnotationOperatorVersion), client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "set-platform-metadata") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metadata guard is not enforced after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused := func(what, key string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "set-platform-metadata") || !strings.Contains(err.Error(), key) ||
			!strings.Contains(err.Error(), "dave") {
			t.Errorf("dave %s: want refused by the metadata guard naming %s, got %v", what, key, err)
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
	setKey := func(kind, key, value string) func(*evav1.EvaTenant) {
		return func(tn *evav1.EvaTenant) {
			m := &tn.Annotations
			if kind == "label" {
				m = &tn.Labels
			}
			if *m == nil {
				*m = map[string]string{}
			}
			if value == "" {
				delete(*m, key)
			} else {
				(*m)[key] = value
			}
		}
	}

	mine := newTenant(ns, "METADV", evav1.TierStarter)
	if err := dave.Create(ctx, mine); err != nil {
		t.Fatalf("dave creates a tenant: %v", err)
	}
	if err := edit(dave, mine, setKey("label", "example.com/team", "crm")); err != nil {
		t.Errorf("dave labels his tenant with a key of his own: %v", err)
	}
	for _, kind := range []string{"label", "annotation"} {
		for _, key := range platformMetadataKeys {
			refused("creates a tenant with the "+kind+" "+key, key, dave.Create(ctx, withKey("METANW", kind, key), client.DryRunAll))
			refused("adds the "+kind+" "+key, key, edit(dave, mine, setKey(kind, key, "a")))
			// Set by the platform, then changed or removed by dave.
			if err := edit(erin, mine, setKey(kind, key, "a")); err != nil {
				t.Errorf("erin sets the %s %s: %v", kind, key, err)
				continue
			}
			refused("changes the "+kind+" "+key, key, edit(dave, mine, setKey(kind, key, "b")))
			refused("removes the "+kind+" "+key, key, edit(dave, mine, setKey(kind, key, "")))
			if err := edit(operator, mine, setKey(kind, key, "")); err != nil {
				t.Errorf("the operator removes the %s %s: %v", kind, key, err)
			}
		}
	}
	// An owner the tenant does not have (a ConfigMap that does not exist): the garbage
	// collector would delete the tenant.
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "00000000-0000-0000-0000-000000000001"}
	owned := newTenant(ns, "METAOW", evav1.TierStarter)
	owned.OwnerReferences = []metav1.OwnerReference{owner}
	refused("creates a tenant with an ownerReference", "ownerReferences", dave.Create(ctx, owned, client.DryRunAll))
	refused("gives his tenant an ownerReference", "ownerReferences", edit(dave, mine, func(tn *evav1.EvaTenant) {
		tn.OwnerReferences = []metav1.OwnerReference{owner}
	}))
	if err := erin.Create(ctx, owned, client.DryRunAll); err != nil {
		t.Errorf("erin creates a tenant with an ownerReference: %v", err)
	}
	// spec.operatorVersion decides which operator serves the tenant, as the annotation.
	pinned := newTenant(ns, "METAOV", evav1.TierStarter)
	pinned.Spec.OperatorVersion = "9.9.9"
	refused("creates a tenant with spec.operatorVersion", "spec.operatorVersion", dave.Create(ctx, pinned, client.DryRunAll))
	refused("sets his tenant's spec.operatorVersion", "spec.operatorVersion", edit(dave, mine, func(tn *evav1.EvaTenant) {
		tn.Spec.OperatorVersion = "9.9.9"
	}))
	if err := erin.Create(ctx, pinned, client.DryRunAll); err != nil {
		t.Errorf("erin creates a tenant with spec.operatorVersion: %v", err)
	}
}
