package saga

import (
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// A move between cells (docs/cells.md#moves) is a second saga around the first: the
// target cell provisions the tenant while the source keeps serving it; once the target
// is Active, the source takes its copy apart with Next's steps, its traffic first; once
// the source's copy is gone, the tenant is the target's. NextMove decides the move's
// next step and MovePart each cell's part in it, for every driver of moves: the fleet
// operator (status.move), the cells' operators and evactl (move records in the cells'
// trees). What differs between them is a MovePolicy.

// DefaultMoveDrain is how long a move waits, after taking the tenant's traffic off the
// source cell, before removing the tenant there: for requests in flight to finish and
// consumers to take what the source's streams still hold.
const DefaultMoveDrain = time.Minute

// MoveObserved is what a move's next step depends on.
type MoveObserved struct {
	// Move is the move as recorded.
	Move evav1.Move
	// TargetActive: the tenant is Active on the target (the target's report, or what
	// the target's cluster shows).
	TargetActive bool
	// Retired: the tenant is being decommissioned or deleted, and may be.
	Retired bool
	// AllowsSource and AllowsTarget: the tenant's placement admits the move's cells.
	AllowsSource, AllowsTarget bool
}

// MovePolicy is how the drivers of moves differ.
type MovePolicy struct {
	// Cancellable: a move whose tenant's placement allows the source again, and not the
	// target, is undone while the target provisions (the operator's). A move of tenant
	// files is neither undone nor redirected: the trees record one move at a time.
	Cancellable bool
	// TargetServesThroughout: each step of the source's removal waits for the target to
	// be Active again (evactl, which reads the clusters at each publish, has no report
	// that stays true); the operator judges it once, at the hand-over.
	TargetServesThroughout bool
}

// MoveAction is what a move's driver does next.
type MoveAction int

const (
	// MoveWait: the cells are doing their part; look again later.
	MoveWait MoveAction = iota
	// MoveCancel: record the move cancelled; the target removes its copy.
	MoveCancel
	// MoveRemoveSource: the target is Active; the source takes its copy apart.
	MoveRemoveSource
	// MoveComplete: the source's copy is gone; the tenant is the target's.
	MoveComplete
	// MoveClear: a cancelled move, or a retired tenant's, whose target copy is gone:
	// the move is over, the tenant the source's (or gone with its decommission).
	MoveClear
)

// MoveDecision is a move's next step.
type MoveDecision struct {
	Action MoveAction
	// Message says what the move waits for.
	Message string
}

// NextMove decides a move's next step.
func NextMove(o MoveObserved, p MovePolicy) MoveDecision {
	mv := o.Move
	provisioning := mv.Step == evav1.MoveProvisioningTarget || mv.Step == ""
	switch {
	case mv.TargetRemovedAt != nil && (mv.Cancelled || o.Retired):
		return MoveDecision{Action: MoveClear}
	case provisioning && p.Cancellable && !mv.Cancelled && !o.Retired && o.AllowsSource && !o.AllowsTarget:
		return MoveDecision{Action: MoveCancel}
	case mv.Cancelled || o.Retired:
		return MoveDecision{Action: MoveWait, Message: "waiting for cell " + mv.To + " to remove its copy"}
	case mv.SourceRemovedAt != nil:
		return MoveDecision{Action: MoveComplete}
	case !o.TargetActive && (provisioning || p.TargetServesThroughout):
		return MoveDecision{Action: MoveWait, Message: "waiting for it to be Active on cell " + mv.To}
	case provisioning:
		return MoveDecision{Action: MoveRemoveSource}
	}
	return MoveDecision{Action: MoveWait, Message: "waiting for cell " + mv.From + " to remove its copy"}
}

// MovePart is a cell's part in a move now.
type MovePart int

const (
	// PartServe: no move concerns this cell's copy now; it serves (or decommissions)
	// the tenant as usual. The source does while the target provisions.
	PartServe MovePart = iota
	// PartProvisionTarget: provision the tenant here, the move's target, as a new one.
	PartProvisionTarget
	// PartRemoveSource: take this cell's copy apart, the move's source.
	PartRemoveSource
	// PartRemoveTarget: remove this cell's copy, the target of a cancelled move or of a
	// retired tenant's.
	PartRemoveTarget
	// PartNone: this cell's part is done; the fleet operator takes the next step.
	PartNone
)

// PartOf is cell's part in move mv (nil: none) of a tenant, retired or not.
func PartOf(mv *evav1.Move, cell string, retired bool) MovePart {
	switch {
	case mv == nil || (mv.From == cell && (mv.Step == evav1.MoveProvisioningTarget || retired)):
		return PartServe
	case mv.To == cell && (mv.Cancelled || retired):
		if mv.TargetRemovedAt != nil {
			return PartNone
		}
		return PartRemoveTarget
	case mv.To == cell && mv.Step == evav1.MoveProvisioningTarget:
		return PartProvisionTarget
	case mv.From == cell && mv.Step == evav1.MoveRemovingSource && mv.SourceRemovedAt == nil:
		return PartRemoveSource
	}
	return PartNone
}
