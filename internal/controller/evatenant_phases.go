package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
)

// phase is one step of bringing a tenant toward its spec (Cluster API's shape). It reads
// and writes the scope; an error ends the reconcile (retried with backoff), and so does
// a phase that set scope.done because it decided the outcome.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// provisionPhases are the steps of a reconcile of a live tenant, with the mode's own
// steps chosen once: apply (pure cluster) or publish (GitOps), JetStream streams ensured
// by the operator (direct messaging), what Flux or Argo CD applied read back (GitOps).
func (r *EvaTenantReconciler) provisionPhases() []phase {
	r.phasesOnce.Do(func() {
		deliver := r.applyPhase
		if r.GitOps != nil {
			deliver = r.publishPhase
		}
		phases := []phase{r.validatePhase, r.startPhase, r.renderPhase, deliver}
		switch {
		case r.directMessaging():
			phases = append(phases, r.streamsPhase)
		case r.Accounts != nil:
			phases = append(phases, r.accountPhase)
		}
		if r.Accounts != nil && r.MoveFrom != nil {
			phases = append(phases, r.movePhase)
		}
		phases = append(phases, r.observePhase)
		if r.GitOps != nil {
			phases = append(phases, r.observeDeliveryPhase)
		}
		r.phases = append(phases, r.statusPhase)
	})
	return r.phases
}

// runPhases runs phases in order until one fails or decides the outcome, and merges
// their results: the soonest requeue asked for wins.
func runPhases(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	var merged ctrl.Result
	for _, p := range phases {
		res, err := p(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		merged = soonest(merged, res)
		if s.done {
			break
		}
	}
	return merged, nil
}

// soonest merges two results: a requeue asked for by either stands, the earlier one.
func soonest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	}
	return a
}

// validatePhase refuses a spec the catalog does not allow: the tenant is Failed and
// Stalled until the spec changes (no requeue: the new spec triggers the next reconcile).
func (r *EvaTenantReconciler) validatePhase(_ context.Context, s *scope) (ctrl.Result, error) {
	if errs := r.Renderer.Catalog.Validate(s.tenant); len(errs) > 0 {
		problems := make([]string, len(errs))
		for i, e := range errs {
			problems[i] = e.Error()
		}
		r.markInvalid(s, status.ProblemsMessage(problems))
		s.done = true
	}
	return ctrl.Result{}, nil
}

// startPhase records when provisioning of this generation started (and says so once).
func (r *EvaTenantReconciler) startPhase(_ context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	if t.Status.ProvisioningStartedAt == nil || t.Status.ObservedGeneration != t.Generation && t.Status.Phase == evav1.PhaseActive {
		now := metav1.NewTime(r.now())
		t.Status.ProvisioningStartedAt = &now
		t.Status.FirstTrue = nil
		s.event(corev1.EventTypeNormal, status.EventProvisioningStarted, "Provisioning tenant %s (%s, wave %d)", t.Spec.CapsuleCode, t.Spec.Tier, t.Spec.WaveOrDefault())
	}
	return ctrl.Result{}, nil
}

// renderPhase renders the tenant's bundle and its digest.
func (r *EvaTenantReconciler) renderPhase(_ context.Context, s *scope) (ctrl.Result, error) {
	start := time.Now()
	b, err := r.Renderer.Bundle(s.rendered)
	if r.Metrics != nil {
		r.Metrics.RenderSeconds.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		r.markInvalid(s, err.Error())
		s.done = true
		return ctrl.Result{}, nil
	}
	s.bundle = b
	manifest, err := b.Manifest()
	if err != nil {
		return ctrl.Result{}, err
	}
	// The encrypted Secrets are part of what is applied (pure-cluster mode decrypts
	// them): a rotated value is a new digest, applied at once.
	h := sha256.New()
	h.Write(manifest)
	for _, secret := range s.tenant.Spec.Secrets {
		h.Write([]byte(secret.Name + "\x00" + secret.Sops + "\x00"))
	}
	s.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return ctrl.Result{}, nil
}

// applyPhase applies the bundle (pure-cluster mode). A failed apply is not the end of
// the reconcile: the tenant's objects are still read and the condition says what failed;
// statusPhase returns the error for a retry with backoff.
func (r *EvaTenantReconciler) applyPhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, err := r.delivered(s, r.applyBundle(ctx, s))
	if s.observed.Applied.Waiting != "" {
		// The quota's status change wakes the tenant too; this is the fallback.
		res = soonest(res, ctrl.Result{RequeueAfter: QuotaRetry})
	}
	return res, err
}

// publishPhase publishes the tenant's files for Flux (GitOps mode), like applyPhase.
func (r *EvaTenantReconciler) publishPhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, err := r.delivered(s, r.publishTenant(ctx, s))
	if s.publishWait > 0 {
		res = soonest(res, ctrl.Result{RequeueAfter: s.publishWait})
	}
	return res, err
}

func (r *EvaTenantReconciler) delivered(s *scope, err error) (ctrl.Result, error) {
	if errors.Is(err, errNamespaceInUse) {
		r.markStalled(s, status.ReasonNamespaceInUse, err.Error())
		s.done = true
		return ctrl.Result{RequeueAfter: r.requeueAfter(evav1.PhaseFailed)}, nil
	}
	s.deliverErr = err
	return ctrl.Result{}, nil
}

// streamsPhase ensures the tenant's streams in JetStream (direct messaging mode).
func (r *EvaTenantReconciler) streamsPhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.Accounts != nil && r.awaitsPublish(s) {
		return ctrl.Result{}, nil
	}
	r.ensureStreams(ctx, s)
	if s.observed.MessagingError != "" {
		return ctrl.Result{RequeueAfter: MessagingRetry}, nil // NATS away: back off, then look again
	}
	return ctrl.Result{}, nil
}

// observePhase reads the tenant's objects.
func (r *EvaTenantReconciler) observePhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, r.observe(ctx, s)
}

// observeDeliveryPhase reads what Flux or Argo CD applied of the tenant (GitOps mode).
func (r *EvaTenantReconciler) observeDeliveryPhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, r.observeDelivery(ctx, s)
}

// statusPhase judges what was observed (status.Compute) as the reconcile's outcome,
// written by the status patch, and says when to look again. A failed apply or publish
// is returned for a retry with backoff: the conditions say what failed, and the
// generation is not settled.
func (r *EvaTenantReconciler) statusPhase(_ context.Context, s *scope) (ctrl.Result, error) {
	res := status.Compute(s.observed)
	s.outcome = status.Outcome{Observed: &res, Release: s.release, Settled: s.deliverErr == nil}
	if s.deliverErr != nil {
		return ctrl.Result{}, s.deliverErr
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(res.Phase)}, nil
}
