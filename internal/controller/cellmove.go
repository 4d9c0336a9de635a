package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
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
//     target's operator now reports the tenant's conditions.

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
	switch {
	case mv.Step == evav1.MoveProvisioningTarget && mv.TargetPhase == evav1.PhaseActive:
		t.Status.Move.Step = evav1.MoveRemovingSource
		defer p.event(t, corev1.EventTypeNormal, status.EventMoveTargetActive, "Active on cell %s; removing it from cell %s", mv.To, mv.From)
	case mv.Step == evav1.MoveRemovingSource && mv.SourceRemovedAt != nil:
		t.Status.Cell, t.Status.Move = mv.To, nil
		defer p.event(t, corev1.EventTypeNormal, status.EventMoveComplete, "Moved from cell %s to cell %s in %s", mv.From, mv.To,
			mv.SourceRemovedAt.Sub(mv.StartedAt.Time).Round(1e9))
	default:
		return nil
	}
	if err := p.Status().Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("advancing the move of %s/%s: %w", t.Namespace, t.Name, err)
	}
	if t.Status.Move == nil {
		return p.labelCells(ctx, t, t.Status.Cell)
	}
	return nil
}
