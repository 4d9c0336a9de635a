package controller

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// capsuleCodeIndex indexes tenants by capsule code, to map a tenant's objects (which
// carry the capsule label) back to the tenant.
const capsuleCodeIndex = "spec.capsuleCode"

// CacheOptions restricts the cache of the watched and applied kinds to the objects Eva
// renders (those with the capsule label), so the operator's memory grows with its
// tenants, not with the cluster. The drift check reads the applied kinds from it
// (Secrets excepted: the operator does not read them), the kinds only it reads as their
// names and versions alone (versionOnlyKinds), the kinds whose status is read as their
// status and little else (statusKinds).
// Capsule-code claims (Leases) are cached from the claims namespace only, all of them:
// a capsule code is unique across shards.
// A sharded operator (shards.Sharded) caches only the tenants and rollouts of its shards
// and the objects rendered for them (which carry the tenant's shard label), so it neither
// sees nor reconciles another shard's tenants, and its memory grows with its shard.
//
// With argoCD (GitOps mode for Argo CD), the tenants' Argo CD Applications are cached
// (by the same labels) instead of Flux's kinds, which an Argo CD cluster may not have.
//
// With tenantNamespaces (--tenant-namespaces), EvaTenants and EvaRollouts are cached
// whole only from those namespaces; a tenant elsewhere is cached as the little the
// operator reads of it (unservedTenant), and a rollout elsewhere not at all: a
// requester in a namespace this operator does not serve cannot grow its memory.
func CacheOptions(claimsNamespace string, shards shard.Selector, argoCD bool, tenantNamespaces []string) cache.Options {
	hasCapsule, _ := labels.NewRequirement(tenant.LabelCapsule, selection.Exists, nil)
	claims := labels.NewSelector().Add(*hasCapsule)
	rendered := claims
	if reqs, selectable := shards.Labels().Requirements(); selectable {
		rendered = rendered.Add(reqs...)
	}
	byLabel := cache.ByObject{Label: rendered}
	byObject := map[client.Object]cache.ByObject{
		&corev1.Namespace{}:     byLabel,
		&corev1.ResourceQuota{}: {Label: rendered, Transform: slimResourceQuota()},
		&batchv1.Job{}:          {Label: rendered, Transform: slimJob()},
		&networkingv1.Ingress{}: {Label: rendered, Transform: statusOnly()},
		&nackv1beta2.Stream{}:   {Label: rendered, Transform: statusOnly()},
		&coordinationv1.Lease{}: {Label: claims, Namespaces: map[string]cache.Config{claimsNamespace: {}}},
	}
	for gvk := range versionOnlyKinds {
		byObject[metadataKey(gvk)] = cache.ByObject{Label: rendered, Transform: versionOnly()}
	}
	if argoCD {
		byObject[&argov1.Application{}] = byLabel
	} else {
		byObject[&helmv2.HelmRelease{}] = cache.ByObject{Label: rendered, Transform: statusOnly()}
		byObject[&sourcev1.HelmRepository{}] = byLabel
		byObject[&sourcev1.OCIRepository{}] = byLabel
		byObject[&kustomizev1.Kustomization{}] = byLabel
	}
	tenants, rollouts := cache.ByObject{}, cache.ByObject{}
	if shards.Sharded() {
		tenants.Label, rollouts.Label = shards.Labels(), shards.Labels()
	}
	if len(tenantNamespaces) > 0 {
		tenants.Namespaces = map[string]cache.Config{cache.AllNamespaces: {Transform: unservedTenant()}}
		rollouts.Namespaces = map[string]cache.Config{}
		for _, ns := range tenantNamespaces {
			tenants.Namespaces[ns], rollouts.Namespaces[ns] = cache.Config{}, cache.Config{}
		}
	}
	if tenants.Label != nil || tenants.Namespaces != nil {
		byObject[&evav1.EvaTenant{}], byObject[&evav1.EvaRollout{}] = tenants, rollouts
	}
	return cache.Options{
		// Nothing reads managedFields from the cache, so they are not kept.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         byObject,
	}
}

