package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
)

// markUnserved records on a tenant of another operator version that no running
// operator serves it (Presence): its Ready condition turns Unknown, reason Unserved,
// instead of keeping the last Ready its operator wrote, and a rollout passes over it.
// A tenant some running operator serves, or one outside the namespaces this operator
// serves, is left alone.
func (r *EvaTenantReconciler) markUnserved(ctx context.Context, t *evav1.EvaTenant) error {
	reason := r.Presence.Unserved(t)
	if reason == "" || !r.namespaceAllowed(t.Namespace) || !t.DeletionTimestamp.IsZero() {
		return nil
	}
	if c := findCondition(t, evav1.ConditionReady); c.Status == metav1.ConditionUnknown && c.Reason == status.ReasonUnserved && c.Message == reason {
		return nil
	}
	base := t.DeepCopy()
	apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: evav1.ConditionReady, Status: metav1.ConditionUnknown,
		Reason: status.ReasonUnserved, Message: reason, ObservedGeneration: t.Generation})
	if err := r.Status().Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("marking tenant %s unserved: %w", t.Name, err))
	}
	r.event(t, corev1.EventTypeWarning, status.ReasonUnserved, "%s", reason)
	return nil
}

// unservedWakeups wakes, whenever Presence sees operator versions go, the tenants it
// says are unserved now (their operator's going changed no object of theirs).
func (r *EvaTenantReconciler) unservedWakeups() chan event.GenericEvent {
	ch := make(chan event.GenericEvent, 1024)
	r.Presence.OnChange = func(ctx context.Context) {
		var list evav1.EvaTenantList
		if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return // the next change, or the tenants' own, wakes them
		}
		for i := range list.Items {
			t := &list.Items[i]
			if r.Presence.Unserved(t) == "" {
				continue
			}
			wake := &evav1.EvaTenant{}
			wake.SetNamespace(t.Namespace)
			wake.SetName(t.Name)
			select {
			case ch <- event.GenericEvent{Object: wake}:
			default: // full: those queued already wake the controller
			}
		}
	}
	return ch
}
