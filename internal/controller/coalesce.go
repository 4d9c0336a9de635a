package controller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// CoalesceWindow is how long a change of a tenant's objects waits before it wakes the
// tenant. The changes of one burst then cost one reconcile: the watch events of the
// reconcile's own applies (a dozen objects created, which would otherwise queue the
// tenant again while it is being reconciled), the streams and releases turning Ready
// together. A tenant's own spec changes, and its quota's enforcement (the one event
// its workloads wait for), are not delayed.
const CoalesceWindow = 500 * time.Millisecond

// coalesced is an event handler that queues the tenants toTenants maps an object to,
// each after window. controller-runtime's priority queue keeps a queued tenant's
// earliest time, so any number of events within the window wake it once; the events
// of the initial list and of resyncs keep their low priority (handler.Funcs sets it),
// so a restart's look at every tenant does not hold up a changed one.
func coalesced(toTenants handler.MapFunc, window time.Duration) handler.EventHandler {
	queue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objects ...client.Object) {
		for _, o := range objects {
			for _, req := range toTenants(ctx, o) {
				q.AddAfter(req, window)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, q, e.Object)
		},
		// Before and after the change: a label change can move it to another tenant.
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, q, e.Object)
		},
	}
}
