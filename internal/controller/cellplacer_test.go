package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/leaselock"
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

// laggingCache is a client whose reads lag behind the API server by one tenant: the
// cache of a fleet operator that has not yet seen another placer's last placement.
type laggingCache struct {
	client.Client
	hide string // the tenant's name
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*evav1.EvaTenantList); ok {
		l.Items = slices.DeleteFunc(l.Items, func(t evav1.EvaTenant) bool { return t.Name == c.hide })
	}
	return nil
}

// TestPlacerBooksRoomAgainstTheAPIServer: a placer whose cache has not yet seen the
// last tenant another placer put on cell a (a blue/green hand-over, a new leader) does
// not book a's last room a second time: before it places, it reads the tenants from the
// API server. (Placing from its cache, it put the newcomer on a full cell: 10 of 8 CPU.)
func TestPlacerBooksRoomAgainstTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	env := twoCells(t)
	placer := func(c client.Client, reader client.Reader) *CellPlacer {
		return &CellPlacer{Client: c, Reader: reader, Catalog: tenant.DefaultCatalog(), Env: env, TenantNamespaces: []string{ns},
			Claims: &claim.Store{Client: k8s, Reader: k8s, Namespace: claimsNamespace}}
	}
	onA := func(tn *evav1.EvaTenant) { tn.Spec.Placement = &evav1.Placement{Cell: "a"} }
	first := placer(k8s, k8s)
	for _, code := range []string{"LAGAAA", "LAGAAB", "LAGAAC", "LAGAAD"} {
		createTenant(t, newTenant(ns, code, evav1.TierStarter, onA))
		if _, err := first.Reconcile(ctx, fleetRequest); err != nil {
			t.Fatal(err)
		}
	}
	newcomer := newTenant(ns, "LAGAAE", evav1.TierStarter, onA)
	createTenant(t, newcomer)
	second := placer(laggingCache{Client: k8s, hide: "lagaad"}, k8s)
	if _, err := second.Reconcile(ctx, fleetRequest); err != nil {
		t.Fatal(err)
	}
	if cell := getTenant(t, newcomer).Status.Cell; cell != "" {
		t.Fatalf("the newcomer was placed on %s, whose last room LAGAAD took: booked twice under cache lag", cell)
	}
}

// TestOnePlacerActsAcrossVersions: two fleet operators of different versions (each its
// own leader) contend for the placer's Lease; only its holder places, and when it goes
// the other takes over.
func TestOnePlacerActsAcrossVersions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newTestNamespace(t)
	env := twoCells(t)
	lease := func(version string) *PlacerLease {
		return &PlacerLease{Lock: &leaselock.Lock{Client: k8s, Reader: k8s, Namespace: claimsNamespace, Name: PlacerLeaseName + "-" + ns,
			Holder: version, Duration: 4 * time.Second, Retry: 200 * time.Millisecond}}
	}
	blue, green := lease("blue"), lease("green")
	blueCtx, stopBlue := context.WithCancel(ctx)
	go func() { _ = blue.Start(blueCtx) }()
	waitUntil(t, 10*time.Second, func() bool { return blue.Held() != nil })
	go func() { _ = green.Start(ctx) }()
	placer := func(l *PlacerLease) *CellPlacer {
		return &CellPlacer{Client: k8s, Reader: k8s, Lease: l, Catalog: tenant.DefaultCatalog(), Env: env, TenantNamespaces: []string{ns},
			Claims: &claim.Store{Client: k8s, Reader: k8s, Namespace: claimsNamespace}}
	}
	tn := newTenant(ns, "ONEPLA", evav1.TierStarter)
	createTenant(t, tn)
	res, err := placer(green).Reconcile(ctx, fleetRequest)
	if err != nil || res.RequeueAfter == 0 || getTenant(t, tn).Status.Cell != "" {
		t.Fatalf("the placer without the Lease acted: %+v %v, cell %q", res, err, getTenant(t, tn).Status.Cell)
	}
	stopBlue() // blue's operator goes: its Lease is released
	waitUntil(t, 10*time.Second, func() bool { return green.Held() != nil })
	if _, err := placer(green).Reconcile(ctx, fleetRequest); err != nil || getTenant(t, tn).Status.Cell == "" {
		t.Fatalf("green, holding the Lease now, did not place: %v", err)
	}
	if blue.Held() != nil {
		t.Fatal("both hold the placer's Lease")
	}
}

func waitUntil(t *testing.T, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
