package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
)

// ArgoCDDir holds each tenant's Argo CD file in a tree rendered for Argo CD (applier:
// argocd), where FluxDir holds its Flux file otherwise:
//
//	argocd/<code>.yaml                       the tenant's AppProject, its applier's
//	                                         ClusterRoleBinding and its Applications
//	tenants/<code>/manifests.yaml            the foundation (no kustomization files:
//	tenants/<code>/workloads/manifests.yaml  every Application names a plain folder)
//
// The platform team points one Application at argocd/ (an app of apps, automated sync
// with prune and without allowEmpty, in a project that allows the cluster-scoped kind
// ClusterRoleBinding: deploy/argocd/tenant_applier.yaml); Eva's publish guards refuse an
// empty or shrunken tree before Argo CD sees it.
const ArgoCDDir = "argocd"

// argoSyncWave orders the objects of the platform's app of apps: each tenant's
// AppProject and its applier's binding first, its foundation, then its workloads and
// modules (waiting on the Applications' health where Argo CD is configured to assess
// it).
const argoSyncWave = "argocd.argoproj.io/sync-wave"

// argoSyncOptions and argoCompareOptions are the annotations that keep an object of the
// root Application's when it leaves the tree, without counting it as out of sync.
const (
	argoSyncOptions    = "argocd.argoproj.io/sync-options"
	argoCompareOptions = "argocd.argoproj.io/compare-options"
)

// argoDocs explains the Argo CD output.
const argoDocs = "docs/argocd.md"

// DeliveryDirs are the folders a tree may hold delivery files in, one per applier.
var DeliveryDirs = []string{FluxDir, ArgoCDDir}

// ArgoCD reports whether the renderer renders for Argo CD rather than Flux.
func (r *Renderer) ArgoCD() bool { return r.Env.Settings.Applier == overlay.ApplierArgoCD }

// DeliveryDir is the folder of the tree holding the tenants' delivery files: FluxDir,
// or ArgoCDDir when rendering for Argo CD.
func (r *Renderer) DeliveryDir() string {
	if r.ArgoCD() {
		return ArgoCDDir
	}
	return FluxDir
}

// ModuleApplicationName is the Argo CD Application deploying one module of a tenant
// (in Argo CD's namespace, beside the tenant's foundation and workloads).
func ModuleApplicationName(code, module string) string {
	return tenant.Namespace(code) + "-module-" + module
}

// ProjectName is the tenant's Argo CD AppProject.
func ProjectName(code string) string { return tenant.Namespace(code) }

// argoFilesOf lays out a bundle as the tenant's files of a tree for Argo CD: the
// foundation and workloads folders Argo CD reads as plain manifests, and one file of
// delivery objects. The module HelmReleases become module Applications with a Helm
// source (Argo CD reads the charts itself: no Flux chart source is rendered for it).
func (r *Renderer) argoFilesOf(t *evav1.EvaTenant, b *Bundle, td Teardown) ([]File, error) {
	var without []string
	if td >= TeardownMessaging {
		without = []string{"Stream", "PrometheusRule"}
	}
	foundation, err := b.LayerManifest(Foundation, without...)
	if err != nil {
		return nil, err
	}
	var workloads []byte
	var modules []*argov1.Application
	if td < TeardownWorkloads {
		if workloads, err = b.LayerManifest(Workloads, append(withoutTraffic(td), "HelmRelease")...); err != nil {
			return nil, err
		}
		if modules, err = r.moduleApplications(t, b); err != nil {
			return nil, err
		}
	}
	objects := []runtime.Object{r.argoProject(t), r.argoApplierBinding(t), r.directoryApplication(t, FoundationName(b.Code), "", 0)}
	if len(workloads) > 0 {
		objects = append(objects, r.directoryApplication(t, WorkloadsName(b.Code), WorkloadsDir, 1))
	}
	for _, m := range modules {
		objects = append(objects, m)
	}
	var delivery bytes.Buffer
	for i, o := range objects {
		if i > 0 {
			delivery.WriteString("---\n")
		}
		if err := manifest.EncodeObject(&delivery, o); err != nil {
			return nil, fmt.Errorf("encoding the Argo CD objects of %s: %w", b.Code, err)
		}
	}
	dir := path.Join(TenantsDir, DirName(b.Code))
	files := []File{
		{path.Join(ArgoCDDir, DirName(b.Code)+".yaml"), delivery.Bytes()},
		{path.Join(dir, ManifestsFile), foundation},
	}
	if len(workloads) > 0 {
		files = append(files, File{path.Join(dir, WorkloadsDir, ManifestsFile), workloads})
	}
	return files, nil
}

