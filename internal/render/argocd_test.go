package render

import (
	"context"
	"encoding/json"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
)

// argoRenderer renders the dev environment for Argo CD.
func argoRenderer(t testing.TB) *Renderer {
	t.Helper()
	r := renderer(t)
	env := *r.Env
	env.Settings.Applier = overlay.ApplierArgoCD
	env.Settings.Secrets = nil
	env.Settings.ArgoCD = &overlay.ArgoCD{Namespace: "argocd", RepoURL: "https://git.example.com/platform/tenants.git",
		TargetRevision: "main", ChartRepository: "https://charts.example.com/eva", DestinationServer: "https://kubernetes.default.svc",
		SyncRetries: ptr.To[int64](3), SyncRetryBackoff: &metav1.Duration{Duration: 10 * time.Second}}
	r.Env = &env
	return r
}

// argoObjects decodes a tenant's Argo CD file.
func argoObjects(t *testing.T, files []File, code string) (*argov1.AppProject, []*argov1.Application) {
	t.Helper()
	var project *argov1.AppProject
	var apps []*argov1.Application
	for _, f := range files {
		if f.Path != path.Join(ArgoCDDir, DirName(code)+".yaml") {
			continue
		}
		for _, doc := range strings.Split(string(f.Data), "---\n") {
			var kind struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
				t.Fatal(err)
			}
			switch kind.Kind {
			case argov1.AppProjectKind:
				project = &argov1.AppProject{}
				if err := yaml.UnmarshalStrict([]byte(doc), project); err != nil {
					t.Fatal(err)
				}
			case argov1.ApplicationKind:
				app := &argov1.Application{}
				if err := yaml.UnmarshalStrict([]byte(doc), app); err != nil {
					t.Fatal(err)
				}
				apps = append(apps, app)
			case "ClusterRoleBinding":
				// The applier's binding: argoBindings reads it.
			default:
				t.Fatalf("unexpected %q in the Argo CD file of %s", kind.Kind, code)
			}
		}
	}
	if project == nil {
		t.Fatalf("%s: no AppProject rendered", code)
	}
	return project, apps
}

// argoBindings decodes the ClusterRoleBindings of a tenant's Argo CD file.
func argoBindings(t *testing.T, files []File, code string) []*rbacv1.ClusterRoleBinding {
	t.Helper()
	var out []*rbacv1.ClusterRoleBinding
	for _, f := range files {
		if f.Path != path.Join(ArgoCDDir, DirName(code)+".yaml") {
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
			out = append(out, b)
		}
	}
	return out
}

// TestArgoCDBindsEachApplierAlone (issue 32.4): the tenant's Argo CD file binds the
// applier ClusterRole to the tenant's applier account alone, in the namespace the
// environment says Argo CD runs in, never to a group; the root applies it with the
// project, and keeps it (not out of sync) when the tenant leaves the tree, so that the
// Applications' finalizers still delete as the applier.
func TestArgoCDBindsEachApplierAlone(t *testing.T) {
	for _, argoNS := range []string{"argocd", "gitops"} {
		t.Run(argoNS, func(t *testing.T) {
			r := argoRenderer(t)
			env := *r.Env
			a := *env.Settings.ArgoCD
			a.Namespace = argoNS
			env.Settings.ArgoCD = &a
			r.Env = &env
			for _, td := range []Teardown{TeardownNone, TeardownWorkloads} {
				files, err := r.TenantFilesAt(tenantFor("ACMECO", withTier(evav1.TierCustomer)), td)
				if err != nil {
					t.Fatal(err)
				}
				bindings := argoBindings(t, files, "ACMECO")
				if len(bindings) != 1 {
					t.Fatalf("teardown %d: %d ClusterRoleBindings, want the applier's", td, len(bindings))
				}
				b := bindings[0]
				if b.Name != "eva-tenant-acmeco" || b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole",
					Name: r.Env.Settings.ApplierClusterRole}) {
					t.Errorf("binding %s of %+v", b.Name, b.RoleRef)
				}
				want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "eva-tenant-acmeco", Namespace: argoNS}}
				if !reflect.DeepEqual(b.Subjects, want) {
					t.Errorf("subjects %+v, want %+v", b.Subjects, want)
				}
				project, _ := argoObjects(t, files, "ACMECO")
				if sa := project.Spec.DestinationServiceAccounts[0].DefaultServiceAccount; sa != argoNS+":"+b.Subjects[0].Name {
					t.Errorf("the project syncs as %s, the binding grants %s/%s", sa, b.Subjects[0].Namespace, b.Subjects[0].Name)
				}
				for k, v := range map[string]string{argoSyncWave: "-1", argoSyncOptions: "Prune=false", argoCompareOptions: "IgnoreExtraneous"} {
					if b.Annotations[k] != v {
						t.Errorf("annotation %s: %q, want %q", k, b.Annotations[k], v)
					}
				}
				if b.Labels[tenant.LabelCapsule] != "ACMECO" {
					t.Errorf("labels %v", b.Labels)
				}
			}
		})
	}
}

