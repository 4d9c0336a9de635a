package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/saga"
	"github.com/aidonow/eva/internal/status"
)

// concerns says whether this cell's operator has anything to do with t: it is placed
// on this cell, or moving to it.
func (r *EvaTenantReconciler) concerns(t *evav1.EvaTenant) bool {
	return t.Status.Cell == r.Cell || (t.Status.Move != nil && t.Status.Move.To == r.Cell)
}

// retiring says whether t is being decommissioned or deleted, and may be:
// spec.deletionProtection refuses both, and a protected tenant's move goes on.
func retiring(t *evav1.EvaTenant) bool {
	return (!t.DeletionTimestamp.IsZero() || t.Spec.LifecycleOrDefault() == evav1.LifecycleDecommissioned) && !t.Spec.DeletionProtection
}

// moveStep runs this cell's part of a move of t (cellmove.go), if it has one now;
// handled says the reconcile is done with t. The source serves the tenant as usual
// while the target provisions it.
func (r *EvaTenantReconciler) moveStep(ctx context.Context, t *evav1.EvaTenant) (res ctrl.Result, handled bool, err error) {
	retired := retiring(t)
	switch saga.PartOf(t.Status.Move, r.Cell, retired) {
	case saga.PartServe:
		// The source serves the tenant while the target provisions, and runs its
		// decommission as usual (finishDecommission waits for the target's copy).
		return ctrl.Result{}, false, nil
	case saga.PartRemoveTarget:
		res, err := r.removeMoveTarget(ctx, t, retired)
		return res, true, err
	case saga.PartProvisionTarget:
		res, err := r.provisionMoveTarget(ctx, t)
		return res, true, err
	case saga.PartRemoveSource:
		res, err := r.removeMoveSource(ctx, t)
		return res, true, err
	}
	return ctrl.Result{}, true, nil // the fleet operator takes the next step
}

// provisionMoveTarget provisions t on this cell, the move's target, as a new tenant: the
// usual phases run on a copy whose status starts empty, and only the phase reached and
// its Ready message are written, into status.move (the tenant's conditions stay the
// source's until the move ends), with, in GitOps mode, what was published
// (targetPublished). Nothing else of the copy's bookkeeping is kept, so in pure-cluster
// mode each reconcile applies the bundle again; the move is short.
func (r *EvaTenantReconciler) provisionMoveTarget(ctx context.Context, t *evav1.EvaTenant) (ctrl.Result, error) {
	copied := r.targetCopy(t)
	s := &scope{tenant: copied, base: copied.DeepCopy(), log: ctrl.LoggerFrom(ctx).WithValues("move", "target")}
	if err := r.resolveRelease(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	res, err := runPhases(ctx, s, r.provisionPhases())
	status.Record(&copied.Status, s.outcome, t.Generation, metav1.NewTime(r.now()))
	ready := findCondition(copied, evav1.ConditionReady)
	if werr := r.reportMove(ctx, t, func(m *evav1.Move) {
		m.TargetPhase, m.TargetMessage = copied.Status.Phase, ready.Message
		m.TargetPublished = r.publicationOf(&copied.Status)
	}); werr != nil {
		return ctrl.Result{}, werr
	}
	return res, err
}

// removeMoveSource removes t from this cell, the move's source, once the target is
// Active: its Ingress first (the traffic then reaches the target only), then, after
// the drain, everything else, as the decommission saga removes it. JetStream streams
// the operator manages itself (direct messaging) are left: cells that share one NATS
// share them with the target.
func (r *EvaTenantReconciler) removeMoveSource(ctx context.Context, t *evav1.EvaTenant) (ctrl.Result, error) {
	if r.GitOps != nil {
		return r.unpublishMoveSource(ctx, t)
	}
	mv := t.Status.Move
	if mv.TrafficMovedAt == nil {
		for _, ref := range t.Status.Inventory {
			if ref.Kind == "Ingress" {
				if err := r.deleteRef(ctx, t, ref); err != nil {
					return ctrl.Result{}, fmt.Errorf("moving traffic off cell %s: %w", r.Cell, err)
				}
			}
		}
		now := metav1.NewTime(r.now())
		return ctrl.Result{RequeueAfter: r.moveDrain()}, r.reportMove(ctx, t, func(m *evav1.Move) { m.TrafficMovedAt = &now })
	}
	if left := r.moveDrain() - r.now().Sub(mv.TrafficMovedAt.Time); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	return r.removeCopy(ctx, t, "source", false, func(m *evav1.Move, at *metav1.Time) { m.SourceRemovedAt = at })
}

// removeMoveTarget removes this cell's copy of t (a cancelled move, or a tenant
// decommissioned or deleted during its move: retired), as the decommission saga
// removes it, and records targetRemovedAt. The JetStream streams the operator manages
// go only with a retired tenant: cells sharing one NATS share them with the source.
func (r *EvaTenantReconciler) removeMoveTarget(ctx context.Context, t *evav1.EvaTenant, retired bool) (ctrl.Result, error) {
	if r.GitOps != nil {
		return r.unpublishMoveTarget(ctx, t, retired)
	}
	return r.removeCopy(ctx, t, "target", retired, func(m *evav1.Move, at *metav1.Time) { m.TargetRemovedAt = at })
}

// removeCopy removes this cell's copy of t (the move's side, for the log) as the
// decommission saga removes it, the JetStream streams the operator manages too when
// jetStream says so, and once it is gone records the time with done.
func (r *EvaTenantReconciler) removeCopy(ctx context.Context, t *evav1.EvaTenant, side string, jetStream bool,
	done func(*evav1.Move, *metav1.Time)) (ctrl.Result, error) {
	s := &scope{tenant: t.DeepCopy(), log: ctrl.LoggerFrom(ctx).WithValues("move", side)}
	gone, res, err := r.removeAll(ctx, s, jetStream)
	if !gone || err != nil {
		return res, err
	}
	r.memo.forget(t.UID)
	r.lastApply.Delete(t.UID)
	r.statusWrites.Delete(t.UID)
	now := metav1.NewTime(r.now())
	return ctrl.Result{}, r.reportMove(ctx, t, func(m *evav1.Move) { done(m, &now) })
}

// moveDrain is MoveDrain, or saga.DefaultMoveDrain when unset.
func (r *EvaTenantReconciler) moveDrain() time.Duration {
	if r.MoveDrain > 0 {
		return r.MoveDrain
	}
	return saga.DefaultMoveDrain
}

// reportMove writes what update changes of t's status.move, guarded by the
// resourceVersion (a conflict is retried by the caller's requeue).
func (r *EvaTenantReconciler) reportMove(ctx context.Context, t *evav1.EvaTenant, update func(*evav1.Move)) error {
	return r.reportMoveStatus(ctx, t, func(st *evav1.EvaTenantStatus) { update(st.Move) })
}

// reportMoveStatus writes what update changes of t's status, guarded by the
// resourceVersion.
func (r *EvaTenantReconciler) reportMoveStatus(ctx context.Context, t *evav1.EvaTenant, update func(*evav1.EvaTenantStatus)) error {
	base := t.DeepCopy()
	update(&t.Status)
	if equality.Semantic.DeepEqual(base.Status, t.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("reporting the move of %s/%s: %w", t.Namespace, t.Name, err)
	}
	r.written.record(t, r.now()) // the source's steps change its appliedDigest
	return nil
}
