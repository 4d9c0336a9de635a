package saga

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

var (
	operatorMoves = MovePolicy{Cancellable: true}
	fileMoves     = MovePolicy{TargetServesThroughout: true}
)

// moving is a move of a tenant from cell a to b at a step, its placement allowing b
// only.
func moving(step evav1.MoveStep) MoveObserved {
	return MoveObserved{Move: evav1.Move{From: "a", To: "b", Step: step}, AllowsTarget: true}
}

// TestNextMoveTakesEachStep walks a move for both drivers: the operator's (status.move,
// cancellable) and evactl's (file moves, the target judged at each step).
func TestNextMoveTakesEachStep(t *testing.T) {
	at := metav1.Now()
	for name, c := range map[string]struct {
		o      MoveObserved
		edit   func(*MoveObserved)
		policy MovePolicy
		want   MoveAction
	}{
		"provisioning, not Active yet: wait": {moving(evav1.MoveProvisioningTarget), nil, operatorMoves, MoveWait},
		"Active on the target: the source goes": {moving(evav1.MoveProvisioningTarget), func(o *MoveObserved) { o.TargetActive = true },
			operatorMoves, MoveRemoveSource},
		"a file move not yet stepped is provisioning": {moving(""), func(o *MoveObserved) { o.TargetActive = true }, fileMoves, MoveRemoveSource},
		"removing the source: wait for it":            {moving(evav1.MoveRemovingSource), nil, operatorMoves, MoveWait},
		"the source's copy is gone: complete": {moving(evav1.MoveRemovingSource), func(o *MoveObserved) { o.Move.SourceRemovedAt = &at },
			operatorMoves, MoveComplete},
		"the placement allows the source again: cancel": {moving(evav1.MoveProvisioningTarget), func(o *MoveObserved) {
			o.AllowsSource, o.AllowsTarget = true, false
		}, operatorMoves, MoveCancel},
		"a file move is never undone": {moving(""), func(o *MoveObserved) { o.AllowsSource, o.AllowsTarget = true, false }, fileMoves, MoveWait},
		"the placement allows both: the move goes on": {moving(evav1.MoveProvisioningTarget), func(o *MoveObserved) {
			o.AllowsSource, o.TargetActive = true, true
		}, operatorMoves, MoveRemoveSource},
		"cancelled: wait for the target's copy to go": {moving(evav1.MoveProvisioningTarget), func(o *MoveObserved) { o.Move.Cancelled = true },
			operatorMoves, MoveWait},
		"cancelled, the target's copy gone: clear": {moving(evav1.MoveProvisioningTarget), func(o *MoveObserved) {
			o.Move.Cancelled, o.Move.TargetRemovedAt = true, &at
		}, operatorMoves, MoveClear},
		"retired during the move: the target removes its copy": {moving(evav1.MoveRemovingSource), func(o *MoveObserved) {
			o.Retired, o.TargetActive = true, true
		}, operatorMoves, MoveWait},
		"retired, the target's copy gone: clear": {moving(evav1.MoveProvisioningTarget), func(o *MoveObserved) {
			o.Retired, o.Move.TargetRemovedAt = true, &at
		}, operatorMoves, MoveClear},
		"the operator's source goes on once the target was Active":  {moving(evav1.MoveRemovingSource), nil, operatorMoves, MoveWait},
		"a file move's source waits while the target is not Active": {moving(evav1.MoveRemovingSource), nil, fileMoves, MoveWait},
	} {
		t.Run(name, func(t *testing.T) {
			o := c.o
			if c.edit != nil {
				c.edit(&o)
			}
			if got := NextMove(o, c.policy); got.Action != c.want {
				t.Errorf("NextMove = %+v, want action %d", got, c.want)
			}
		})
	}
}

// TestPartOfEachCell: each cell's part at each step of a move from a to b.
func TestPartOfEachCell(t *testing.T) {
	at := metav1.Now()
	mv := func(step evav1.MoveStep, edit func(*evav1.Move)) *evav1.Move {
		m := &evav1.Move{From: "a", To: "b", Step: step}
		if edit != nil {
			edit(m)
		}
		return m
	}
	for name, c := range map[string]struct {
		mv             *evav1.Move
		retired        bool
		source, target MovePart
	}{
		"no move":         {nil, false, PartServe, PartServe},
		"provisioning":    {mv(evav1.MoveProvisioningTarget, nil), false, PartServe, PartProvisionTarget},
		"removing source": {mv(evav1.MoveRemovingSource, nil), false, PartRemoveSource, PartNone},
		"source removed":  {mv(evav1.MoveRemovingSource, func(m *evav1.Move) { m.SourceRemovedAt = &at }), false, PartNone, PartNone},
		"cancelled":       {mv(evav1.MoveProvisioningTarget, func(m *evav1.Move) { m.Cancelled = true }), false, PartServe, PartRemoveTarget},
		"cancelled, target copy gone": {mv(evav1.MoveProvisioningTarget, func(m *evav1.Move) { m.Cancelled, m.TargetRemovedAt = true, &at }),
			false, PartServe, PartNone},
		"retired while removing the source": {mv(evav1.MoveRemovingSource, nil), true, PartServe, PartRemoveTarget},
	} {
		t.Run(name, func(t *testing.T) {
			if got := PartOf(c.mv, "a", c.retired); got != c.source {
				t.Errorf("source's part %d, want %d", got, c.source)
			}
			if got := PartOf(c.mv, "b", c.retired); got != c.target {
				t.Errorf("target's part %d, want %d", got, c.target)
			}
		})
	}
}
