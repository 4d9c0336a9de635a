package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
)

// evaRoles are the ClusterRoles that hold a tenant's rights.
var evaRoles = []string{"eva-tenant-applier", "eva-tenant-secrets", "eva-tenant-deployer"}

// applyDeliveryFile applies what kustomize-controller applies for a tenant from the
// root: the tenant's flux/<code>.yaml as Eva renders it (its applier account and that
// account's binding; the Kustomizations are left out, no Flux runs here).
func applyDeliveryFile(t *testing.T, code string) {
	t.Helper()
	tn := &evav1.EvaTenant{TypeMeta: metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind}, ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(code), Namespace: "default"},
		Spec: evav1.EvaTenantSpec{CapsuleCode: code, Tier: evav1.TierStarter}}
	files, err := testRenderer(t).TenantFiles(tn)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path != render.FluxDir+"/"+render.DirName(code)+".yaml" {
			continue
		}
		for _, doc := range strings.Split(string(f.Data), "---\n") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatal(err)
			}
			if u.GetKind() == "Kustomization" {
				continue
			}
			if err := k8s.Patch(context.Background(), u, client.Apply, client.FieldOwner("kustomize-controller"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
		return
	}
	t.Fatalf("no delivery file for %s", code)
}

// impersonating is a client acting as a service account, with the groups the API
// server gives it.
func impersonating(t *testing.T, ns, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFluxAccountsHoldNoTenantRights is issue 32's finding 4: with the tenant rights
// bound to the group of Flux's namespace, every account there (notification-controller,
// source-controller, default) could create namespaces and bind a tenant's Secrets to
// itself, unfenced. Only each tenant's own applier holds them now.
func TestFluxAccountsHoldNoTenantRights(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	applyDeliveryFile(t, "FENCEA")
	if err := k8s.Create(ctx, restrictedNamespace("eva-tenant-fencea")); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, account := range []string{"notification-controller", "source-controller", "default", "eva-tenant-nobody"} {
		c := impersonating(t, "flux-system", account)
		attempts := map[string]func() error{
			"create a namespace": func() error { return c.Create(ctx, restrictedNamespace("eva-tenant-stolen")) },
			"bind a tenant's Secrets to itself": func() error {
				b := deployerBinding("eva-tenant-fencea", "eva-tenant-secrets")
				b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: "flux-system"}}
				return c.Create(ctx, b)
			},
			"create a Job in a tenant's namespace": func() error { return c.Create(ctx, seedJob("eva-tenant-fencea")) },
		}
		for what, do := range attempts {
			t.Run(account+": "+what, func(t *testing.T) {
				if err := do(); !apierrors.IsForbidden(err) {
					t.Fatalf("want the API server to refuse, got %v", err)
				}
			})
		}
	}
}

