package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// cellsOverlays writes an overlays folder whose dev environment has two cells, each
// with room for three Starter tenants (6 CPU), and returns its path.
func cellsOverlays(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "overlays")
	dir := filepath.Join(root, "dev", "tenant")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testenv.RepoRoot(), "overlays", "dev", "tenant"))); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "environment.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`
cells:
  - name: eu-1
    labels: {region: eu}
    path: cells/eu-1
    capacity: {cpu: "6", memory: 12Gi}
  - name: us-1
    labels: {region: us}
    path: cells/us-1
    capacity: {cpu: "6", memory: 12Gi}
`); err != nil {
		t.Fatal(err)
	}
	return root
}

// evactlPlacements runs evactl cells, as a platform engineer runs it on a pull request,
// over the tenants written as files, and returns where it places each.
func evactlPlacements(t *testing.T, overlays string, tenants []*evav1.EvaTenant) map[string]string {
	t.Helper()
	dir := t.TempDir()
	for _, tn := range tenants {
		file := evav1.EvaTenant{TypeMeta: metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: "EvaTenant"},
			ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: tn.Namespace}, Spec: tn.Spec}
		data, err := yaml.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tn.Spec.CapsuleCode+".yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := testenv.Binary("./cmd/evactl", "evactl-test")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "cells", "--tenants", dir, "--overlays", overlays, "--env", "dev", "-o", "json")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var report struct {
		Placements map[string]string `json:"placements"`
	}
	if jsonErr := json.Unmarshal(out, &report); jsonErr != nil {
		t.Fatalf("evactl cells: %v, %v\n%s", err, jsonErr, out)
	}
	return report.Placements
}

// cellsRig is the fleet cluster (the suite's API server, which is also cell eu-1), a
// second API server for cell us-1, and the operator processes of the three roles.
type cellsRig struct {
	t        *testing.T
	ns       string
	overlays string
	clusters map[string]client.Client
	start    map[string]func() *testenv.Process
	procs    map[string]*testenv.Process
	// cellProcs are every cell operator process started, killed ones included.
	cellProcs []*testenv.Process
}

// newCellsRig starts the second API server with the operator installed, and the fleet
// operator and both cells' operators, as deployed (each as the operator's service
// account in its own cluster, and as its cell's identity on the fleet cluster).
func newCellsRig(t *testing.T) *cellsRig {
	applyOperatorBase(t)
	crds := filepath.Join(testenv.RepoRoot(), "internal", "testenv", "crds")
	cellEnv, err := testenv.Start(filepath.Join(crds, "flux"), filepath.Join(crds, "addons"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cellEnv.Stop() })
	cellClient, err := client.New(cellEnv.Config, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := installOperatorBase(cellEnv, cellClient); err != nil {
		t.Fatal(err)
	}
	// What the tenants wait for (Flux, Jobs, quotas, namespaces), in both clusters.
	startStandIn(t)
	startStandInOn(t, cellEnv.Config)
	stopQuota, err := startQuotaStandInOn(cellEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopQuota)
	rig := &cellsRig{t: t, ns: newTestNamespace(t), overlays: cellsOverlays(t),
		clusters: map[string]client.Client{"eu-1": k8s, "us-1": cellClient}, procs: map[string]*testenv.Process{}}
	// The cells' operators reach the fleet cluster as their cells' identities, held to
	// their own cells' tenants (eva-cell-fence).
	fleetKubeconfig := env.KubeConfigAs(t, testenv.OperatorServiceAccount)
	cellKubeconfig := map[string]string{}
	for _, cell := range []string{"eu-1", "us-1"} {
		bindCellIdentity(t, k8s, cell)
		cellKubeconfig[cell] = env.KubeConfigAs(t, cellIdentity(cell))
	}
	usKubeconfig := cellEnv.KubeConfigAs(t, testenv.OperatorServiceAccount)
	procEnv := []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=" + claimsNamespace}
	args := func(extra ...string) []string {
		return append([]string{"--overlays=" + rig.overlays, "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--tenant-namespaces=" + rig.ns}, extra...)
	}
	rig.start = map[string]func() *testenv.Process{
		"fleet": func() *testenv.Process { return testenv.StartOperator(t, fleetKubeconfig, procEnv, args()...) },
		"eu-1": func() *testenv.Process {
			return testenv.StartOperator(t, fleetKubeconfig, procEnv, args("--cell=eu-1", "--fleet-kubeconfig="+cellKubeconfig["eu-1"], "--move-drain=2s")...)
		},
		"us-1": func() *testenv.Process {
			return testenv.StartOperator(t, usKubeconfig, procEnv, args("--cell=us-1", "--fleet-kubeconfig="+cellKubeconfig["us-1"], "--move-drain=2s")...)
		},
	}
	for _, cell := range []string{"eu-1", "us-1"} {
		start := rig.start[cell]
		rig.start[cell] = func() *testenv.Process {
			p := start()
			rig.cellProcs = append(rig.cellProcs, p)
			return p
		}
	}
	for name, start := range rig.start {
		rig.procs[name] = start()
	}
	return rig
}

// noRefusals fails the test if the API server refused any request of a cell's
// operator: a cell's identity on the fleet cluster grants all it needs.
func (rig *cellsRig) noRefusals() {
	rig.t.Helper()
	for _, p := range rig.cellProcs {
		for line := range strings.Lines(p.Output()) {
			if strings.Contains(line, "forbidden") {
				rig.t.Errorf("a cell's operator was refused: %s", line)
			}
		}
	}
}

// restart kills an operator with SIGKILL and starts it again.
func (rig *cellsRig) restart(name string) {
	rig.procs[name].Kill()
	rig.procs[name] = rig.start[name]()
}

// namespaceOn says whether cell's API server holds the tenant's namespace.
func (rig *cellsRig) namespaceOn(cell, code string) bool {
	rig.t.Helper()
	var nsObj corev1.Namespace
	err := rig.clusters[cell].Get(context.Background(), types.NamespacedName{Name: tenant.Namespace(code)}, &nsObj)
	if err != nil && !apierrors.IsNotFound(err) {
		rig.t.Fatal(err)
	}
	return err == nil && nsObj.DeletionTimestamp.IsZero()
}

// waitOnlyOn waits until the tenant is on cell, its namespace ready there and on no
// other cell, and no move under way.
func (rig *cellsRig) waitOnlyOn(tn *evav1.EvaTenant, cell string, timeout time.Duration) {
	rig.t.Helper()
	code := tn.Spec.CapsuleCode
	eventually(rig.t, timeout, code+" on cell "+cell+" alone", func() error {
		got := getTenant(rig.t, tn)
		if got.Status.Cell != cell || got.Status.Move != nil {
			return fmt.Errorf("status.cell %q, move %+v", got.Status.Cell, got.Status.Move)
		}
		if c := condition(got, evav1.ConditionNamespaceReady); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("NamespaceReady %s: %s", c.Status, c.Message)
		}
		for name := range rig.clusters {
			if on := rig.namespaceOn(name, code); on != (name == cell) {
				return fmt.Errorf("namespace on cell %s: %v", name, on)
			}
		}
		return nil
	})
}

// TestCellsPlaceDeliverAndMoveAcrossTwoAPIServers runs the operator binary as deployed,
// in the three roles of an environment with two cells, on two API servers: the fleet
// operator and eu-1's operator on the fleet cluster (the suite's), us-1's operator on a
// second API server, reaching the fleet cluster through its kubeconfig.
//
// Four Starter tenants are placed as evactl places the same tenants as files; each is
// delivered only into its own cell's API server, and its conditions are written on the
// fleet cluster by its cell's operator. A tenant no cell matches is refused with a
// NotPlaced event, and a cell label written by its author delivers it nowhere
// (status.cell, which only the fleet operator writes, decides).
//
// Then one tenant's placement names the other cell: the move saga provisions it there,
// moves its traffic, drains and removes it from the source, with every operator killed
// (SIGKILL) and restarted while the move is under way, and ends with the tenant on the
// target alone, its events telling each step.
func TestCellsPlaceDeliverAndMoveAcrossTwoAPIServers(t *testing.T) {
	rig := newCellsRig(t)
	var tenants []*evav1.EvaTenant
	for _, code := range []string{"CELLAA", "CELLAB", "CELLAC", "CELLAD"} {
		tn := newTenant(rig.ns, code, evav1.TierStarter)
		createTenant(t, tn)
		tenants = append(tenants, tn)
	}
	want := evactlPlacements(t, rig.overlays, tenants)
	if len(want) != 4 {
		t.Fatalf("evactl places %v", want)
	}
	for _, tn := range tenants {
		rig.waitOnlyOn(tn, want[tn.Spec.CapsuleCode], 90*time.Second)
	}

	// No cell matches: refused, whatever cell label its author wrote.
	extra := newTenant(rig.ns, "CELLAE", evav1.TierStarter, func(tn *evav1.EvaTenant) {
		tn.Labels = map[string]string{tenant.CellLabel("us-1"): ""}
		tn.Spec.Placement = &evav1.Placement{Labels: map[string]string{"region": "ap"}}
	})
	createTenant(t, extra)
	eventually(t, 60*time.Second, "CELLAE refused", func() error {
		if !slices.Contains(eventReasons(t, extra), status.EventNotPlaced) {
			return fmt.Errorf("events %v", eventReasons(t, extra))
		}
		return nil
	})
	consistently(t, "CELLAE delivered nowhere", func() error {
		if got := getTenant(t, extra); got.Status.Cell != "" || len(got.Status.Conditions) > 0 {
			return fmt.Errorf("status.cell %q, conditions %v", got.Status.Cell, got.Status.Conditions)
		}
		for name := range rig.clusters {
			if rig.namespaceOn(name, "CELLAE") {
				return fmt.Errorf("cell %s holds its namespace", name)
			}
		}
		return nil
	})
	// Deleted before any cell served it, it leaves nothing: its code's claim, which the
	// fleet operator made, goes with it.
	if err := k8s.Delete(context.Background(), getTenant(t, extra)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "CELLAE's claim released", func() error {
		return claimGone(extra.Spec.CapsuleCode)
	})

	// The move.
	moving := tenants[0]
	from, to := rig.pin(moving, "")
	killed := map[string]bool{}
	eventually(t, 120*time.Second, "the move of "+moving.Spec.CapsuleCode+" to "+to, func() error {
		got := getTenant(t, moving)
		mv := got.Status.Move
		switch {
		case mv != nil && mv.Step == evav1.MoveProvisioningTarget && !killed["fleet"]:
			killed["fleet"] = true
			rig.restart("fleet")
		case mv != nil && mv.Step == evav1.MoveProvisioningTarget && !killed[to]:
			killed[to] = true
			rig.restart(to)
		case mv != nil && mv.Step == evav1.MoveRemovingSource && !killed[from]:
			if mv.TargetPhase != evav1.PhaseActive || !rig.namespaceOn(to, moving.Spec.CapsuleCode) {
				t.Fatalf("the source is being removed while the target is not Active, or holds no namespace: %+v", mv)
			}
			killed[from] = true
			rig.restart(from)
		}
		if !rig.namespaceOn(from, moving.Spec.CapsuleCode) && !rig.namespaceOn(to, moving.Spec.CapsuleCode) {
			t.Fatalf("neither cell holds the tenant: %+v", mv)
		}
		if got.Status.Cell != to || mv != nil {
			return fmt.Errorf("status.cell %q, move %+v", got.Status.Cell, mv)
		}
		return nil
	})
	rig.waitOnlyOn(moving, to, 60*time.Second)
	// MoveStarted is not asserted here: the fleet operator was killed right after
	// writing the move, and an event it had not yet sent is lost with it (events are
	// best effort; the status is the record).
	waitEvents(t, moving, status.EventPlaced, status.EventMoveTargetActive, status.EventMoveComplete)
	t.Logf("operators killed during the move: %v", killed)

	// A move undone while the target provisions (its quota held, so it cannot get
	// Active): the target's copy goes, the tenant stays.
	undone := tenants[1]
	from, to = rig.startHeldMove(undone)
	rig.pin(undone, from)
	rig.waitOnlyOn(undone, from, 60*time.Second)
	waitEvents(t, undone, status.EventMoveStarted, status.EventMoveCancelled)

	// Deleted during its move, with the target's operator down: the tenant is held
	// until that operator is back and has removed its copy, then nothing is left in
	// either cell, and the tenant goes.
	deleted := tenants[3]
	from, to = rig.startHeldMove(deleted)
	rig.procs[to].Kill()
	if err := k8s.Delete(context.Background(), getTenant(t, deleted)); err != nil {
		t.Fatal(err)
	}
	consistently(t, deleted.Spec.CapsuleCode+" held while cell "+to+" cannot remove its copy", func() error {
		var held evav1.EvaTenant
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(deleted), &held)
	})
	rig.procs[to] = rig.start[to]()
	eventually(t, 60*time.Second, deleted.Spec.CapsuleCode+" deleted from both cells", func() error {
		var gone evav1.EvaTenant
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(deleted), &gone)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the tenant is still there (%v): %+v", err, gone.Status.Move)
		}
		for _, cell := range []string{from, to} {
			if rig.namespaceOn(cell, deleted.Spec.CapsuleCode) {
				return fmt.Errorf("cell %s still holds its namespace", cell)
			}
		}
		return nil
	})
	// Deleted during its move under spec.deletionProtection: the decommission is refused,
	// and the move goes on (the target keeps its copy) rather than leaving the tenant
	// served by no cell. Unprotected, it goes from its new cell.
	protected := tenants[2]
	rig.protect(protected, true)
	from, to = rig.startHeldMove(protected)
	if err := k8s.Delete(context.Background(), getTenant(t, protected)); err != nil {
		t.Fatal(err)
	}
	consistently(t, protected.Spec.CapsuleCode+", protected, kept on both cells", func() error {
		mv := getTenant(t, protected).Status.Move
		if mv == nil || mv.TargetRemovedAt != nil || !rig.namespaceOn(from, protected.Spec.CapsuleCode) ||
			!rig.namespaceOn(to, protected.Spec.CapsuleCode) {
			return fmt.Errorf("move %+v", mv)
		}
		return nil
	})
	releaseQuota(tenant.Namespace(protected.Spec.CapsuleCode))
	eventually(t, 90*time.Second, protected.Spec.CapsuleCode+", protected, moved to "+to, func() error {
		if got := getTenant(t, protected); got.Status.Cell != to || got.Status.Move != nil {
			return fmt.Errorf("status.cell %q, move %+v", got.Status.Cell, got.Status.Move)
		}
		return nil
	})
	rig.protect(protected, false)
	eventually(t, 60*time.Second, protected.Spec.CapsuleCode+" deleted", func() error {
		var gone evav1.EvaTenant
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(protected), &gone); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v): phase %s", err, gone.Status.Phase)
		}
		return nil
	})

	// Its code is free again: the fleet operator released its claim once its cell had
	// run the saga (the cells write no claims).
	if err := claimGone(deleted.Spec.CapsuleCode); err != nil {
		t.Error(err)
	}
	rig.noRefusals()
}

// claimGone says why a code's claim is still there, if it is.
func claimGone(code string) error {
	var claimLease coordinationv1.Lease
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: claimsNamespace, Name: claim.Name(code)}, &claimLease)
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("the claim of %s, deleted: %v (held by %s)", code, err, claimLease.Annotations[claim.AnnotationOwner])
	}
	return nil
}

// startHeldMove pins tn to the other cell with its copy there held from getting Active
// (pin "hold"), waits until the move has begun provisioning there, and returns its
// cell and the target.
func (rig *cellsRig) startHeldMove(tn *evav1.EvaTenant) (from, to string) {
	rig.t.Helper()
	from, to = rig.pin(tn, "hold")
	eventually(rig.t, 30*time.Second, "the move of "+tn.Spec.CapsuleCode+" started", func() error {
		if mv := getTenant(rig.t, tn).Status.Move; mv == nil || !rig.namespaceOn(to, tn.Spec.CapsuleCode) {
			return fmt.Errorf("move %+v, nothing on %s yet", mv, to)
		}
		return nil
	})
	return from, to
}

// protect sets tn's spec.deletionProtection.
func (rig *cellsRig) protect(tn *evav1.EvaTenant, on bool) {
	rig.t.Helper()
	got := getTenant(rig.t, tn)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.DeletionProtection = on
	if err := k8s.Patch(context.Background(), got, patch); err != nil {
		rig.t.Fatal(err)
	}
}

// waitEvents waits until the tenant's events include each of reasons (the recorder
// sends them after the status write they explain, asynchronously).
func waitEvents(t *testing.T, tn *evav1.EvaTenant, reasons ...string) {
	t.Helper()
	eventually(t, 10*time.Second, tn.Spec.CapsuleCode+"'s events", func() error {
		got := eventReasons(t, tn)
		for _, r := range reasons {
			if !slices.Contains(got, r) {
				return fmt.Errorf("no %s in %v", r, got)
			}
		}
		return nil
	})
}

// pin sets tn's spec.placement to cell (the other cell than its own when cell is "" or
// "hold"; with "hold", the quota of its namespace is held unenforced first, so its copy
// on the target cannot become Active) and returns its cell and the one pinned.
func (rig *cellsRig) pin(tn *evav1.EvaTenant, cell string) (from, to string) {
	rig.t.Helper()
	got := getTenant(rig.t, tn)
	from = got.Status.Cell
	to = cell
	if cell == "" || cell == "hold" {
		to = map[string]string{"eu-1": "us-1", "us-1": "eu-1"}[from]
	}
	if cell == "hold" {
		holdQuota(rig.t, tenant.Namespace(tn.Spec.CapsuleCode))
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Placement = &evav1.Placement{Cell: to}
	if err := k8s.Patch(context.Background(), got, patch); err != nil {
		rig.t.Fatal(err)
	}
	return from, to
}
