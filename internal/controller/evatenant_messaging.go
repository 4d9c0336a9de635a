package controller

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// ensureStreams creates (or updates) the tenant's two streams in JetStream directly and
// records their real existence for the Provisioned condition. NATS being unreachable
// is not an error of the reconcile: the condition says MessagingUnavailable and the
// tenant is looked at again shortly.
func (r *EvaTenantReconciler) ensureStreams(ctx context.Context, s *scope) {
	t := s.tenant
	limits := r.Renderer.Catalog.Tiers[t.Spec.Tier].Streams
	for _, spec := range messaging.TenantStreams(t.Spec.CapsuleCode, limits) {
		state := status.StreamState{Name: "JetStream/" + spec.Name}
		if _, err := r.Streams.Ensure(ctx, spec); err != nil {
			s.log.Error(err, "ensuring stream", "stream", spec.Name)
			if errors.Is(err, messaging.ErrUnavailable) {
				s.observed.MessagingError = "NATS JetStream unreachable while ensuring " + spec.Name + ": " + err.Error()
			} else {
				s.observed.MessagingError = "could not ensure stream " + spec.Name + ": " + err.Error()
			}
		} else if ok, err := r.Streams.Exists(ctx, spec.Name); err != nil {
			s.log.Error(err, "looking up stream", "stream", spec.Name)
			s.observed.MessagingError = "could not look up stream " + spec.Name + ": " + err.Error()
		} else {
			state.Found = ok
			state.Ready = readyCondition(ok)
		}
		s.observed.Streams = append(s.observed.Streams, state)
	}
}

// deleteStreams removes the tenant's streams from JetStream (saga step 1, direct mode).
func (r *EvaTenantReconciler) deleteStreams(ctx context.Context, code string) error {
	var errs []error
	for _, name := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if err := r.Streams.Delete(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func readyCondition(ok bool) *metav1.Condition {
	if ok {
		return &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Exists", Message: "stream exists in JetStream"}
	}
	return &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Missing", Message: "stream not found in JetStream"}
}
