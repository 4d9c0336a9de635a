package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/rollout"
)

// resolveRelease finds the platform releases that reached the tenant (the EvaRollouts
// that admitted it), keeps the newest for the status and sets the tenant as it renders:
// each module it does not pin at the version of the newest of them naming it. A tenant
// no release reached keeps the catalog's versions, whatever newer releases exist.
func (r *EvaTenantReconciler) resolveRelease(ctx context.Context, s *scope) error {
	var list evav1.EvaRolloutList
	t := s.tenant
	if err := r.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return fmt.Errorf("listing rollouts: %w", err)
	}
	releases := rollout.Releases(list.Items, t.Namespace, t.Name, t.UID)
	s.rendered = rollout.WithReleases(t, releases, r.Renderer.Catalog.ModulesOf(t.Spec.Tier))
	s.release = ""
	if n := len(releases); n > 0 {
		s.release = releases[n-1].Name
	}
	return nil
}

// rolloutAdmissions wakes the tenants a rollout admits or stops listing (created,
// changed or deleted), and no others: a rollout's progress does not wake the fleet.
var rolloutAdmissions = handler.TypedFuncs[client.Object, reconcile.Request]{
	CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueAdmitted(q, nil, e.Object)
	},
	UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueAdmitted(q, e.ObjectOld, e.ObjectNew)
	},
	DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueAdmitted(q, nil, e.Object)
	},
}

// enqueueAdmitted enqueues the tenants listed by now and not by before (all of now's
// when before is nil), and those before listed that now does not.
func enqueueAdmitted(q workqueue.TypedRateLimitingInterface[reconcile.Request], before, now client.Object) {
	listed := func(o client.Object) map[types.NamespacedName]bool {
		out := map[types.NamespacedName]bool{}
		ro, ok := o.(*evav1.EvaRollout)
		if !ok {
			return out
		}
		for _, ws := range ro.Status.Waves {
			for _, e := range ws.Updated {
				out[types.NamespacedName{Namespace: ro.Namespace, Name: e.Name}] = true
			}
		}
		return out
	}
	old, cur := listed(before), listed(now)
	for key := range cur {
		if !old[key] {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	for key := range old {
		if !cur[key] {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
}
