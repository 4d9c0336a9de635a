package controller

import (
	"context"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
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
	ns := tenant.Namespace(t.Spec.CapsuleCode)
	for _, module := range r.Renderer.Catalog.ModulesOf(t.Spec.Tier) {
		var hr helmv2.HelmRelease
		found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: module}, &hr)
		if err != nil {
			return err
		}
		rs := status.ReleaseState{Module: module, Name: ns + "/" + module,
			Version: r.Renderer.Catalog.ModuleVersion(s.rendered, module), Found: found}
		if found {
			if want := rendered[module]; want != "" && hr.Annotations[tenant.AnnotationSpecDigest] != want {
				rs.Outdated = true
			}
			rs.Generation, rs.ObservedGeneration = hr.Generation, hr.Status.ObservedGeneration
			rs.Ready = apimeta.FindStatusCondition(hr.Status.Conditions, "Ready")
			rs.Stalled = apimeta.FindStatusCondition(hr.Status.Conditions, "Stalled")
			rs.LastAttemptedRevision = hr.Status.LastAttemptedRevision
			if latest := hr.Status.History.Latest(); latest != nil {
				rs.HistoryVersion = latest.ChartVersion
			}
			// Retries count for the generation helm-controller last attempted; a new
			// spec resets them.
			if rem := hr.GetActiveRemediation(); rem != nil && hr.Status.LastAttemptedGeneration == hr.Generation {
				rs.RetriesExhausted = rem.RetriesExhausted(&hr)
				rs.LastAction, rs.Failures = string(hr.Status.LastAttemptedReleaseAction), rem.GetFailureCount(&hr)
			}
		}
		s.observed.Releases = append(s.observed.Releases, rs)
	}
	return nil
}

// argoApplier reads Argo CD's Applications (evatenant_argocd.go).
type argoApplier struct{ r *EvaTenantReconciler }

func (a argoApplier) observeDelivery(ctx context.Context, s *scope) error {
	return a.r.observeApplications(ctx, s)
}

func (a argoApplier) observeModules(ctx context.Context, s *scope, rendered map[string]string) error {
	return a.r.observeModuleApplications(ctx, s, rendered)
}
