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
// together. A tenant's own spec changes are not delayed.
const CoalesceWindow = time.Second

// coalesced is an event handler that queues the tenants toTenants maps an object to,
// each after window; the queue keeps a queued tenant's earliest time, so any number of
// events within the window wake it once.
type coalesced struct {
	toTenants handler.MapFunc
	window    time.Duration
}

var _ handler.EventHandler = coalesced{}

// Create queues the tenants of a new object.
func (c coalesced) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.queue(ctx, q, e.Object)
}

// Update queues the tenants of the object before and after the change (a label change
// can move it from one tenant to another).
func (c coalesced) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.queue(ctx, q, e.ObjectOld, e.ObjectNew)
}

// Delete queues the tenants of a deleted object.
func (c coalesced) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.queue(ctx, q, e.Object)
}

// Generic queues the tenants of the object.
func (c coalesced) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.queue(ctx, q, e.Object)
}

func (c coalesced) queue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objects ...client.Object) {
	for _, o := range objects {
		if o == nil {
			continue
		}
		for _, req := range c.toTenants(ctx, o) {
			q.AddAfter(req, c.window)
		}
	}
}
