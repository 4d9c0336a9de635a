package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/placement"
	"github.com/aidonow/eva/internal/tenant"
)

// twoCells is the dev environment with two cells of 8 CPU each: four Starter tenants
// (2 CPU) fill one.
func twoCells(t *testing.T) *overlay.Environment {
	t.Helper()
	e := *testRenderer(t).Env
	for _, name := range []string{"a", "b"} {
		e.Settings.Cells = append(e.Settings.Cells, overlay.Cell{Path: "cells/" + name, Cell: placement.Cell{Name: name,
			Capacity: placement.Capacity{CPU: resource.MustParse("8"), Memory: resource.MustParse("64Gi")}}})
	}
	return &e
}

// TestPlacerHoldsRoomForAMoveAndItsReturn is the capacity attack on the fleet
// operator's placer, against the API server: a requester fills cell a, moves one
// tenant to b and back. While the move is under way, and after it is cancelled until
// b's copy is gone, the tenant's room on a stays its own: a newcomer pinned to a is
// refused, and a never holds more than its 8 CPU. (The placer counted a moving tenant
// on its target only: the newcomer took a's room, and the tenant came back to 10 of 8.)
func TestPlacerHoldsRoomForAMoveAndItsReturn(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	p := &CellPlacer{Client: k8s, Catalog: tenant.DefaultCatalog(), Env: twoCells(t), TenantNamespaces: []string{ns},
		Claims: &claim.Store{Client: k8s, Reader: k8s, Namespace: claimsNamespace}}
	pass := func() {
		t.Helper()
		if _, err := p.Reconcile(ctx, fleetRequest); err != nil {
			t.Fatal(err)
		}
	}
	onCell := func(cell string) tenantOpt {
		return func(tn *evav1.EvaTenant) { tn.Spec.Placement = &evav1.Placement{Cell: cell} }
	}
	var tenants []*evav1.EvaTenant
	for _, code := range []string{"PLCAAA", "PLCAAB", "PLCAAC", "PLCAAD"} {
		tn := newTenant(ns, code, evav1.TierStarter, onCell("a"))
		createTenant(t, tn)
		tenants = append(tenants, tn)
	}
	pass()
	mover := tenants[0]
	setPlacement := func(cell string) {
		t.Helper()
		tn := getTenant(t, mover)
		base := tn.DeepCopy()
		tn.Spec.Placement.Cell = cell
		if err := k8s.Patch(ctx, tn, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		pass()
	}
	setPlacement("b")
	if mv := getTenant(t, mover).Status.Move; mv == nil || mv.From != "a" || mv.To != "b" {
		t.Fatalf("PLCAAA's move: %+v", mv)
	}
	newcomer := newTenant(ns, "PLCAAE", evav1.TierStarter, onCell("a"))
	createTenant(t, newcomer)
	pass()
	assertRoom := func(when string) {
		t.Helper()
		if cell := getTenant(t, newcomer).Status.Cell; cell != "" {
			t.Errorf("%s: the newcomer was placed on %s, in the room PLCAAA's move holds", when, cell)
		}
		onA := 0
		for _, tn := range append(tenants, newcomer) {
			got := getTenant(t, tn)
			if got.Status.Cell == "a" || (got.Status.Move != nil && (got.Status.Move.From == "a" || got.Status.Move.To == "a")) {
				onA++
			}
		}
		if onA > 4 {
			t.Errorf("%s: %d Starter tenants (2 CPU each) hold room on cell a of 8 CPU", when, onA)
		}
	}
	assertRoom("during the move")

	setPlacement("a") // back before the target is Active: the move is cancelled
	if mv := getTenant(t, mover).Status.Move; mv == nil || !mv.Cancelled {
		t.Fatalf("PLCAAA's move after its placement went back: %+v", mv)
	}
	assertRoom("once the move is cancelled")
	// Cell b's operator removes its copy; the move ends with the tenant on a.
	tn := getTenant(t, mover)
	base := tn.DeepCopy()
	now := metav1.Now()
	tn.Status.Move.TargetRemovedAt = &now
	if err := k8s.Status().Patch(ctx, tn, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	pass()
	pass()
	if got := getTenant(t, mover); got.Status.Move != nil || got.Status.Cell != "a" {
		t.Fatalf("after the cancelled move: cell %q, move %+v", got.Status.Cell, got.Status.Move)
	}
	assertRoom("after the move")
}
