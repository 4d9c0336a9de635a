package render

import (
	"bytes"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/quota"
	"github.com/aidonow/eva/internal/tenant"
)

// Paths of the GitOps tree, relative to its root:
//
//	kustomization.yaml                         root: lists every tenant's Flux file
//	flux/<code>.yaml                           the tenant's applier account and its two
//	                                           Flux Kustomizations (foundation, workloads)
//	tenants/<code>/kustomization.yaml          the foundation
//	tenants/<code>/manifests.yaml
//	tenants/<code>/workloads/kustomization.yaml
//	tenants/<code>/workloads/manifests.yaml    absent when the tenant has no workloads
//	tenants/<code>/workloads/secrets/<name>.yaml  the tenant's SOPS-encrypted Secrets
const (
	RootKustomization = "kustomization.yaml"
	FluxDir           = "flux"
	TenantsDir        = "tenants"
	WorkloadsDir      = "workloads"
	ManifestsFile     = "manifests.yaml"
	KustomizationFile = "kustomization.yaml"
)

// File is one file of the GitOps tree.
type File struct {
	Path string
	Data []byte
}

// kustomizationOf lists a folder's one manifests file, or nothing, and any further
// files (relative to the folder).
func kustomizationOf(empty bool, more ...string) []byte {
	if empty {
		return kustomizationListing(nil)
	}
	return kustomizationListing(append([]string{ManifestsFile}, more...))
}