// TestAppliersCreateOnlyWhatEvaRenders: a tenant's applier, in its own namespace, may
// not name another tenant's host, take all traffic, run a Job as another account, grant
// the deployer's rights to another account, write a token Secret or take a chart from
// elsewhere (issue 32, item 4).
func TestAppliersCreateOnlyWhatEvaRenders(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	applyDeliveryFile(t, "FENCEB")
	ns := "eva-tenant-fenceb"
	if err := k8s.Create(ctx, restrictedNamespace(ns)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applier := impersonating(t, "flux-system", "eva-tenant-fenceb")
	ingress := func(host string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-fenceb-" + strings.ReplaceAll(host, ".", "-")},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host}}}}
	}
	eventually(t, 10*time.Second, "the applier to write its own Ingress", func() error {
		return applier.Create(ctx, ingress("fenceb.dev.eva.example.com"), client.DryRunAll)
	})
	job := seedJob(ns)
	job.Spec.Template.Spec.ServiceAccountName = "eva-deployer"
	catchAll := ingress("x")
	catchAll.Spec = networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: "crm", Port: networkingv1.ServiceBackendPort{Number: 80}}}}
	noHost := ingress("y")
	noHost.Spec.Rules = []networkingv1.IngressRule{{}}
	toDefault := deployerBinding(ns, "eva-tenant-deployer")
	toDefault.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tok",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "eva-deployer"}}, Type: corev1.SecretTypeServiceAccountToken}
	elsewhere := unboundRelease(ns)
	elsewhere.Spec.ServiceAccountName = "eva-deployer"
	elsewhere.Spec.Chart.Spec.SourceRef.Namespace = "kube-system"
	oldPSA := restrictedNamespace(ns)
	oldPSA.Labels["pod-security.kubernetes.io/enforce-version"] = "v1.0"
	denied := map[string]client.Object{
		"its namespace on an old Pod Security version": oldPSA,
		"an Ingress for another tenant's host":         ingress("globex.dev.eva.example.com"),
		"an Ingress for a host ending like ours":       ingress("xfenceb.dev.eva.example.com"),
		"an Ingress with a default backend":            catchAll,
		"an Ingress rule without a host":               noHost,
		"a Job as another account":                     job,
		"the deployer's rights for default":            toDefault,
		"a service-account token Secret":               token,
		"a chart from another namespace":               elsewhere,
	}
	if err := applier.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-tenant-secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-tenant-secrets"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "eva-tenant-fenceb", Namespace: "flux-system"}}}); err != nil {
		t.Fatalf("the applier cannot grant itself its namespace's Secrets: %v", err)
	}
	for what, obj := range denied {
		t.Run("denied: "+what, func(t *testing.T) {
			var err error
			eventually(t, 10*time.Second, "the Secrets grant to take effect", func() error {
				err = applier.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
				if apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
					return err // RBAC: the grant is not effective yet, or no right at all
				}
				return nil
			})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
				t.Fatalf("want the applier fence to refuse, got %v", err)
			}
		})
	}
}

// TestEveryBindingOfEvaRolesIsFenced lists every binding of Eva's tenant roles on the
// cluster (base/ installed, a tenant's delivery file applied) and holds each subject to
// the fence: no group, and every account bound cluster-wide is refused by an admission
// policy when it writes outside its namespace.
func TestEveryBindingOfEvaRolesIsFenced(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	applyDeliveryFile(t, "FENCEC")
	var crbs rbacv1.ClusterRoleBindingList
	if err := k8s.List(ctx, &crbs); err != nil {
		t.Fatal(err)
	}
	var rbs rbacv1.RoleBindingList
	if err := k8s.List(ctx, &rbs); err != nil {
		t.Fatal(err)
	}
	type binding struct {
		name     string
		cluster  bool
		role     string
		subjects []rbacv1.Subject
	}
	var all []binding
	for _, b := range crbs.Items {
		all = append(all, binding{"ClusterRoleBinding " + b.Name, true, b.RoleRef.Name, b.Subjects})
	}
	for _, b := range rbs.Items {
		all = append(all, binding{"RoleBinding " + b.Namespace + "/" + b.Name, false, b.RoleRef.Name, b.Subjects})
	}
	checked := 0
	for _, b := range all {
		if !slices.Contains(evaRoles, b.role) {
			continue
		}
		for _, s := range b.subjects {
			checked++
			if s.Kind != "ServiceAccount" {
				t.Errorf("%s binds %s to %s %s: only individual accounts are fenced", b.name, b.role, s.Kind, s.Name)
				continue
			}
			if !b.cluster {
				continue // its rights end at its namespace (RBAC)
			}
			probe := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "fence-probe"}}
			err := impersonating(t, s.Namespace, s.Name).Create(ctx, probe, client.DryRunAll)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
				t.Errorf("%s: %s/%s writes outside its namespace unfenced: %v", b.name, s.Namespace, s.Name, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no binding of Eva's roles found: the delivery file was not applied")
	}
}
