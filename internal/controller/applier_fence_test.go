package controller

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// evaRoles are the ClusterRoles that hold a tenant's rights.
var evaRoles = []string{"eva-tenant-applier", "eva-tenant-secrets", "eva-tenant-deployer"}

// applierIdentity is one GitOps tool's family of tenant applier identities,
// system:serviceaccount:<namespace>:eva-tenant-<code>.
type applierIdentity struct {
	name      string
	namespace string
	argoCD    bool
}

// applierIdentities are the two families the applier fence matches: Flux's
// kustomize-controller and Argo CD's application controller impersonate them.
var applierIdentities = []applierIdentity{{"flux", "flux-system", false}, {"argocd", "argocd", true}}

// renderer renders the dev environment for the identity's tool: as it is for Flux, with
// Argo CD settings (in the namespace argocd) for Argo CD.
func (id applierIdentity) renderer(t *testing.T) *render.Renderer {
	t.Helper()
	r := testRenderer(t)
	if !id.argoCD {
		return r
	}
	e := *r.Env
	e.Settings.Applier = overlay.ApplierArgoCD
	e.Settings.Secrets = nil
	e.Settings.ArgoCD = &overlay.ArgoCD{Namespace: id.namespace, RepoURL: "https://git.example.com/platform/tenants.git",
		TargetRevision: "main", ChartRepository: "https://charts.example.com/eva", DestinationServer: "https://kubernetes.default.svc",
		SyncRetries: ptr.To[int64](3), SyncRetryBackoff: &metav1.Duration{Duration: 10 * time.Second}}
	r.Env = &e
	return r
}

// applyManifests applies a multi-document YAML file as field manager owner, leaving out
// the kinds skipped.
func applyManifests(t *testing.T, data []byte, owner string, skipped ...string) {
	t.Helper()
	for _, doc := range strings.Split(string(data), "---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(j)) == "null" {
			continue // comments only
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(skipped, u.GetKind()) {
			continue
		}
		if err := k8s.Patch(context.Background(), u, client.Apply, client.FieldOwner(owner), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// fenceTenant is a Starter tenant of the code.
func fenceTenant(code string) *evav1.EvaTenant {
	return &evav1.EvaTenant{TypeMeta: metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(code), Namespace: "default"},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: code, Tier: evav1.TierStarter}}
}

// applyDeliveryFile applies what kustomize-controller applies for a tenant from the
// root: the tenant's flux/<code>.yaml as Eva renders it (its applier account and that
// account's binding; the Kustomizations are left out, no Flux runs here).
func applyDeliveryFile(t *testing.T, code string) {
	t.Helper()
	applyDeliveryFileFor(t, applierIdentities[0], code)
}

// applyDeliveryFileFor applies the tenant's delivery file of the identity's tool as its
// root applies it: flux/<code>.yaml, or argocd/<code>.yaml (the applier's binding; the
// AppProject and Applications are left out, no Argo CD runs here).
func applyDeliveryFileFor(t *testing.T, id applierIdentity, code string) {
	t.Helper()
	r := id.renderer(t)
	files, err := r.TenantFiles(fenceTenant(code))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == r.DeliveryDir()+"/"+render.DirName(code)+".yaml" {
			applyManifests(t, f.Data, "eva-test-root", "Kustomization", "AppProject", "Application")
			return
		}
	}
	t.Fatalf("no delivery file for %s", code)
}

var applyArgoCDOnce sync.Once