// kustomizationListing writes a Kustomization of resources through the YAML encoder,
// so a name is always one quoted-if-need-be entry: written by concatenation, a name with
// a newline (a folder of a remote tree) would plant a resource line of its own.
func kustomizationListing(resources []string) []byte {
	list := make([]any, len(resources))
	for i, r := range resources {
		list[i] = r
	}
	var buf bytes.Buffer
	// The object is strings only: the encoder cannot fail on it.
	_ = manifest.Encode(&buf, map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": list})
	return buf.Bytes()
}

// Teardown is how far a GitOps decommission has taken a tenant's published files: each
// step is published, and applied by Flux, before the next (the saga's order).
type Teardown int

const (
	// TeardownNone renders everything the tenant's spec asks for.
	TeardownNone Teardown = iota
	// TeardownTraffic leaves out the Ingress: the first step of every teardown (a
	// move's source takes its traffic away, and drains, before anything else).
	TeardownTraffic
	// TeardownMessaging also leaves out the streams and the alert rules.
	TeardownMessaging
	// TeardownWorkloads also leaves out the workloads (releases, seed Job, Ingress): Flux
	// deletes the HelmReleases and helm-controller uninstalls them, as the deployer
	// account the foundation still holds.
	TeardownWorkloads
)

// withoutTraffic is what a teardown leaves out of the workloads: the Ingress from
// TeardownTraffic on.
func withoutTraffic(td Teardown) []string {
	if td >= TeardownTraffic {
		return []string{"Ingress"}
	}
	return nil
}

// StepFiles renders the tenant's files at a step of the GitOps decommission saga
// (internal/saga): what the operator publishes for an EvaTenant, and evactl for the
// source of a tenant file's move. Before the first step the tenant renders whole; once
// Removed, it has no files.
func (r *Renderer) StepFiles(t *evav1.EvaTenant, step evav1.DecommissionStep) ([]File, error) {
	switch step {
	case "":
		return r.TenantFiles(t)
	case evav1.StepTrafficRemoved:
		return r.TenantFilesAt(t, TeardownTraffic)
	case evav1.StepStreamsRemoved:
		return r.TenantFilesAt(t, TeardownMessaging)
	case evav1.StepReleasesRemoved:
		return r.TenantFilesAt(t, TeardownWorkloads)
	case evav1.StepNamespaceOnly:
		final := t.DeepCopy()
		final.Spec.Lifecycle = evav1.LifecycleDecommissioned
		return r.TenantFiles(final)
	}
	return nil, nil
}

// TenantFiles renders one tenant's files of the GitOps tree.
func (r *Renderer) TenantFiles(t *evav1.EvaTenant) ([]File, error) {
	return r.TenantFilesAt(t, TeardownNone)
}

// TenantFilesAt renders one tenant's files with the objects a decommission step has
// removed left out.
func (r *Renderer) TenantFilesAt(t *evav1.EvaTenant, td Teardown) ([]File, error) {
	b, err := r.Bundle(t)
	if err != nil {
		return nil, err
	}
	return r.FilesOf(t, b, td)
}

// FilesOf lays out an already rendered bundle of t (Renderer.Bundle) as the tenant's
// files of the GitOps tree, without rendering it again.
func (r *Renderer) FilesOf(t *evav1.EvaTenant, b *Bundle, td Teardown) ([]File, error) {
	if r.ArgoCD() {
		return r.argoFilesOf(t, b, td)
	}
	var without []string
	if td >= TeardownMessaging {
		without = []string{"Stream", "PrometheusRule"}
	}
	foundation, err := b.LayerManifest(Foundation, without...)
	if err != nil {
		return nil, err
	}
	if foundation, err = r.withSecretsRoleBinding(foundation, t); err != nil {
		return nil, err
	}
	var workloads []byte
	if td < TeardownWorkloads {
		if workloads, err = b.LayerManifest(Workloads, withoutTraffic(td)...); err != nil {
			return nil, err
		}
	}
	var flux bytes.Buffer
	if err := manifest.Encode(&flux, r.applierAccount(t)); err != nil {
		return nil, fmt.Errorf("encoding the applier account of %s: %w", b.Code, err)
	}
	flux.WriteString("---\n")
	if err := manifest.EncodeObject(&flux, r.applierBinding(t)); err != nil {
		return nil, fmt.Errorf("encoding the applier binding of %s: %w", b.Code, err)
	}
	for _, ks := range r.FluxKustomizations(t) {
		flux.WriteString("---\n")
		if err := manifest.EncodeObject(&flux, ks); err != nil {
			return nil, fmt.Errorf("encoding Flux Kustomization %s: %w", ks.Name, err)
		}
	}
	dir := path.Join(TenantsDir, DirName(b.Code))
	// The encrypted Secrets go with the workloads that read them: the foundation, applied
	// (and Ready) first, holds the RoleBinding that lets the applier write them.
	var secrets []File
	var listed []string
	if len(workloads) > 0 {
		secrets = secretFiles(path.Join(dir, WorkloadsDir), b.secrets)
		for _, f := range secrets {
			listed = append(listed, strings.TrimPrefix(f.Path, path.Join(dir, WorkloadsDir)+"/"))
		}
	}
	files := []File{
		{path.Join(FluxDir, DirName(b.Code)+".yaml"), flux.Bytes()},
		{path.Join(dir, KustomizationFile), kustomizationOf(false)},
		{path.Join(dir, ManifestsFile), foundation},
		{path.Join(dir, WorkloadsDir, KustomizationFile), kustomizationOf(len(workloads) == 0, listed...)},
	}
	files = append(files, secrets...)
	if len(workloads) > 0 {
		files = append(files, File{path.Join(dir, WorkloadsDir, ManifestsFile), workloads})
	}
	return files, nil
}

// FoundationName and WorkloadsName are the tenant's two Flux Kustomizations (in the
// Flux namespace).
func FoundationName(code string) string { return tenant.Namespace(code) }

// WorkloadsName is the Flux Kustomization applying the tenant's workloads.
func WorkloadsName(code string) string { return tenant.Namespace(code) + "-workloads" }

// FluxKustomizations renders the tenant's two Flux Kustomizations, Flux's
// infrastructure/apps layering per tenant, so that "applied" and "healthy" are told apart
// and no tenant holds a kustomize-controller worker for long:
//
//   - the foundation (namespace, confinement, streams, rules) waits for its objects to
//     be healthy, which takes seconds: its lastAppliedRevision is Provisioned;
//   - the workloads (releases, seed Job, Ingress) depend on the foundation and do not
//     wait: kustomize-controller health-checks synchronously, holding one of its few
//     workers for up to the timeout, so a release stuck for minutes would hold back
//     every other tenant. Their readiness is read from the objects themselves (and is
//     visible in Flux as each HelmRelease's Ready condition).
//
// Each is applied and pruned on its own, so one broken tenant blocks no other.
func (r *Renderer) FluxKustomizations(t *evav1.EvaTenant) []*kustomizev1.Kustomization {
	env := r.Env.Settings
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	dir := "./" + path.Join(r.TreePath, TenantsDir, DirName(code))
	one := func(name, path string, wait bool) *kustomizev1.Kustomization {
		return &kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.FluxNamespace, Labels: s.fluxLabels()},
			Spec: kustomizev1.KustomizationSpec{
				Interval: env.KustomizationInterval,
				Path:     path,
				Prune:    true,
				Wait:     wait,
				Timeout:  &env.KustomizationTimeout,
				// After a failed apply or health check, try again soon rather than at
				// the next interval (10m): the tenant's status follows within seconds.
				RetryInterval: &env.KustomizationRetryInterval,
				// Each tenant applies as its own identity, never as
				// kustomize-controller: base/rbac/tenant_applier.yaml grants it what a
				// bundle needs and confines it to the namespace of the same name.
				ServiceAccountName: ApplierName(code),
				SourceRef: kustomizev1.CrossNamespaceSourceReference{
					Kind: env.GitOpsSource.Kind, Name: env.GitOpsSource.Name, Namespace: env.GitOpsSource.Namespace,
				},
			},
		}
	}
	foundation := one(FoundationName(code), dir, true)
	// The workloads wait for the quota to be enforced, not just created: until
	// kube-controller-manager records its hard limits, quota admission lets any pod in.
	foundation.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "v1", Kind: "ResourceQuota",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: quota.HealthCheckExpr}}}
	workloads := one(WorkloadsName(code), dir+"/"+WorkloadsDir, false)
	workloads.Spec.Decryption = r.decryption(t)
	workloads.Spec.DependsOn = []kustomizev1.DependencyReference{{Name: foundation.Name}}
	return []*kustomizev1.Kustomization{foundation, workloads}
}

