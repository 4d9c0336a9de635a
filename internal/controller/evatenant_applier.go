package controller

import (
	"context"
	"github.com/aidonow/eva/internal/observe"
)

// applier reads back what the tool applying a tenant's objects did with them: Flux
// (helm-controller and kustomize-controller; also the HelmReleases the operator applies
// itself in pure-cluster mode) or Argo CD (GitOps mode with applier: argocd). It is
// chosen once per environment; the rest of the reconcile (render, publish, status
// rules, the saga's order) is the same for both. The decommission saga asks argoCD()
// at its one step that differs (what "modules uninstalled" means).
type applier interface {
	// observeDelivery fills s.observed.GitOps: the tenant's foundation and workloads
	// delivery objects (Flux Kustomizations, Argo CD Applications) against the
	// published revision.
	observeDelivery(ctx context.Context, s *scope) error
	// observeModules appends each module's release state to s.observed.Releases;
	// rendered maps a module to the spec digest the tenant renders now.
	observeModules(ctx context.Context, s *scope, rendered map[string]string) error
}

// applier returns the tenant applier of the operator's environment and mode.
func (r *EvaTenantReconciler) applier() applier {
	if r.argoCD() {
		return argoApplier{r}
	}
	return fluxApplier{r}
}

// fluxApplier reads Flux's Kustomizations and HelmReleases.
type fluxApplier struct{ r *EvaTenantReconciler }

func (f fluxApplier) observeDelivery(ctx context.Context, s *scope) error {
	return f.r.observeKustomizations(ctx, s)
}

// observeModules reads each module's HelmRelease: what helm-controller says of it, and
// whether that is about the spec the tenant renders now.
func (f fluxApplier) observeModules(ctx context.Context, s *scope, rendered map[string]string) error {
	r, t := f.r, s.tenant
	var modules []observe.Module
	for _, module := range r.Renderer.Catalog.ModulesOf(t.Spec.Tier) {
		modules = append(modules, observe.Module{Name: module, Version: r.Renderer.Catalog.ModuleVersion(s.rendered, module), SpecDigest: rendered[module],
			ChartDigest: r.Renderer.ChartDigest(s.rendered, module)})
	}
	releases, err := observe.HelmReleases(ctx, r, t.Spec.CapsuleCode, modules)
	s.observed.Releases = append(s.observed.Releases, releases...)
	return err
}

// argoApplier reads Argo CD's Applications (evatenant_argocd.go).
type argoApplier struct{ r *EvaTenantReconciler }

func (a argoApplier) observeDelivery(ctx context.Context, s *scope) error {
	return a.r.observeApplications(ctx, s)
}

func (a argoApplier) observeModules(ctx context.Context, s *scope, rendered map[string]string) error {
	return a.r.observeModuleApplications(ctx, s, rendered)
}