func TestArgoCDTreeLayout(t *testing.T) {
	r := argoRenderer(t)
	tree := renderTree(t, r, []*evav1.EvaTenant{tenantFor("DEVUSR"), tenantFor("GLOBEX", withTier(evav1.TierEnterprise))})
	var paths []string
	for p := range tree {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{"argocd/devusr.yaml", "argocd/globex.yaml", "kustomization.yaml",
		"tenants/devusr/manifests.yaml", "tenants/devusr/workloads/manifests.yaml",
		"tenants/globex/manifests.yaml", "tenants/globex/workloads/manifests.yaml"}
	if !slices.Equal(paths, want) {
		t.Fatalf("tree paths:\n got %v\nwant %v", paths, want)
	}
	if root := string(tree["kustomization.yaml"]); !strings.Contains(root, "- argocd/devusr.yaml\n- argocd/globex.yaml\n") {
		t.Errorf("the root kustomization does not list the Argo CD files:\n%s", root)
	}
	for p, data := range tree {
		for _, kind := range []string{"kind: HelmRelease", "kind: HelmRepository", "kind: Kustomization\n"} {
			if strings.Contains(string(data), kind) && p != "kustomization.yaml" {
				t.Errorf("%s holds a Flux object (%s)", p, kind)
			}
		}
	}
	// Every module of the tier is an Application, in catalog order, after the project,
	// the foundation and the workloads.
	project, apps := argoObjects(t, []File{{"argocd/globex.yaml", tree["argocd/globex.yaml"]}}, "GLOBEX")
	if project.Name != "eva-tenant-globex" || project.Namespace != "argocd" {
		t.Errorf("project %s/%s", project.Namespace, project.Name)
	}
	names := []string{"eva-tenant-globex", "eva-tenant-globex-workloads"}
	for _, m := range r.Catalog.ModulesOf(evav1.TierEnterprise) {
		names = append(names, ModuleApplicationName("GLOBEX", m))
	}
	var got []string
	for _, a := range apps {
		got = append(got, a.Name)
	}
	if !slices.Equal(got, names) {
		t.Errorf("Applications:\n got %v\nwant %v", got, names)
	}
	if src := apps[0].Spec.Source; src.Path != "tenants/globex" || src.Directory == nil || src.Directory.Include != ManifestsFile ||
		src.RepoURL != r.Env.Settings.ArgoCD.RepoURL || src.TargetRevision != "main" {
		t.Errorf("foundation source: %+v", src)
	}
	if src := apps[1].Spec.Source; src.Path != "tenants/globex/workloads" || src.Directory == nil {
		t.Errorf("workloads source: %+v", src)
	}
}

// TestArgoCDProjectConfinesTheTenant: every Application of a tenant is in the tenant's
// project, deploys into its namespace, syncs itself and cascades its deletion; the
// project allows that namespace only, the two repositories only, no cluster-scoped kind
// but Namespace, and syncs as the tenant's fenced applier account.
func TestArgoCDProjectConfinesTheTenant(t *testing.T) {
	r := argoRenderer(t)
	files, err := r.TenantFiles(tenantFor("ACMECO", withTier(evav1.TierCustomer)))
	if err != nil {
		t.Fatal(err)
	}
	project, apps := argoObjects(t, files, "ACMECO")
	a := r.Env.Settings.ArgoCD
	ns := tenant.Namespace("ACMECO")
	want := argov1.AppProjectSpec{
		Description:              "Eva tenant ACMECO: its own namespace only",
		SourceRepos:              []string{a.RepoURL, a.ChartRepository},
		Destinations:             []argov1.ApplicationDestination{{Server: a.DestinationServer, Namespace: ns}},
		ClusterResourceWhitelist: project.Spec.ClusterResourceWhitelist,
		DestinationServiceAccounts: []argov1.DestinationServiceAccount{{Server: a.DestinationServer, Namespace: ns,
			DefaultServiceAccount: "argocd:eva-tenant-acmeco"}},
	}
	if !reflect.DeepEqual(project.Spec, want) {
		t.Errorf("project spec:\n got %+v\nwant %+v", project.Spec, want)
	}
	if w := project.Spec.ClusterResourceWhitelist; len(w) != 1 || w[0].Group != "" || w[0].Kind != "Namespace" {
		t.Errorf("cluster-scoped kinds allowed: %v", w)
	}
	if len(apps) < 3 {
		t.Fatalf("%d Applications", len(apps))
	}
	for _, app := range apps {
		if app.Spec.Project != project.Name || app.Spec.Destination.Namespace != ns || app.Spec.Destination.Server != a.DestinationServer {
			t.Errorf("%s: project %q, destination %+v", app.Name, app.Spec.Project, app.Spec.Destination)
		}
		if p := app.Spec.SyncPolicy; p == nil || p.Automated == nil || !p.Automated.Prune || !p.Automated.SelfHeal || p.Automated.AllowEmpty {
			t.Errorf("%s: sync policy %+v", app.Name, p)
		}
		if !slices.Contains(app.Spec.SyncPolicy.SyncOptions, "FailOnSharedResource=true") {
			t.Errorf("%s: may take over another Application's objects: %v", app.Name, app.Spec.SyncPolicy.SyncOptions)
		}
		if !slices.Equal(app.Finalizers, []string{argov1.ResourcesFinalizer}) {
			t.Errorf("%s: finalizers %v: deleting it would leave its resources", app.Name, app.Finalizers)
		}
		if app.Namespace != a.Namespace || app.Labels[tenant.LabelCapsule] != "ACMECO" {
			t.Errorf("%s: namespace %q labels %v", app.Name, app.Namespace, app.Labels)
		}
	}
	// Argo CD installs the charts as the applier: the deployer binding includes it.
	for _, f := range files {
		if f.Path == "tenants/acmeco/manifests.yaml" && !strings.Contains(string(f.Data), "- kind: ServiceAccount\n  name: eva-tenant-acmeco\n  namespace: argocd\n") {
			t.Errorf("the deployer RoleBinding does not grant the applier account:\n%s", f.Data)
		}
	}
}

// TestArgoCDModulesMatchHelmReleases: a module Application installs what the Flux
// HelmRelease of the same tenant does: chart, version (a pin included), release name
// and values (the tenant's overrides and the capsule identity included).
func TestArgoCDModulesMatchHelmReleases(t *testing.T) {
	tn := tenantFor("ACMECO", withTier(evav1.TierCustomer), withPin("crm", "1.4.0"),
		withValues("crm", map[string]any{"replicas": 2, "features": map[string]any{"beta": true}}))
	flux, err := renderer(t).Bundle(tn)
	if err != nil {
		t.Fatal(err)
	}
	releases := map[string]helmv2.HelmRelease{}
	for _, obj := range flux.Objects() {
		if obj["kind"] != "HelmRelease" {
			continue
		}
		raw, _ := json.Marshal(obj)
		var hr helmv2.HelmRelease
		if err := json.Unmarshal(raw, &hr); err != nil {
			t.Fatal(err)
		}
		releases[hr.Name] = hr
	}
	r := argoRenderer(t)
	files, err := r.TenantFiles(tn)
	if err != nil {
		t.Fatal(err)
	}
	_, apps := argoObjects(t, files, "ACMECO")
	seen := 0
	for _, app := range apps {
		module := app.Labels[tenant.LabelModule]
		if module == "" {
			continue
		}
		seen++
		hr, ok := releases[module]
		if !ok {
			t.Errorf("%s: no HelmRelease %s in the Flux render", app.Name, module)
			continue
		}
		src := app.Spec.Source
		chart, version := r.Catalog.Modules[module].Chart, ReleaseChartVersion(&hr)
		if src.RepoURL != r.Env.Settings.ArgoCD.ChartRepository || src.Chart != chart ||
			src.TargetRevision != version || src.Helm == nil || src.Helm.ReleaseName != hr.Spec.ReleaseName {
			t.Errorf("%s: source %+v, HelmRelease chart %s %s release %s", app.Name, src, chart, version, hr.Spec.ReleaseName)
			continue
		}
		var got, want map[string]any
		if err := json.Unmarshal(src.Helm.ValuesObject.Raw, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(hr.Spec.Values.Raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: values\n got %v\nwant %v", app.Name, got, want)
		}
	}
	for _, app := range apps {
		// Every Application retries its syncs as the environment says, within bounds: a
		// sync retried forever would never fail the tenant.
		retry := app.Spec.SyncPolicy.Retry
		if retry == nil || retry.Limit != *r.Env.Settings.ArgoCD.SyncRetries || retry.Backoff == nil ||
			retry.Backoff.Duration != "10s" || retry.Backoff.MaxDuration != "3m" {
			t.Errorf("%s: retry %+v", app.Name, retry)
		}
	}
	if seen != len(releases) || seen == 0 {
		t.Errorf("%d module Applications for %d HelmReleases", seen, len(releases))
	}
	if crm := releases["crm"]; ReleaseChartVersion(&crm) != "1.4.0" {
		t.Errorf("the pin did not reach the release: %s", ReleaseChartVersion(&crm))
	}
}

// TestArgoCDRefusesWhatItCannotDeliver: Argo CD reads no values from the cluster and
// decrypts no SOPS. A tenant's valuesFrom is refused for every applier, by the tenant's
// validation; a valuesFrom an environment patch adds to a release is refused by the
// Argo CD output; a tenant's Secrets (and so its secretMounts) need secrets settings,
// which an Argo CD environment cannot have.
func TestArgoCDRefusesWhatItCannotDeliver(t *testing.T) {
	r := argoRenderer(t)
	tn := tenantFor("ACMECO", withTier(evav1.TierCustomer))
	tn.Spec.ValuesFrom = []evav1.ValuesReference{{Module: "crm", Kind: evav1.ValuesKindSecret, Name: "acmeco-db", ValuesKey: "password", TargetPath: "database.password"}}
	_, err := r.TenantFiles(tn)
	if err == nil || !strings.Contains(err.Error(), "spec.valuesFrom[0]: Forbidden: valuesFrom is refused") || !strings.Contains(err.Error(), "tenant acmeco") {
		t.Errorf("the tenant's valuesFrom: %v", err)
	}

	target := &types.Selector{}
	target.Kind, target.Name = "HelmRelease", "crm"
	patch, err := overlay.ParsePatch("values-from", "spec:\n  valuesFrom:\n  - kind: ConfigMap\n    name: extra\n", target)
	if err != nil {
		t.Fatal(err)
	}
	env := *r.Env
	env.Patches = []overlay.Patch{*patch}
	patched := &Renderer{Catalog: r.Catalog, Env: &env}
	_, err = patched.TenantFiles(tenantFor("ACMECO", withTier(evav1.TierCustomer)))
	if err == nil || !strings.Contains(err.Error(), "spec.valuesFrom (module crm)") || !strings.Contains(err.Error(), "ACMECO") {
		t.Errorf("an environment patch's valuesFrom: %v", err)
	}

	_, err = r.TenantFiles(tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database")))
	if err == nil || !strings.Contains(err.Error(), "ACMECO has encrypted Secrets") || !strings.Contains(err.Error(), "no secrets settings") {
		t.Errorf("secretMounts: %v", err)
	}
}

// TestArgoCDFrozenTenantIsNotSynced: a frozen tenant's Applications stay as they are
// (no automated sync), as its HelmReleases are suspended under Flux.
func TestArgoCDFrozenTenantIsNotSynced(t *testing.T) {
	r := argoRenderer(t)
	tn := tenantFor("DEVUSR")
	tn.Spec.Frozen = "incident 42"
	files, err := r.TenantFiles(tn)
	if err != nil {
		t.Fatal(err)
	}
	_, apps := argoObjects(t, files, "DEVUSR")
	for _, app := range apps {
		if app.Spec.SyncPolicy.Automated != nil {
			t.Errorf("%s of a frozen tenant syncs automatically", app.Name)
		}
	}
}

// TestArgoCDTeardownSteps: each decommission step leaves out what the saga removed: the
// streams and alert rules, then the workloads and module Applications (whose deletion
// Argo CD cascades to their resources).
func TestArgoCDTeardownSteps(t *testing.T) {
	r := argoRenderer(t)
	tn := tenantFor("GLOBEX", withTier(evav1.TierEnterprise))
	for _, tc := range []struct {
		td       Teardown
		streams  bool
		apps     int
		workload bool
	}{
		{TeardownNone, true, 2 + len(r.Catalog.ModulesOf(evav1.TierEnterprise)), true},
		{TeardownMessaging, false, 2 + len(r.Catalog.ModulesOf(evav1.TierEnterprise)), true},
		{TeardownWorkloads, false, 1, false},
	} {
		files, err := r.TenantFilesAt(tn, tc.td)
		if err != nil {
			t.Fatal(err)
		}
		_, apps := argoObjects(t, files, "GLOBEX")
		var foundation string
		workloads := false
		for _, f := range files {
			switch f.Path {
			case "tenants/globex/manifests.yaml":
				foundation = string(f.Data)
			case "tenants/globex/workloads/manifests.yaml":
				workloads = true
			}
		}
		if got := strings.Contains(foundation, "kind: Stream\n"); got != tc.streams {
			t.Errorf("teardown %d: streams rendered %v, want %v", tc.td, got, tc.streams)
		}
		if len(apps) != tc.apps || workloads != tc.workload {
			t.Errorf("teardown %d: %d Applications, workloads folder %v; want %d, %v", tc.td, len(apps), workloads, tc.apps, tc.workload)
		}
	}
}

// TestArgoCDObjectsAcceptedByAPIServer dry-runs every object of the Argo CD output
// against a real API server holding Argo CD's own CRDs (v3.2, hack/argocd-crds.sh).
func TestArgoCDObjectsAcceptedByAPIServer(t *testing.T) {
	e := apiServer(t)
	ctx := context.Background()
	r := argoRenderer(t)
	ensureNamespace(t, e.Client, r.Env.Settings.ArgoCD.Namespace)
	tenants := []*evav1.EvaTenant{tenantFor("DEVUSR"), tenantFor("PLATFM", withTier(evav1.TierPlatform)),
		tenantFor("ACMECO", withTier(evav1.TierCustomer), withValues("crm", map[string]any{"replicas": 2}))}
	for _, tn := range tenants {
		files, err := r.TenantFiles(tn)
		if err != nil {
			t.Fatal(err)
		}
		ensureNamespace(t, e.Client, tenant.Namespace(tn.Spec.CapsuleCode))
		var objects []*unstructured.Unstructured
		for _, f := range files {
			objects = append(objects, decodeObjects(t, f.Data)...)
		}
		kinds := map[string]int{}
		for _, u := range objects {
			kinds[u.GetKind()]++
			err := e.Client.Patch(ctx, u, client.Apply, client.DryRunAll, client.FieldOwner("eva"), client.ForceOwnership)
			if err != nil {
				t.Errorf("%s: %s %s/%s rejected: %v", tn.Spec.CapsuleCode, u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
		if kinds["AppProject"] != 1 || kinds["ClusterRoleBinding"] != 1 || kinds["Application"] < 3 {
			t.Errorf("%s: kinds %v", tn.Spec.CapsuleCode, kinds)
		}
	}
}

func TestArgoDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Second: "5s", 3 * time.Minute: "3m", 90 * time.Second: "1m30s",
		time.Hour: "1h", time.Hour + time.Second: "1h0m1s", 2*time.Hour + 5*time.Minute: "2h5m"} {
		if got := argoDuration(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}