// applierAccount is the service account the tenant's Kustomizations impersonate. It is
// never pruned: kustomize-controller skips the garbage collection of a deleted
// Kustomization whose account is gone, and the root prunes the account and the
// Kustomization together, so a pruned account would leave the tenant's namespace behind.
// Its rights come from applierBinding, fenced by base/rbac/tenant_applier.yaml to the
// namespace of its name.
func (r *Renderer) applierAccount(t *evav1.EvaTenant) map[string]any {
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	return map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{
			"name": ApplierName(code), "namespace": r.Env.Settings.FluxNamespace, "labels": toAnyMap(s.labels()),
			"annotations": map[string]any{"kustomize.toolkit.fluxcd.io/prune": "disabled"},
		},
	}
}

// applierBinding grants the tenant's applier account, and it alone, the rights a
// tenant bundle needs (the environment's ApplierClusterRole), which the applier fence
// confines to the namespace of the account's name. A binding per account, never one to
// the Flux namespace's group: every other account there (source-controller, default)
// would hold the rights unfenced. It is kept on prune with the account, for the same
// reason.
func (r *Renderer) applierBinding(t *evav1.EvaTenant) *rbacv1.ClusterRoleBinding {
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	env := r.Env.Settings
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ApplierName(code), Labels: s.labels(),
			Annotations: map[string]string{"kustomize.toolkit.fluxcd.io/prune": "disabled"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: env.ApplierClusterRole},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: ApplierName(code), Namespace: env.FluxNamespace}},
	}
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ApplierName is the service account (in the Flux namespace) a tenant's Kustomizations
// impersonate: eva-tenant-<code>, the name of the one namespace it may write to.
func ApplierName(code string) string { return tenant.Namespace(code) }

// RootKustomizationFile lists every tenant's delivery file (deliveryDir: FluxDir or
// ArgoCDDir, Renderer.DeliveryDir), sorted, so the tree's root can be handed to one
// Flux Kustomization (or applied with kubectl apply -k).
func RootKustomizationFile(deliveryDir string, codes []string) File {
	dirs := make([]string, len(codes))
	for i, c := range codes {
		dirs[i] = DirName(c)
	}
	slices.Sort(dirs)
	resources := make([]string, len(dirs))
	for i, d := range dirs {
		resources[i] = path.Join(deliveryDir, d+".yaml")
	}
	return File{Path: RootKustomization, Data: kustomizationListing(resources)}
}

// TreeStats summarises a tree render.
type TreeStats struct {
	Tenants int
	Objects int
	Bytes   int64
}

// Tree renders the whole GitOps tree of tenants on every core. emit is called
// concurrently (it must be safe for that), with each tenant's files and, last, the root
// kustomization; progress, when not nil, is called after each tenant, one call at a
// time. The content does not depend on the order of tenants.
func (r *Renderer) Tree(tenants []*evav1.EvaTenant, emit func(File) error, progress func(done int)) (TreeStats, error) {
	var stats TreeStats
	codes := make([]string, 0, len(tenants))
	seen := map[string]bool{}
	for _, t := range tenants {
		code := t.Spec.CapsuleCode
		if seen[code] {
			return stats, fmt.Errorf("capsule code %s appears twice", code)
		}
		seen[code] = true
		codes = append(codes, code)
	}

	var (
		mu       sync.Mutex
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	take := func() (*evav1.EvaTenant, bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next == len(tenants) {
			return nil, false
		}
		next++
		return tenants[next-1], true
	}
	renderOne := func(t *evav1.EvaTenant) (objects int, size int64, err error) {
		files, err := r.TenantFiles(t)
		if err != nil {
			return 0, 0, err
		}
		for _, f := range files {
			if err := emit(f); err != nil {
				return 0, 0, err
			}
			size += int64(len(f.Data))
		}
		// The bundle's objects (the foundation's and the workloads' manifests) and the
		// delivery objects: two Flux Kustomizations, or the Argo CD project and
		// Applications.
		for _, f := range files {
			switch {
			case path.Base(f.Path) == ManifestsFile:
				objects += bytes.Count(f.Data, []byte("---\n"))
			case path.Dir(f.Path) == ArgoCDDir:
				objects += bytes.Count(f.Data, []byte("---\n")) + 1
			}
		}
		if !r.ArgoCD() {
			objects += 2
		}
		return objects, size, nil
	}
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t, ok := take(); ok; t, ok = take() {
				objects, size, err := renderOne(t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					stats.Tenants++
					stats.Objects += objects
					stats.Bytes += size
					if progress != nil {
						progress(stats.Tenants)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return stats, firstErr
	}
	root := RootKustomizationFile(r.DeliveryDir(), codes)
	if err := emit(root); err != nil {
		return stats, err
	}
	stats.Bytes += int64(len(root.Data))
	return stats, nil
}