// argoProject renders the tenant's AppProject: its Applications may read the tree's
// repository and the chart repository only, deploy into the tenant's namespace only,
// create no cluster-scoped object but its Namespace, and sync as the tenant's applier
// account (argocd:eva-tenant-<code>, impersonated once application.sync.impersonation
// is enabled), which base/rbac/tenant_applier.yaml fences to that namespace as it does
// Flux's.
func (r *Renderer) argoProject(t *evav1.EvaTenant) *argov1.AppProject {
	a := r.Env.Settings.ArgoCD
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	p := &argov1.AppProject{
		TypeMeta: metav1.TypeMeta{APIVersion: argov1.GroupVersion.String(), Kind: argov1.AppProjectKind},
		ObjectMeta: metav1.ObjectMeta{Name: ProjectName(code), Namespace: a.Namespace, Labels: s.labels(),
			Annotations: map[string]string{argoSyncWave: "-1"}},
		Spec: argov1.AppProjectSpec{
			Description:              "Eva tenant " + code + ": its own namespace only",
			SourceRepos:              []string{a.RepoURL, a.ChartRepository},
			Destinations:             []argov1.ApplicationDestination{{Server: a.DestinationServer, Namespace: s.ns}},
			ClusterResourceWhitelist: []metav1.GroupKind{{Group: "", Kind: "Namespace"}},
			DestinationServiceAccounts: []argov1.DestinationServiceAccount{{
				Server: a.DestinationServer, Namespace: s.ns, DefaultServiceAccount: a.Namespace + ":" + ApplierName(code)}},
		},
	}
	return p
}

// argoApplierBinding grants the tenant's applier account (argocd:eva-tenant-<code>), and
// it alone, the rights a tenant bundle needs (the environment's ApplierClusterRole),
// which the applier fence of base/rbac/tenant_applier.yaml confines to the namespace of
// the account's name, as applierBinding does under Flux. A binding per account, never
// one to the group of Argo CD's namespace: argocd-server, the repo server and default
// would hold the rights unfenced. The root Application applies it with the project
// (wave -1), before the foundation syncs as the account; it is kept when the tenant
// leaves the tree, so that the Applications' finalizers can still delete the tenant's
// objects as the applier, and is then not counted as out of sync.
func (r *Renderer) argoApplierBinding(t *evav1.EvaTenant) *rbacv1.ClusterRoleBinding {
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ApplierName(code), Labels: s.labels(),
			Annotations: map[string]string{argoSyncWave: "-1", argoSyncOptions: "Prune=false", argoCompareOptions: "IgnoreExtraneous"}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Env.Settings.ApplierClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ApplierName(code),
			Namespace: r.Env.Settings.ArgoCD.Namespace}},
	}
}

// directoryApplication renders an Application syncing one of the tenant's folders
// (sub: "" for the foundation, WorkloadsDir) as plain manifests.
func (r *Renderer) directoryApplication(t *evav1.EvaTenant, name, sub string, wave int) *argov1.Application {
	a := r.Env.Settings.ArgoCD
	dir := path.Join(r.TreePath, TenantsDir, DirName(t.Spec.CapsuleCode), sub)
	return r.application(t, name, wave, &argov1.ApplicationSource{
		RepoURL: a.RepoURL, Path: dir, TargetRevision: a.TargetRevision,
		Directory: &argov1.ApplicationSourceDirectory{Include: ManifestsFile},
	}, t.Spec.Frozen == "")
}