// SetupWithManager registers the reconciler: tenants, and the tenant's objects (found
// by the capsule label: Namespace, Jobs, Ingresses, Streams, HelmReleases and Flux
// Kustomizations or Argo CD Applications) requeue it a CoalesceWindow after their
// change; its quota's enforcement at once.
func (r *EvaTenantReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	tenants := cache.Cache(r.TenantCache)
	if tenants == nil {
		tenants = mgr.GetCache()
	}
	if err := tenants.IndexField(ctx, &evav1.EvaTenant{}, capsuleCodeIndex, func(o client.Object) []string {
		return []string{o.(*evav1.EvaTenant).Spec.CapsuleCode}
	}); err != nil {
		return fmt.Errorf("indexing tenants: %w", err)
	}
	toTenants := func(ctx context.Context, o client.Object) []reconcile.Request {
		code := o.GetLabels()[tenant.LabelCapsule]
		if code == "" {
			return nil
		}
		var list evav1.EvaTenantList
		// Read-only: the cache's own objects, not copies of them.
		if err := r.List(ctx, &list, client.MatchingFields{capsuleCodeIndex: code}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, t := range list.Items {
			if !r.namespaceAllowed(t.Namespace) {
				continue // ignored tenants are not woken by the objects of the code's owner
			}
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}})
		}
		return out
	}
	toTenant := coalesced(toTenants, CoalesceWindow)
	hasCapsule := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[tenant.LabelCapsule] != ""
	}))
	specChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, placementChanged)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("evatenant").
		Watches(&corev1.Namespace{}, toTenant, hasCapsule).
		Watches(&batchv1.Job{}, toTenant, hasCapsule).
		Watches(&networkingv1.Ingress{}, toTenant, hasCapsule).
		Watches(&nackv1beta2.Stream{}, toTenant, hasCapsule).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	if r.TenantCache == nil {
		b = b.For(&evav1.EvaTenant{}, builder.WithPredicates(specChanged)).Watches(&evav1.EvaRollout{}, rolloutAdmissions)
	} else {
		// A cell's operator: the tenants and releases are on the fleet cluster.
		b = b.WatchesRawSource(source.Kind[client.Object](r.TenantCache, &evav1.EvaTenant{}, &handler.EnqueueRequestForObject{}, specChanged)).
			WatchesRawSource(source.Kind[client.Object](r.TenantCache, &evav1.EvaRollout{}, rolloutAdmissions))
	}
	if r.argoCD() {
		// What Argo CD applied, and the modules it deployed.
		b = b.Watches(&argov1.Application{}, toTenant, hasCapsule)
	} else {
		// What Flux applied (GitOps mode), and the modules helm-controller deployed.
		b = b.Watches(&helmv2.HelmRelease{}, toTenant, hasCapsule).Watches(&kustomizev1.Kustomization{}, toTenant, hasCapsule)
	}
	if r.GitOps == nil {
		// kube-controller-manager recording the quota's hard limits releases the
		// workloads (pure-cluster mode; in GitOps mode Flux's health check waits). Only
		// that change wakes the tenant, not the usage moving with every pod.
		b = b.Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestsFromMapFunc(toTenants), hasCapsule, builder.WithPredicates(quotaHardChanged))
	}
	if r.GitOps != nil {
		// A finished publish wakes its tenant: reconciles do not wait for their batch.
		b = b.WatchesRawSource(source.Channel(r.GitOps.wakeups(), &handler.EnqueueRequestForObject{}))
	}
	if r.Presence != nil {
		// An operator version gone leaves its tenants unserved.
		b = b.WatchesRawSource(source.Channel(r.unservedWakeups(), &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// placementChanged lets through a change of the tenant's cell or of its move, which
// the fleet operator writes into the status: each step of a move is another cell
// operator's to take (cellmove.go).
var placementChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldT, okOld := e.ObjectOld.(*evav1.EvaTenant)
	newT, okNew := e.ObjectNew.(*evav1.EvaTenant)
	return okOld && okNew && (oldT.Status.Cell != newT.Status.Cell || !equality.Semantic.DeepEqual(oldT.Status.Move, newT.Status.Move))
}}

// quotaHardChanged lets through a quota's creation, deletion and a change of its
// enforced limits (status.hard), not the usage updates.
var quotaHardChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldQ, okOld := e.ObjectOld.(*corev1.ResourceQuota)
	newQ, okNew := e.ObjectNew.(*corev1.ResourceQuota)
	return !okOld || !okNew || !equality.Semantic.DeepEqual(oldQ.Status.Hard, newQ.Status.Hard)
}}
