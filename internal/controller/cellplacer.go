package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/placement"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// fleetRequest is the one request the placer works on: every tenant event maps to it,
// so a burst of new tenants is placed in one pass, in code order, as evactl places a
// pull request's.
var fleetRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "cells"}}

// CellPlacer places tenants on the cells of an environment with cells (docs/cells.md).
// It runs in the fleet operator, the one that holds the EvaTenants, and records each
// tenant's cell in status.cell and in the cell label the cell's own operator selects
// its tenants by. Placement is placement.Place over every tenant, with the requests
// evactl builds (placement.Requests) and each tenant's status.cell as its previous
// cell: a placed tenant stays, and the unplaced go, in code order, where there is room.
// One pass runs at a time, and a cell written is remembered until the cache shows it,
// so two tenants never take the same room.
type CellPlacer struct {
	client.Client
	Recorder events.EventRecorder
	Catalog  *tenant.Catalog
	Env      *overlay.Environment
	// TenantNamespaces, as the tenant reconciler's: tenants elsewhere are not placed.
	TenantNamespaces []string
	// Claims are the capsule-code claims, which the fleet operator alone writes
	// (claimCodes).
	Claims *claim.Store
	// Reader reads the tenants from the API server, uncached, before a pass books a
	// cell's room (nil: the client's reads only, for tests of one process).
	Reader client.Reader
	// Lease, when set, is the placer's Lease: the placer acts only while it holds it.
	Lease *PlacerLease

	mu sync.Mutex
	// written holds the cells this process recorded, by tenant UID, until the cache
	// copy of the tenant carries them.
	written map[types.UID]string
	// reported holds the last problem reported for each tenant, so each is one event.
	reported map[types.UID]string
	// unserved are tenants deleted before any cell served them (their last state had
	// no phase): nothing of them can be left, and their claims go.
	unservedMu sync.Mutex
	unserved   []*evav1.EvaTenant
}

// SetupWithManager registers the placer: every EvaTenant event asks for one pass.
func (p *CellPlacer) SetupWithManager(mgr ctrl.Manager) error {
	toFleet := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleetRequest}
	})
	onTenants := handler.Funcs{
		CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(fleetRequest)
		},
		UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(fleetRequest)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if t, ok := e.Object.(*evav1.EvaTenant); ok && t.Status.Phase == "" {
				p.unservedMu.Lock()
				p.unserved = append(p.unserved, t)
				p.unservedMu.Unlock()
			}
			q.Add(fleetRequest)
		},
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(fleetRequest)
		},
	}
	claims := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[tenant.LabelCapsule]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("cellplacer").
		Watches(&evav1.EvaTenant{}, onTenants).
		// A claim deleted by hand (an orphan cleared) lets the fleet claim the code again.
		Watches(&coordinationv1.Lease{}, toFleet, builder.WithPredicates(claims)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(p)
}

// placerWait is how often a placer that does not hold the placer's Lease looks again.
const placerWait = 10 * time.Second

// placerPass is one pass's view of the fleet: every tenant listed, those the placer
// weighs, where placement puts them and what it refuses, by code.
type placerPass struct {
	items    []evav1.EvaTenant
	tenants  []*evav1.EvaTenant
	result   placement.Result
	problems map[string]string
}