// applyArgoCDPlatform applies what the platform adds for Argo CD beside the operator's
// base, deploy/argocd/tenant_applier.yaml, as a user installs it, with Argo CD's
// namespace.
func applyArgoCDPlatform(t *testing.T) {
	t.Helper()
	applyOperatorBase(t)
	applyArgoCDOnce.Do(func() {
		if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "argocd", "tenant_applier.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		applyManifests(t, data, "eva-test-install")
	})
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

// fenced reports whether err is the refusal of an admission policy (RBAC allowed the
// request, the fence did not), by a validation that held, not by one that failed to
// evaluate (which failurePolicy Fail also turns into a refusal, of every request).
func fenced(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") &&
		!strings.Contains(err.Error(), "resulted in error")
}

// untilFenced runs do until an admission policy refuses it, or the timeout passes, and
// returns its last error: a binding just applied takes a moment to reach the
// authorizer, and a policy just created a moment to be enforced. do must not write
// (a dry run).
func untilFenced(timeout time.Duration, do func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := do()
		if fenced(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertNoTenantRights makes the attacks a tenant's rights would allow as each account
// of ns, and wants each refused.
func assertNoTenantRights(t *testing.T, ns string, accounts []string) {
	t.Helper()
	ctx := context.Background()
	for _, account := range accounts {
		c := impersonating(t, ns, account)
		attempts := map[string]func() error{
			"create a namespace": func() error { return c.Create(ctx, restrictedNamespace("eva-tenant-stolen"), client.DryRunAll) },
			"bind a tenant's Secrets to itself": func() error {
				b := deployerBinding("eva-tenant-fencea", "eva-tenant-secrets")
				b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}
				return c.Create(ctx, b, client.DryRunAll)
			},
			"create a Job in a tenant's namespace": func() error { return c.Create(ctx, seedJob("eva-tenant-fencea"), client.DryRunAll) },
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

// TestFluxAccountsHoldNoTenantRights is issue 32's finding 4: with the tenant rights
// bound to the group of Flux's namespace, every account there (notification-controller,
// source-controller, default) could create namespaces and bind a tenant's Secrets to
// itself, unfenced. Only each tenant's own applier holds them now.
func TestFluxAccountsHoldNoTenantRights(t *testing.T) {
	applyOperatorBase(t)
	applyDeliveryFile(t, "FENCEA")
	if err := k8s.Create(context.Background(), restrictedNamespace("eva-tenant-fencea")); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	assertNoTenantRights(t, "flux-system", []string{"notification-controller", "source-controller", "default", "eva-tenant-nobody"})
}

// TestArgoCDAccountsHoldNoTenantRights is issue 32.4: deploy/argocd/tenant_applier.yaml
// bound the tenant rights to the group of Argo CD's namespace, so argocd-server, the
// repo server and default held them, unfenced. With the platform's file and a tenant's
// Argo CD delivery file applied, only the tenant's own applier holds them.
func TestArgoCDAccountsHoldNoTenantRights(t *testing.T) {
	applyArgoCDPlatform(t)
	applyDeliveryFileFor(t, applierIdentities[1], "FENCEA")
	if err := k8s.Create(context.Background(), restrictedNamespace("eva-tenant-fencea")); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	assertNoTenantRights(t, "argocd", []string{"argocd-server", "argocd-repo-server", "argocd-applicationset-controller",
		"default", "eva-tenant-nobody"})
}

// TestAppliersCreateOnlyWhatEvaRenders: a tenant's applier, Flux's or Argo CD's, in its
// own namespace, may not name another tenant's host, take all traffic, run a Job as
// another account, grant the deployer's rights to another account, write a token Secret
// or take a chart from elsewhere (issue 32, item 4; for Argo CD, issue 32.4).
func TestAppliersCreateOnlyWhatEvaRenders(t *testing.T) {
	applyArgoCDPlatform(t)
	for _, tc := range []struct {
		id   applierIdentity
		code string
	}{{applierIdentities[0], "FENCEB"}, {applierIdentities[1], "FENCEE"}} {
		t.Run(tc.id.name, func(t *testing.T) { attackAsApplier(t, tc.id, tc.code) })
	}
}

// attackAsApplier makes the attacks of TestAppliersCreateOnlyWhatEvaRenders as the
// applier of code in the identity's family.
func attackAsApplier(t *testing.T, id applierIdentity, code string) {
	ctx := context.Background()
	applyDeliveryFileFor(t, id, code)
	ns := render.ApplierName(code)
	lower := strings.ToLower(code)
	if err := k8s.Create(ctx, restrictedNamespace(ns)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applier := impersonating(t, id.namespace, ns)
	// Rendered for the dev environment, as the cluster's fence enforces it.
	fence := map[string]string{tenant.AnnotationFence: devFenceDigest()}
	ingress := func(host string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-" + lower + "-" + strings.ReplaceAll(host, ".", "-"), Annotations: fence},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: host}}}}
	}
	eventually(t, 10*time.Second, "the applier to write its own Ingress", func() error {
		return applier.Create(ctx, ingress(lower+".dev.eva.example.com"), client.DryRunAll)
	})
	// The foundation of a tenant with encrypted Secrets grants them to its applier: the
	// applier itself, in whichever namespace its account is.
	grant := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-tenant-secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-tenant-secrets"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: ns, Namespace: id.namespace}}}
	if err := applier.Create(ctx, grant.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Errorf("the applier cannot grant itself its namespace's Secrets: %v", err)
		if err := k8s.Create(ctx, grant); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The fence reads the tenant's namespace from the username (split(':')[3] of
	// system:serviceaccount:<namespace>:eva-tenant-<code>), for either tool.
	outside := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "fence-probe"}}
	err := untilFenced(10*time.Second, func() error { return applier.Create(ctx, outside.DeepCopy(), client.DryRunAll) })
	if want := "a tenant applies only into its own namespace " + ns; !fenced(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("writing outside its namespace: want %q, got %v", want, err)
	}
	for what, obj := range objectsEvaNeverRenders(ns, lower) {
		t.Run("denied: "+what, func(t *testing.T) {
			t.Parallel()
			err := untilFenced(10*time.Second, func() error {
				return applier.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
			})
			if !fenced(err) {
				t.Fatalf("want the applier fence to refuse, got %v", err)
			}
		})
	}
}

// objectsEvaNeverRenders are objects the applier's rights would let it write in (or
// from) its namespace ns, of the tenant whose code in lower case is lower, which the
// fence refuses.
func objectsEvaNeverRenders(ns, lower string) map[string]client.Object {
	// Rendered for the dev environment, as the cluster's fence enforces it.
	fence := map[string]string{tenant.AnnotationFence: devFenceDigest()}
	ingress := func(host string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-" + lower + "-" + strings.ReplaceAll(host, ".", "-"), Annotations: fence},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: host}}}}
	}
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
	secretsToOther := deployerBinding(ns, "eva-tenant-secrets")
	secretsToOther.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}}
	release := func(change func(*helmv2.HelmRelease)) *helmv2.HelmRelease {
		r := unboundRelease(ns)
		r.Spec.ServiceAccountName = "eva-deployer"
		change(r)
		return r
	}
	remote := release(func(r *helmv2.HelmRelease) {
		r.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: lower + "-kubeconfig"}}
	})
	intoOther := release(func(r *helmv2.HelmRelease) { r.Spec.TargetNamespace = "kube-system" })
	storedElsewhere := release(func(r *helmv2.HelmRelease) { r.Spec.StorageNamespace = "kube-system" })
	chartSource := func(change func(*sourcev1.HelmRepositorySpec)) *sourcev1.HelmRepository {
		r := &sourcev1.HelmRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-charts"},
			Spec: sourcev1.HelmRepositorySpec{URL: "oci://registry.example.com/eva/charts", Type: sourcev1.HelmRepositoryTypeOCI}}
		change(&r.Spec)
		return r
	}
	cloudIdentity := chartSource(func(s *sourcev1.HelmRepositorySpec) { s.Provider = "aws" })
	withCredentials := chartSource(func(s *sourcev1.HelmRepositorySpec) {
		s.SecretRef = &meta.LocalObjectReference{Name: lower + "-registry"}
	})
	classicIndex := chartSource(func(s *sourcev1.HelmRepositorySpec) { s.Type = ""; s.URL = "https://charts.example.com" })
	ociSource := func(change func(*sourcev1.OCIRepositorySpec)) *sourcev1.OCIRepository {
		r := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-charts-crm"},
			Spec: sourcev1.OCIRepositorySpec{URL: "oci://registry.example.com/eva/charts/eva-crm",
				Reference:     &sourcev1.OCIRepositoryRef{Tag: "1.4.0"},
				LayerSelector: &sourcev1.OCILayerSelector{MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip", Operation: sourcev1.OCILayerCopy},
				Interval:      metav1.Duration{Duration: time.Minute}}}
		change(&r.Spec)
		return r
	}
	ociOtherCredentials := ociSource(func(s *sourcev1.OCIRepositorySpec) {
		s.SecretRef = &meta.LocalObjectReference{Name: lower + "-registry"}
	})
	ociCloudIdentity := ociSource(func(s *sourcev1.OCIRepositorySpec) { s.Provider = "gcp" })
	ociAccount := ociSource(func(s *sourcev1.OCIRepositorySpec) { s.ServiceAccountName = "eva-deployer" })
	ociNotAChart := ociSource(func(s *sourcev1.OCIRepositorySpec) { s.LayerSelector = nil })
	chartRefElsewhere := release(func(r *helmv2.HelmRelease) {
		r.Spec.Chart = nil
		r.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "eva-charts-crm", Namespace: "flux-system"}
	})
	chartRefHelmChart := release(func(r *helmv2.HelmRelease) {
		r.Spec.Chart = nil
		r.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: "HelmChart", Name: "eva-crm"}
	})
	pinned := seedJob(ns)
	pinned.Spec.Template.Spec.NodeName = "control-plane"
	snippet := ingress(lower + ".dev.eva.example.com")
	snippet.Annotations = map[string]string{"nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers \"x: y\";"}
	noClass := ingress(lower + ".dev.eva.example.com")
	noClass.Spec.IngressClassName = nil
	return map[string]client.Object{
		"a HelmRelease on another cluster (kubeConfig)":      remote,
		"a HelmRelease installing into another namespace":    intoOther,
		"a HelmRelease storing its releases elsewhere":       storedElsewhere,
		"a chart source with a cloud provider's identity":    cloudIdentity,
		"a chart source with credentials":                    withCredentials,
		"a chart source that is not OCI":                     classicIndex,
		"an OCIRepository with other credentials":            ociOtherCredentials,
		"an OCIRepository with a cloud provider's identity":  ociCloudIdentity,
		"an OCIRepository as a service account":              ociAccount,
		"an OCIRepository that is not a chart source":        ociNotAChart,
		"a chartRef to another namespace's OCIRepository":    chartRefElsewhere,
		"a chartRef to a HelmChart":                          chartRefHelmChart,
		"a Job bound to a node by name":                      pinned,
		"an Ingress with a configuration snippet":            snippet,
		"an Ingress without a class (the cluster's default)": noClass,
		"its namespace on an old Pod Security version":       oldPSA,
		"an Ingress for another tenant's host":               ingress("globex.dev.eva.example.com"),
		"an Ingress for a host ending like ours":             ingress("x" + lower + ".dev.eva.example.com"),
		"an Ingress with a default backend":                  catchAll,
		"an Ingress rule without a host":                     noHost,
		"a Job as another account":                           job,
		"the deployer's rights for default":                  toDefault,
		"its Secrets for default":                            secretsToOther,
		"a service-account token Secret":                     token,
		"a chart from another namespace":                     elsewhere,
	}
}

