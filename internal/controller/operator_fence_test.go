package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/overlay"
)

// fluxSource is a Flux source object of flux-system, as the platform creates it.
func fluxSource(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(sourcev1.GroupVersion.WithKind(kind))
	u.SetNamespace("flux-system")
	u.SetName(name)
	u.SetLabels(map[string]string{"platform": "owned"})
	u.SetAnnotations(map[string]string{"platform.example.com/owner": "team-platform"})
	return u
}

// TestOperatorOnlyAsksFluxSourcesToReconcile: Flux's sources in flux-system feed every
// tenant. As the operator's service account, with base/ installed, the request Eva makes
// (RequestReconcile: the reconcile.fluxcd.io/requestedAt annotation) goes through; every
// other change the operator's RBAC would allow (retargeting the tree's GitRepository to
// an attacker's URL, relabelling it, giving it an owner the garbage collector would
// delete it for, changing another annotation) is refused by the fence, and the shared
// HelmRepository of charts cannot be changed at all.
func TestOperatorOnlyAsksFluxSourcesToReconcile(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	op := asOperator(t)
	tree := fluxSource("GitRepository", "eva-tenants-fence", map[string]any{
		"url": "https://git.example.com/platform/tenants.git", "interval": "1m", "ref": map[string]any{"branch": "main"}})
	charts := fluxSource("HelmRepository", "eva-charts-fence", map[string]any{"url": "oci://registry.example.com/eva/charts", "type": "oci", "interval": "10m"})
	for _, obj := range []*unstructured.Unstructured{tree, charts} {
		if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	merge := func(obj *unstructured.Unstructured, patch string) func() error {
		return func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(obj.GroupVersionKind())
			u.SetNamespace(obj.GetNamespace())
			u.SetName(obj.GetName())
			return op.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
	}
	denied := map[string]func() error{
		"retarget the tree's GitRepository": merge(tree, `{"spec":{"url":"https://attacker.example/tenants.git"}}`),
		"change the tree's branch":          merge(tree, `{"spec":{"ref":{"branch":"attacker"}}}`),
		"relabel the tree's GitRepository":  merge(tree, `{"metadata":{"labels":{"platform":"stolen"}}}`),
		"change another annotation":         merge(tree, `{"metadata":{"annotations":{"platform.example.com/owner":"eva"}}}`),
		"add a finalizer":                   merge(tree, `{"metadata":{"finalizers":["eva.aidonow.com/hold"]}}`),
		"give it an owner to be collected for": merge(tree, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":%q}]}}`,
			"00000000-0000-0000-0000-000000000000")),
		"retarget the shared chart repository": merge(charts, `{"spec":{"url":"oci://attacker.example/charts"}}`),
		"annotate the shared chart repository": merge(charts, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"now"}}}`),
		"create a HelmRepository in flux-system": func() error {
			return op.Create(ctx, fluxSource("HelmRepository", "eva-charts-planted", map[string]any{"url": "oci://attacker.example/charts", "type": "oci"}))
		},
		"delete the tree's GitRepository": func() error { return op.Delete(ctx, tree.DeepCopy()) },
	}
	for what, do := range denied {
		t.Run("denied: "+what, func(t *testing.T) {
			err := do()
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("want the API server to refuse, got %v", err)
			}
		})
	}
	t.Run("allowed: a reconcile request", func(t *testing.T) {
		src := overlay.SourceRef{Kind: "GitRepository", Name: tree.GetName(), Namespace: "flux-system"}
		if err := RequestReconcile(ctx, op, src, time.Now()); err != nil {
			t.Fatal(err)
		}
		var got unstructured.Unstructured
		got.SetGroupVersionKind(tree.GroupVersionKind())
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tree), &got); err != nil {
			t.Fatal(err)
		}
		if url, _, _ := unstructured.NestedString(got.Object, "spec", "url"); url != "https://git.example.com/platform/tenants.git" || got.GetLabels()["platform"] != "owned" {
			t.Errorf("the GitRepository changed beyond the request: %v", got.Object)
		}
	})
}

// TestOperatorGrantsTheDeployerOnlyToEvaDeployer: the operator binds eva-tenant-deployer
// in a tenant namespace to the namespace's eva-deployer account; binding it to itself
// (whose rights would then include the tenant's Secrets and workloads) or to another
// account or namespace is refused.
func TestOperatorGrantsTheDeployerOnlyToEvaDeployer(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	op := asOperator(t)
	const ns = "eva-tenant-grants"
	if err := k8s.Create(ctx, restrictedNamespace(ns)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := func(name string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-tenant-deployer"},
			Subjects: subjects}
	}
	sa := func(namespace, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Namespace: namespace, Name: name}
	}
	for what, b := range map[string]*rbacv1.RoleBinding{
		"to the operator itself":           binding("to-operator", sa("eva-system", "eva-operator")),
		"to the namespace's default":       binding("to-default", sa(ns, "default")),
		"to another namespace's deployer":  binding("to-other", sa("eva-tenant-others", "eva-deployer")),
		"to a group":                       binding("to-group", rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:authenticated"}),
		"to its deployer and the operator": binding("to-both", sa(ns, "eva-deployer"), sa("eva-system", "eva-operator")),
	} {
		t.Run("denied: "+what, func(t *testing.T) {
			if err := op.Create(ctx, b); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("want the API server to refuse, got %v", err)
			}
		})
	}
	t.Run("allowed: to the namespace's eva-deployer", func(t *testing.T) {
		if err := op.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-deployer"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := op.Create(ctx, binding("eva-deployer", sa(ns, "eva-deployer"))); err != nil {
			t.Fatal(err)
		}
	})
}
