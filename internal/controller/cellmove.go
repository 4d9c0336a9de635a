package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/placement"
	"github.com/aidonow/eva/internal/saga"
	"github.com/aidonow/eva/internal/status"
)

// A move between cells (docs/cells.md#moves) is a saga the fleet operator drives
// through status.move, each step done by a cell's operator and each resumable:
//
//  1. ProvisioningTarget: the fleet operator records the move. The target cell's
//     operator provisions the tenant there, as a new tenant, while the source keeps
//     serving it, and reports the phase it reaches (status.move.targetPhase).
//  2. RemovingSource: once the target reports Active, the source cell's operator takes
//     the tenant's traffic away (its Ingress first), waits out the drain, removes the
//     rest there and records status.move.sourceRemovedAt.
//  3. The fleet operator moves status.cell to the target and clears the move: the
//     target's operator now reports the tenant's conditions (in GitOps mode, what it
//     published becomes the tenant's revision and appliedDigest).
//
// A move whose tenant's placement allows the source again before the target is Active
// is cancelled (status.move.cancelled): the target's operator removes its copy and
// records targetRemovedAt, and the fleet operator clears the move. A tenant deleted or
// decommissioned during its move has its copy on the target removed the same way, and
// its decommission on the source finishes only once that copy is gone.

// startMove records a move of t to cell to.
func (p *CellPlacer) startMove(ctx context.Context, t *evav1.EvaTenant, to string) error {
	base := t.DeepCopy()
	from := t.Status.Cell
	t.Status.Move = &evav1.Move{From: from, To: to, Step: evav1.MoveProvisioningTarget, StartedAt: metav1.Now()}
	if err := p.Status().Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("starting the move of %s/%s to cell %s: %w", t.Namespace, t.Name, to, err)
	}
	p.event(t, corev1.EventTypeNormal, status.EventMoveStarted, "Moving from cell %s to cell %s: provisioning on %s", from, to, to)
	return p.labelCells(ctx, t, from, to)
}

// advanceMove takes the move of t to its next step once the cell operators report the
// step before done.
func (p *CellPlacer) advanceMove(ctx context.Context, t *evav1.EvaTenant) error {
	mv := t.Status.Move
	if err := p.labelCells(ctx, t, mv.From, mv.To); err != nil {
		return err
	}
	base := t.DeepCopy()
	d := saga.NextMove(saga.MoveObserved{Move: *mv, TargetActive: mv.TargetPhase == evav1.PhaseActive, Retired: retiring(t),
		AllowsSource: p.allows(t, mv.From), AllowsTarget: p.allows(t, mv.To)}, saga.MovePolicy{Cancellable: true})
	switch d.Action {
	case saga.MoveClear:
		t.Status.Move = nil
		if mv.Cancelled {
			defer p.event(t, corev1.EventTypeNormal, status.EventMoveCancelled, "Move to cell %s undone; the tenant stays on cell %s", mv.To, mv.From)
		}
	case saga.MoveCancel:
		t.Status.Move.Cancelled = true
	case saga.MoveRemoveSource:
		t.Status.Move.Step = evav1.MoveRemovingSource
		defer p.event(t, corev1.EventTypeNormal, status.EventMoveTargetActive, "Active on cell %s; removing it from cell %s", mv.To, mv.From)
	case saga.MoveComplete:
		t.Status.Cell, t.Status.Move = mv.To, nil
		if p := mv.TargetPublished; p != nil {
			// GitOps mode: what the target published is now the tenant's record.
			t.Status.Revision, t.Status.AppliedDigest, t.Status.DecommissionStep = p.Revision, p.AppliedDigest, p.DecommissionStep
		}
		defer p.event(t, corev1.EventTypeNormal, status.EventMoveComplete, "Moved from cell %s to cell %s in %s", mv.From, mv.To,
			mv.SourceRemovedAt.Sub(mv.StartedAt.Time).Round(1e9))
	default:
		return nil // the cells' operators do their parts
	}
	if err := p.Status().Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("advancing the move of %s/%s: %w", t.Namespace, t.Name, err)
	}
	if t.Status.Move == nil {
		return p.labelCells(ctx, t, t.Status.Cell)
	}
	return nil
}

// allows says whether t's spec.placement admits the environment's cell named cell.
func (p *CellPlacer) allows(t *evav1.EvaTenant, cell string) bool {
	req := placement.Request{}
	if pl := t.Spec.Placement; pl != nil {
		req.Cell, req.Labels = pl.Cell, pl.Labels
	}
	for _, c := range p.Env.Settings.PlacementCells() {
		if c.Name == cell {
			return req.Allows(c)
		}
	}
	return false
}
