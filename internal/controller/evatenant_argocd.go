package controller

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// What the operator reads back from Argo CD in GitOps mode for an environment rendered
// for it (applier: argocd): the tenant's Applications, in Argo CD's namespace, found by
// name (and, for the decommission, by the capsule label).
//
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch

// argoCD reports whether the operator publishes for Argo CD: GitOps mode with an
// environment whose applier is argocd.
func (r *EvaTenantReconciler) argoCD() bool { return r.GitOps != nil && r.Renderer.ArgoCD() }

// application reads one Argo CD Application (nil when missing).
func (r *EvaTenantReconciler) application(ctx context.Context, key types.NamespacedName) (*argov1.Application, error) {
	var app argov1.Application
	found, err := r.get(ctx, key, &app)
	if err != nil || !found {
		return nil, err
	}
	return &app, nil
}

// observeApplications reads the tenant's foundation and workloads Applications and
// whether each synced the published revision (or a later one).
func (r *EvaTenantReconciler) observeApplications(ctx context.Context, s *scope) error {
	code := s.tenant.Spec.CapsuleCode
	g := &status.GitOpsState{}
	for _, k := range []struct {
		name  string
		state *status.DeliveryState
	}{{render.FoundationName(code), &g.Foundation}, {render.WorkloadsName(code), &g.Workloads}} {
		key := types.NamespacedName{Namespace: r.Renderer.Env.Settings.ArgoCD.Namespace, Name: k.name}
		app, err := r.application(ctx, key)
		if err != nil {
			return err
		}
		*k.state = status.ApplicationDelivery(key.String(), app)
		if app != nil {
			k.state.Applied, k.state.RevisionError = r.applied(ctx, s, k.state.LastAppliedRevision)
		}
	}
	s.observed.GitOps = g
	return nil
}

// observeModuleApplications reads each module's Application as its release state;
// rendered maps a module to the spec digest the tenant renders now.
func (r *EvaTenantReconciler) observeModuleApplications(ctx context.Context, s *scope, rendered map[string]string) error {
	t := s.tenant
	for _, module := range r.Renderer.Catalog.ModulesOf(t.Spec.Tier) {
		key := types.NamespacedName{Namespace: r.Renderer.Env.Settings.ArgoCD.Namespace,
			Name: render.ModuleApplicationName(t.Spec.CapsuleCode, module)}
		app, err := r.application(ctx, key)
		if err != nil {
			return err
		}
		s.observed.Releases = append(s.observed.Releases, status.ApplicationRelease(module, key.String(),
			r.Renderer.Catalog.ModuleVersion(s.rendered, module), rendered[module], app))
	}
	return nil
}

// applicationsLeft names the tenant's workloads and module Applications still in the
// cluster: each is deleted (its finalizer has Argo CD delete its resources first) once
// the root Application pruned it, so none left means the modules are uninstalled.
func (r *EvaTenantReconciler) applicationsLeft(ctx context.Context, code string) ([]string, error) {
	all, err := r.applicationsOf(ctx, code)
	return slices.DeleteFunc(all, func(name string) bool { return name == render.FoundationName(code) }), err
}

// applicationsOf names the tenant's Applications in the cluster, sorted.
func (r *EvaTenantReconciler) applicationsOf(ctx context.Context, code string) ([]string, error) {
	var apps argov1.ApplicationList
	if err := r.List(ctx, &apps, client.InNamespace(r.Renderer.Env.Settings.ArgoCD.Namespace),
		client.MatchingLabels{tenant.LabelCapsule: code}); err != nil {
		return nil, fmt.Errorf("listing the Applications of %s: %w", code, err)
	}
	names := make([]string, 0, len(apps.Items))
	for _, a := range apps.Items {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return names, nil
}