// application renders one of the tenant's Applications: in the tenant's project,
// deployed into its namespace, synced automatically (pruned and healed) unless
// automated is false, retried after a failed sync, refusing to take over an object
// another Application manages, and deleted with its resources (the finalizer).
func (r *Renderer) application(t *evav1.EvaTenant, name string, wave int, src *argov1.ApplicationSource, automated bool) *argov1.Application {
	a := r.Env.Settings.ArgoCD
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	factor := int64(2)
	app := &argov1.Application{
		TypeMeta: metav1.TypeMeta{APIVersion: argov1.GroupVersion.String(), Kind: argov1.ApplicationKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: s.labels(),
			Annotations: map[string]string{argoSyncWave: strconv.Itoa(wave)},
			Finalizers:  []string{argov1.ResourcesFinalizer}},
		Spec: argov1.ApplicationSpec{
			Project:     ProjectName(code),
			Source:      src,
			Destination: argov1.ApplicationDestination{Server: a.DestinationServer, Namespace: s.ns},
			SyncPolicy: &argov1.SyncPolicy{
				SyncOptions: []string{"FailOnSharedResource=true"},
				Retry: &argov1.RetryStrategy{Limit: *a.SyncRetries,
					Backoff: &argov1.Backoff{Duration: argoDuration(a.SyncRetryBackoff.Duration), Factor: &factor,
						MaxDuration: argoDuration(overlay.SyncRetryCap)}},
			},
		},
	}
	if automated {
		app.Spec.SyncPolicy.Automated = &argov1.SyncPolicyAutomated{Prune: true, SelfHeal: true}
	}
	return app
}

// moduleApplications turns the bundle's module HelmReleases (as the environment's
// patches left them) into Applications with a Helm source: the same chart, version,
// release name and values. A frozen tenant's releases are suspended: their
// Applications are not synced automatically. Argo CD reads no values from the cluster,
// so a module with valuesFrom is refused.
func (r *Renderer) moduleApplications(t *evav1.EvaTenant, b *Bundle) ([]*argov1.Application, error) {
	a := r.Env.Settings.ArgoCD
	var out []*argov1.Application
	for _, obj := range b.Objects() {
		if obj["kind"] != "HelmRelease" {
			continue
		}
		var hr struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				ReleaseName string `json:"releaseName"`
				Suspend     bool   `json:"suspend"`
				Chart       struct {
					Spec struct {
						Chart   string `json:"chart"`
						Version string `json:"version"`
					} `json:"spec"`
				} `json:"chart"`
				Values     json.RawMessage   `json:"values"`
				ValuesFrom []json.RawMessage `json:"valuesFrom"`
			} `json:"spec"`
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &hr); err != nil {
			return nil, fmt.Errorf("tenant %s: reading HelmRelease: %w", b.Code, err)
		}
		module := hr.Metadata.Name
		if len(hr.Spec.ValuesFrom) > 0 {
			return nil, fmt.Errorf("tenant %s: spec.valuesFrom (module %s): Argo CD reads no values from the cluster; see %s",
				b.Code, module, argoDocs)
		}
		src := &argov1.ApplicationSource{
			RepoURL: a.ChartRepository, Chart: hr.Spec.Chart.Spec.Chart, TargetRevision: hr.Spec.Chart.Spec.Version,
			Helm: &argov1.ApplicationSourceHelm{ReleaseName: hr.Spec.ReleaseName},
		}
		if len(hr.Spec.Values) > 0 {
			src.Helm.ValuesObject = &runtime.RawExtension{Raw: hr.Spec.Values}
		}
		app := r.application(t, ModuleApplicationName(b.Code, module), 1, src, !hr.Spec.Suspend)
		app.Labels[tenant.LabelModule] = module
		// The release's spec digest: the operator tells the Application of the current
		// render from an older one by it, as it does HelmReleases.
		app.Annotations[tenant.AnnotationSpecDigest] = hr.Metadata.Annotations[tenant.AnnotationSpecDigest]
		out = append(out, app)
	}
	return out, nil
}

// argoDuration writes a duration as people write them in Argo CD's settings: 3m, not
// Go's 3m0s; 1m30s stays as it is.
func argoDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