// TestEveryBindingOfEvaRolesIsFenced lists every binding of Eva's tenant roles on the
// cluster (base/ and deploy/argocd/ installed, a tenant's Flux and Argo CD delivery files
// applied) and holds each subject to the fence: no group, and every account bound
// cluster-wide is refused by an admission policy when it writes outside its namespace.
func TestEveryBindingOfEvaRolesIsFenced(t *testing.T) {
	applyArgoCDPlatform(t)
	ctx := context.Background()
	applyDeliveryFile(t, "FENCEC")
	applyDeliveryFileFor(t, applierIdentities[1], "FENCEF")
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
	probed := map[string]bool{}
	for _, b := range all {
		if !slices.Contains(evaRoles, b.role) {
			continue
		}
		for _, s := range b.subjects {
			if s.Kind != "ServiceAccount" {
				t.Errorf("%s binds %s to %s %s: only individual accounts are fenced", b.name, b.role, s.Kind, s.Name)
				continue
			}
			if !b.cluster {
				continue // its rights end at its namespace (RBAC)
			}
			probed[s.Namespace+"/"+s.Name] = true
			probe := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "fence-probe"}}
			err := untilFenced(10*time.Second, func() error {
				return impersonating(t, s.Namespace, s.Name).Create(ctx, probe.DeepCopy(), client.DryRunAll)
			})
			if !fenced(err) {
				t.Errorf("%s: %s/%s writes outside its namespace unfenced: %v", b.name, s.Namespace, s.Name, err)
			}
		}
	}
	for _, want := range []string{"flux-system/eva-tenant-fencec", "argocd/eva-tenant-fencef"} {
		if !probed[want] {
			t.Errorf("no cluster-wide binding of Eva's roles to %s: its delivery file was not applied (probed %v)", want, probed)
		}
	}
}

