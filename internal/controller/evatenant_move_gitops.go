package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/saga"
)

// A move in GitOps mode: each cell's operator publishes to its cell's tree, which the
// cell's own Flux (or Argo CD) applies. The target publishes the tenant as a new one
// and records what it published in status.move.targetPublished. The source takes the
// tenant out of its tree with the decommission saga's steps (saga.Next), led by
// TrafficRemoved: the tree without the Ingress, applied, then the drain. The source's
// steps are recorded in the tenant's own status (decommissionStep, revision,
// appliedDigest: the record of what this cell published), so a tenant deleted during
// the move resumes the saga where the move left it.

// targetCopy is the copy of t the move's target provisions or removes: its status is
// the target's own, empty but for what it published (status.move.targetPublished).
func (r *EvaTenantReconciler) targetCopy(t *evav1.EvaTenant) *evav1.EvaTenant {
	copied := t.DeepCopy()
	copied.Status = evav1.EvaTenantStatus{Cell: r.Cell}
	if p := t.Status.Move.TargetPublished; p != nil {
		copied.Status.Revision, copied.Status.AppliedDigest, copied.Status.DecommissionStep = p.Revision, p.AppliedDigest, p.DecommissionStep
	}
	return copied
}

// publicationOf is what st records as published, in GitOps mode (nil otherwise).
func (r *EvaTenantReconciler) publicationOf(st *evav1.EvaTenantStatus) *evav1.Publication {
	if r.GitOps == nil || st.Revision == "" && st.AppliedDigest == "" && st.DecommissionStep == "" {
		return nil
	}
	return &evav1.Publication{Revision: st.Revision, AppliedDigest: st.AppliedDigest, DecommissionStep: st.DecommissionStep}
}

// unpublishMoveSource takes t out of this cell's tree, the move's source, one saga step
// per reconcile: the traffic first, then, once the drain is over, the rest. Once its
// namespace is pruned it records sourceRemovedAt.
func (r *EvaTenantReconciler) unpublishMoveSource(ctx context.Context, t *evav1.EvaTenant) (ctrl.Result, error) {
	mv := t.Status.Move
	s := &scope{tenant: t.DeepCopy(), log: ctrl.LoggerFrom(ctx).WithValues("move", "source")}
	if err := r.resolveRelease(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	drainLeft := r.moveDrain()
	if mv.TrafficMovedAt != nil {
		drainLeft -= r.now().Sub(mv.TrafficMovedAt.Time)
	}
	d, err := r.stepGitOps(ctx, s, &copyRemoval{source: true, drained: drainLeft <= 0, keepStreams: true})
	if err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.NewTime(r.now())
	res := ctrl.Result{RequeueAfter: WaitDeletion}
	trafficMovedAt, removedAt := mv.TrafficMovedAt, mv.SourceRemovedAt
	switch d.Action {
	case saga.Drain:
		if trafficMovedAt == nil {
			trafficMovedAt = &now
		}
		res.RequeueAfter = max(r.moveDrain()-now.Sub(trafficMovedAt.Time), time.Second)
		d.Message = fmt.Sprintf("traffic taken off cell %s at %s; draining for %s", r.Cell,
			trafficMovedAt.UTC().Format("15:04:05"), r.moveDrain())
	case saga.Finish:
		removedAt, res = &now, ctrl.Result{}
		d.Message = ""
		r.GitOps.forget(t.UID)
	}
	published := s.tenant.Status
	return res, r.reportMoveStatus(ctx, t, func(st *evav1.EvaTenantStatus) {
		st.Revision, st.AppliedDigest, st.DecommissionStep = published.Revision, published.AppliedDigest, published.DecommissionStep
		st.Move.TrafficMovedAt, st.Move.SourceRemovedAt, st.Move.SourceMessage = trafficMovedAt, removedAt, d.Message
	})
}

// unpublishMoveTarget takes this cell's copy of t (a cancelled move, or a tenant
// decommissioned or deleted during its move: retired) out of its tree, one saga step per
// reconcile, recording the steps in targetPublished and, once the copy's namespace is
// pruned, targetRemovedAt. The streams the operator manages go only with a retired
// tenant.
func (r *EvaTenantReconciler) unpublishMoveTarget(ctx context.Context, t *evav1.EvaTenant, retired bool) (ctrl.Result, error) {
	copied := r.targetCopy(t)
	s := &scope{tenant: copied, log: ctrl.LoggerFrom(ctx).WithValues("move", "target")}
	if err := r.resolveRelease(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	d, err := r.stepGitOps(ctx, s, &copyRemoval{keepStreams: !retired})
	if err != nil {
		return ctrl.Result{}, err
	}
	res := ctrl.Result{RequeueAfter: WaitDeletion}
	var removedAt *metav1.Time
	if d.Action == saga.Finish {
		now := metav1.NewTime(r.now())
		removedAt, res, d.Message = &now, ctrl.Result{}, ""
		r.GitOps.forget(t.UID)
	}
	return res, r.reportMove(ctx, t, func(m *evav1.Move) {
		m.TargetPublished, m.TargetMessage, m.TargetRemovedAt = r.publicationOf(&copied.Status), d.Message, removedAt
	})
}