// Reconcile places every tenant that has no cell yet, starts a move for a placed tenant
// whose placement no longer allows its cell (when another has room), advances the moves
// under way, reports the tenants that cannot be placed, and keeps each tenant's cell
// labels in line with its status. It acts only while it holds the placer's Lease (one
// placer across operator versions), and books a cell's room only against the tenants
// as the API server has them: when a pass would place a tenant or start a move, the
// tenants are listed again, uncached, and the pass decided again from them.
func (p *CellPlacer) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Lease != nil {
		held := p.Lease.Held()
		if held == nil {
			return ctrl.Result{RequeueAfter: placerWait}, nil
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(held, cancel)()
	}
	pass, err := p.pass(ctx, p.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if p.Reader != nil && p.books(pass) {
		if pass, err = p.pass(ctx, p.Reader); err != nil {
			return ctrl.Result{}, err
		}
	}
	errs := []error{p.claimCodes(ctx, pass.items, pass.tenants)}
	for i := range pass.items {
		// A tenant deleted during its move: its cells finish their parts (the target
		// removes its copy once labelled), and the move is cleared.
		if t := &pass.items[i]; t.DeletionTimestamp != nil && t.Status.Move != nil && namespaceAccepted(p.TenantNamespaces, t.Namespace) {
			errs = append(errs, p.advanceMove(ctx, t))
		}
	}
	for _, t := range pass.tenants {
		errs = append(errs, p.act(ctx, pass, t))
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, fmt.Errorf("placing tenants: %w", err)
	}
	return ctrl.Result{}, nil
}

// pass lists the tenants with reader and places them.
func (p *CellPlacer) pass(ctx context.Context, reader client.Reader) (*placerPass, error) {
	var list evav1.EvaTenantList
	if err := reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	pass := &placerPass{items: list.Items, tenants: p.candidates(list.Items), problems: map[string]string{}}
	byCode := map[string]*evav1.EvaTenant{}
	for _, t := range pass.tenants {
		byCode[t.Spec.CapsuleCode] = t
	}
	pass.result = placement.Place(p.Env.Settings.PlacementCells(),
		placement.Requests(pass.tenants, p.Catalog, func(code string) (string, string) { return p.where(byCode[code]) }))
	for _, pr := range pass.result.Problems {
		if pr.Code != "" {
			pass.problems[pr.Code] = pr.Message
		}
	}
	return pass, nil
}

// books reports whether the pass would take a cell's room: place a tenant, or start a
// move.
func (p *CellPlacer) books(pass *placerPass) bool {
	return slices.ContainsFunc(pass.tenants, func(t *evav1.EvaTenant) bool {
		cell := pass.result.Cells[t.Spec.CapsuleCode]
		_, refused := pass.problems[t.Spec.CapsuleCode]
		return t.Status.Move == nil && !refused && cell != "" && p.cellOf(t) != cell
	})
}

// act does what the pass decides for one tenant.
func (p *CellPlacer) act(ctx context.Context, pass *placerPass, t *evav1.EvaTenant) error {
	code := t.Spec.CapsuleCode
	switch msg, refused := pass.problems[code]; {
	case t.Status.Move != nil:
		return p.advanceMove(ctx, t)
	case refused:
		p.report(t, msg)
		return p.labelCells(ctx, t, t.Status.Cell)
	case t.Status.Cell != "" && pass.result.Cells[code] != "" && pass.result.Cells[code] != t.Status.Cell:
		return p.startMove(ctx, t, pass.result.Cells[code])
	}
	delete(p.reported, t.UID)
	if cell := p.cellOf(t); cell != "" {
		return p.labelCells(ctx, t, cell)
	} else if cell := pass.result.Cells[code]; cell != "" {
		return p.record(ctx, t, cell)
	}
	return nil
}

// claimCodes keeps the fleet's capsule-code claims, which the cells' operators only read
// (their identities write none: docs/cells.md#the-cell-identity). A deleted tenant
// recorded as Decommissioned (its cell ran the saga) has its claim released, so that its
// cell lets it go; then each tenant the placer weighs claims its code (the first
// created of a code, as candidates chose; its cell refuses any other).
func (p *CellPlacer) claimCodes(ctx context.Context, items []evav1.EvaTenant, candidates []*evav1.EvaTenant) error {
	var errs []error
	for i := range items {
		t := &items[i]
		if t.DeletionTimestamp != nil && t.Status.Phase == evav1.PhaseDecommissioned && namespaceAccepted(p.TenantNamespaces, t.Namespace) {
			errs = append(errs, p.Claims.Release(ctx, t.Spec.CapsuleCode, ownerOf(t)))
		}
	}
	for _, t := range p.takeUnserved() {
		if namespaceAccepted(p.TenantNamespaces, t.Namespace) {
			errs = append(errs, p.Claims.Release(ctx, t.Spec.CapsuleCode, ownerOf(t)))
		}
	}
	for _, t := range candidates {
		if _, _, err := p.Claims.Acquire(ctx, t.Spec.CapsuleCode, ownerOf(t)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// takeUnserved returns the tenants deleted before any cell served them, and forgets them.
func (p *CellPlacer) takeUnserved() []*evav1.EvaTenant {
	p.unservedMu.Lock()
	defer p.unservedMu.Unlock()
	out := p.unserved
	p.unserved = nil
	return out
}

// candidates are the tenants the placer weighs: those in the accepted namespaces, not
// being deleted, one per capsule code (the first created; the code's claim decides
// which one runs, and a second one would count its claim twice), by code.
func (p *CellPlacer) candidates(items []evav1.EvaTenant) []*evav1.EvaTenant {
	slices.SortFunc(items, func(a, b evav1.EvaTenant) int {
		// Creation times have one-second resolution: the UID breaks ties, so one pass
		// and the next choose the same tenant of a code.
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(string(a.UID), string(b.UID)))
	})
	seen := map[string]bool{}
	var out []*evav1.EvaTenant
	for i := range items {
		t := &items[i]
		if t.DeletionTimestamp != nil || seen[t.Spec.CapsuleCode] ||
			(len(p.TenantNamespaces) > 0 && !slices.Contains(p.TenantNamespaces, t.Namespace)) {
			continue
		}
		seen[t.Spec.CapsuleCode] = true
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *evav1.EvaTenant) int { return strings.Compare(a.Spec.CapsuleCode, b.Spec.CapsuleCode) })
	return out
}

// where is what placement weighs of t's cells: the cell it is on or moves to, and the
// other cell of its move while that cell still holds a copy of it (the source until
// it has removed it; the target of a cancelled move until it has removed its own).
func (p *CellPlacer) where(t *evav1.EvaTenant) (previous, holds string) {
	mv := t.Status.Move
	switch {
	case mv == nil:
		return p.cellOf(t), ""
	case mv.Cancelled && mv.TargetRemovedAt == nil:
		return mv.From, mv.To
	case mv.Cancelled:
		return mv.From, ""
	case mv.SourceRemovedAt == nil:
		return mv.To, mv.From
	}
	return mv.To, ""
}

// cellOf is the cell t is on: its status.cell, or the one this process wrote and the
// cache does not show yet.
func (p *CellPlacer) cellOf(t *evav1.EvaTenant) string {
	if t == nil {
		return ""
	}
	if t.Status.Move != nil {
		return t.Status.Move.To // where it will be
	}
	if t.Status.Cell != "" {
		delete(p.written, t.UID)
		return t.Status.Cell
	}
	return p.written[t.UID]
}

// record writes the cell into t's status (once: status.cell changes only through a
// move) and its label.
func (p *CellPlacer) record(ctx context.Context, t *evav1.EvaTenant, cell string) error {
	base := t.DeepCopy()
	t.Status.Cell = cell
	if err := p.Status().Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("placing %s/%s on cell %s: %w", t.Namespace, t.Name, cell, err)
	}
	if p.written == nil {
		p.written = map[types.UID]string{}
	}
	p.written[t.UID] = cell
	p.event(t, corev1.EventTypeNormal, status.EventPlaced, "Placed on cell %s", cell)
	return p.labelCells(ctx, t, cell)
}

// labelCells makes the tenant's cell labels (tenant.CellLabel) name exactly cells.
func (p *CellPlacer) labelCells(ctx context.Context, t *evav1.EvaTenant, cells ...string) error {
	want := map[string]bool{}
	for _, c := range cells {
		if c != "" {
			want[tenant.CellLabel(c)] = true
		}
	}
	have := map[string]bool{}
	for k := range t.Labels {
		if strings.HasPrefix(k, tenant.CellLabelPrefix) {
			have[k] = true
		}
	}
	if maps.Equal(want, have) {
		return nil
	}
	base := t.DeepCopy()
	for k := range have {
		delete(t.Labels, k)
	}
	for k := range want {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[k] = ""
	}
	if err := p.Patch(ctx, t, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling %s/%s with its cells %v: %w", t.Namespace, t.Name, cells, err)
	}
	return nil
}

// report records a tenant's placement problem as a warning, once per message.
func (p *CellPlacer) report(t *evav1.EvaTenant, msg string) {
	if p.reported == nil {
		p.reported = map[types.UID]string{}
	}
	if p.reported[t.UID] == msg {
		return
	}
	p.reported[t.UID] = msg
	p.event(t, corev1.EventTypeWarning, status.EventNotPlaced, "environment %s: %s", p.Env.Name, msg)
}

func (p *CellPlacer) event(t *evav1.EvaTenant, kind, reason, format string, args ...any) {
	if p.Recorder != nil {
		p.Recorder.Eventf(t, nil, kind, reason, reason, format, args...)
	}
}
