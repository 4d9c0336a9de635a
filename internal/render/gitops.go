package render

import (
	"bytes"
	"fmt"
	"path"
	"runtime"
	"slices"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/tenant"
)

// Paths of the GitOps tree, relative to its root:
//
//	kustomization.yaml               root: lists every tenant's Flux Kustomization
//	flux/<code>.yaml                 the tenant's applier account and Flux Kustomization
//	tenants/<code>/kustomization.yaml
//	tenants/<code>/manifests.yaml    the tenant bundle
const (
	RootKustomization = "kustomization.yaml"
	FluxDir           = "flux"
	TenantsDir        = "tenants"
	ManifestsFile     = "manifests.yaml"
	KustomizationFile = "kustomization.yaml"
)

// File is one file of the GitOps tree.
type File struct {
	Path string
	Data []byte
}

// TenantPaths returns the tree paths that belong to one tenant.
func TenantPaths(code string) []string {
	dir := DirName(code)
	return []string{
		path.Join(FluxDir, dir+".yaml"),
		path.Join(TenantsDir, dir, KustomizationFile),
		path.Join(TenantsDir, dir, ManifestsFile),
	}
}

// tenantKustomization is the same for every tenant: its bundle is one file.
var tenantKustomization = []byte(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ` + ManifestsFile + "\n")

// TenantFiles renders one tenant's files of the GitOps tree, in TenantPaths order.
func (r *Renderer) TenantFiles(t *evav1.EvaTenant) ([]File, error) {
	b, err := r.Bundle(t)
	if err != nil {
		return nil, err
	}
	data, err := b.Manifest()
	if err != nil {
		return nil, err
	}
	ks, err := r.FluxKustomization(t)
	if err != nil {
		return nil, err
	}
	var ksBuf bytes.Buffer
	if err := manifest.Encode(&ksBuf, r.applierAccount(t)); err != nil {
		return nil, fmt.Errorf("encoding the applier account of %s: %w", b.Code, err)
	}
	ksBuf.WriteString("---\n")
	if err := manifest.Encode(&ksBuf, ks); err != nil {
		return nil, fmt.Errorf("encoding Flux Kustomization of %s: %w", b.Code, err)
	}
	paths := TenantPaths(b.Code)
	return []File{{paths[0], ksBuf.Bytes()}, {paths[1], tenantKustomization}, {paths[2], data}}, nil
}

// FluxKustomization renders the tenant's Flux Kustomization: each tenant is applied,
// health-checked and pruned on its own, so one broken tenant blocks no other.
func (r *Renderer) FluxKustomization(t *evav1.EvaTenant) (map[string]any, error) {
	env := r.Env.Settings
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	ks := &kustomizev1.Kustomization{
		TypeMeta: metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: tenant.Namespace(code), Namespace: env.FluxNamespace, Labels: s.labels(),
		},
		Spec: kustomizev1.KustomizationSpec{
			Interval: env.KustomizationInterval,
			Path:     "./" + path.Join(r.TreePath, TenantsDir, DirName(code)),
			Prune:    true,
			Wait:     true,
			Timeout:  &env.KustomizationTimeout,
			// After a failed apply or health check, try again soon rather than at the
			// next interval (10m): the tenant's status follows within seconds.
			RetryInterval: &env.KustomizationRetryInterval,
			// Each tenant applies as its own identity, never as kustomize-controller:
			// base/rbac/tenant_applier.yaml grants it what a bundle needs and confines it
			// to the namespace of the same name.
			ServiceAccountName: ApplierName(code),
			SourceRef: kustomizev1.CrossNamespaceSourceReference{
				Kind: env.GitOpsSource.Kind, Name: env.GitOpsSource.Name, Namespace: env.GitOpsSource.Namespace,
			},
		},
	}
	return manifest.ToMap(ks)
}

// applierAccount is the service account the tenant's Kustomization impersonates. It is
// never pruned: kustomize-controller skips the garbage collection of a deleted
// Kustomization whose account is gone, and the root prunes the account and the
// Kustomization together, so a pruned account would leave the tenant's namespace behind.
// It holds no rights of its own (base/rbac/tenant_applier.yaml grants them to the
// group of every account in the Flux namespace, fenced to the namespace of its name).
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

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ApplierName is the service account (in the Flux namespace) a tenant's Kustomization
// impersonates: eva-tenant-<code>, the name of the one namespace it may write to.
func ApplierName(code string) string { return tenant.Namespace(code) }

// RootKustomizationFile lists every tenant's Flux Kustomization, sorted, so the tree's
// root can be handed to one Flux Kustomization.
func RootKustomizationFile(codes []string) File {
	dirs := make([]string, len(codes))
	for i, c := range codes {
		dirs[i] = DirName(c)
	}
	slices.Sort(dirs)
	var buf bytes.Buffer
	buf.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	if len(dirs) == 0 {
		buf.WriteString("resources: []\n")
	} else {
		buf.WriteString("resources:\n")
		for _, d := range dirs {
			buf.WriteString("- " + path.Join(FluxDir, d+".yaml") + "\n")
		}
	}
	return File{Path: RootKustomization, Data: buf.Bytes()}
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
		// The bundle's objects and the Flux Kustomization.
		return bytes.Count(files[2].Data, []byte("---\n")) + 1, size, nil
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
	root := RootKustomizationFile(codes)
	if err := emit(root); err != nil {
		return stats, err
	}
	stats.Bytes += int64(len(root.Data))
	return stats, nil
}