// TestArgoCDRootBindsOnlyAppliers: the platform's root Application applies each tenant's
// Argo CD file, its applier's ClusterRoleBinding included, as an account holding
// eva-tenant-applier-binder (deploy/argocd/tenant_applier.yaml). It may apply that
// binding as Eva renders it; the right to bind eva-tenant-applier would let it bind it
// to anyone else, which eva-tenant-applier-bindings refuses, and RBAC refuses it any
// other role and any delete.
func TestArgoCDRootBindsOnlyAppliers(t *testing.T) {
	applyArgoCDPlatform(t)
	ctx := context.Background()
	const root = "eva-root-fence"
	if err := k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: root},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-tenant-applier-binder"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: root, Namespace: "argocd"}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c := impersonating(t, "argocd", root)
	rendered := applierBindingOf(t, applierIdentities[1], "FENCEG")
	eventually(t, 10*time.Second, "the root to apply a tenant's applier binding", func() error {
		return c.Patch(ctx, rendered.DeepCopy(), client.Apply, client.FieldOwner("argocd-controller"), client.ForceOwnership)
	})
	to := func(subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		b := rendered.DeepCopy()
		b.Name, b.Subjects = "eva-tenant-stolen", subjects
		return b
	}
	sa := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: ns}
	}
	fencedOff := map[string]client.Object{
		"the tenant rights for Argo CD's group": to(rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:argocd"}),
		"the tenant rights for argocd-server":   to(sa("argocd", "argocd-server")),
		"the tenant rights for itself":          to(sa("argocd", root)),
		"the tenant rights for a user":          to(rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "mallory"}),
		"the tenant rights for two accounts":    to(sa("argocd", "eva-tenant-fenceg"), sa("argocd", "default")),
	}
	for what, obj := range fencedOff {
		t.Run("fenced: "+what, func(t *testing.T) {
			t.Parallel()
			if err := untilFenced(10*time.Second, func() error { return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll) }); !fenced(err) {
				t.Fatalf("want eva-tenant-applier-bindings to refuse, got %v", err)
			}
		})
	}
	t.Run("fenced: a group added to the tenant's binding", func(t *testing.T) {
		b := rendered.DeepCopy()
		b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:authenticated"})
		err := untilFenced(10*time.Second, func() error {
			return c.Patch(ctx, b.DeepCopy(), client.Apply, client.FieldOwner("argocd-controller"), client.ForceOwnership, client.DryRunAll)
		})
		if !fenced(err) {
			t.Fatalf("want eva-tenant-applier-bindings to refuse, got %v", err)
		}
	})
	admin := to(sa("argocd", root))
	admin.RoleRef.Name = "cluster-admin"
	for what, do := range map[string]func() error{
		"bind cluster-admin": func() error { return c.Create(ctx, admin, client.DryRunAll) },
		"delete another tenant's binding": func() error {
			return c.Delete(ctx, applierBindingOf(t, applierIdentities[0], "FENCEC"), client.DryRunAll)
		},
		"create a namespace": func() error { return c.Create(ctx, restrictedNamespace("eva-tenant-fenceg"), client.DryRunAll) },
	} {
		t.Run("refused: "+what, func(t *testing.T) {
			if err := do(); !apierrors.IsForbidden(err) || fenced(err) {
				t.Fatalf("want RBAC to refuse, got %v", err)
			}
		})
	}
}

// applierBindingOf is the applier's ClusterRoleBinding of the tenant's delivery file, as
// Eva renders it for the identity's tool.
func applierBindingOf(t *testing.T, id applierIdentity, code string) *rbacv1.ClusterRoleBinding {
	t.Helper()
	r := id.renderer(t)
	files, err := r.TenantFiles(fenceTenant(code))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path != r.DeliveryDir()+"/"+render.DirName(code)+".yaml" {
			continue
		}
		for _, doc := range strings.Split(string(f.Data), "---\n") {
			if !strings.Contains(doc, "kind: ClusterRoleBinding\n") {
				continue
			}
			b := &rbacv1.ClusterRoleBinding{}
			if err := yaml.UnmarshalStrict([]byte(doc), b); err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no applier binding in the delivery file of %s", code)
	return nil
}

// devFenceDigest is the fence digest of the dev environment, which the suite's cluster
// enforces (tenant.AnnotationFence); empty if it cannot be loaded, which every Ingress
// check then shows.
func devFenceDigest() string {
	e, err := overlay.Load(filepath.Join(testenv.RepoRoot(), "overlays"), "dev")
	if err != nil {
		return ""
	}
	return e.Settings.FenceParams()[overlay.FenceDigestKey]
}
