package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// cellsE2E turns on the scenario of two clusters (make e2e-cells): a second control
// plane with its own Flux and JetStream costs more than make test's budget allows.
const cellsE2E = "EVA_E2E_CELLS"

// startCell starts a second cluster as a cell: its own API server, etcd,
// kube-controller-manager, kube-scheduler and kwok node, the real Flux controllers, the
// operator's chart installed (no replica), its own JetStream and the NACK and ingress
// stand-ins of the suite.
func startCell(t *testing.T) (*testcluster.Cluster, *messaging.Client) {
	t.Helper()
	ctx := context.Background()
	root := testenv.RepoRoot()
	cell, err := testcluster.Start(ctx, testcluster.Options{
		CRDDirs:       []string{filepath.Join(root, "base", "crd", "bases"), filepath.Join(root, "internal", "testenv", "crds", "addons")},
		PodStartDelay: podStartDelay,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cell.Stop)
	if err := cell.StartFlux(ctx); err != nil {
		t.Fatal(err)
	}
	if err := installOperatorChart(cell.KubeConfig); err != nil {
		t.Fatal(err)
	}
	js, stop, err := cell.StartMessaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return cell, js
}

// cellsOverlays is the suite's overlays with two cells in the dev environment: eu-1
// (this suite's cluster) with room for 8 Starter tenants, us-1 (the second cluster)
// with room for 15.
func cellsOverlays(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "overlays")
	if err := os.CopyFS(dir, os.DirFS(overlays)); err != nil {
		t.Fatal(err)
	}
	cells := []map[string]any{
		{"name": "eu-1", "labels": map[string]any{"region": "eu"}, "path": "cells/eu-1", "capacity": map[string]any{"cpu": "16", "memory": "32Gi", "tenants": 8}},
		{"name": "us-1", "labels": map[string]any{"region": "us"}, "path": "cells/us-1", "capacity": map[string]any{"cpu": "30", "memory": "60Gi"}},
	}
	if err := setSettings(filepath.Join(dir, "dev", "tenant", overlay.SettingsFile), map[string]any{"cells": cells}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cellsPlacedByEvactl runs evactl cells over the tenants written as files and returns
// where it places each, its problems (file: message, a line each) and its exit status.
func cellsPlacedByEvactl(t *testing.T, overlaysDir string, tenants []*unstructured.Unstructured) (map[string]string, string, error) {
	t.Helper()
	dir := t.TempDir()
	for _, tn := range tenants {
		file := map[string]any{"apiVersion": tn.GetAPIVersion(), "kind": tn.GetKind(),
			"metadata": map[string]any{"name": tn.GetName(), "namespace": tn.GetNamespace()}, "spec": tn.Object["spec"]}
		data, err := yaml.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, codeOf(tn)+".yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(evactl, "cells", "--tenants", dir, "--overlays", overlaysDir, "--env", "dev", "-o", "json")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var report struct {
		Placements map[string]string `json:"placements"`
		Problems   []struct {
			File, Message string
		} `json:"problems"`
	}
	if jsonErr := json.Unmarshal(out, &report); jsonErr != nil {
		t.Fatalf("evactl cells -o json: %v (%v)\n%s", jsonErr, err, out)
	}
	var problems []string
	for _, p := range report.Problems {
		problems = append(problems, p.File+": "+p.Message)
	}
	return report.Placements, strings.Join(problems, "\n"), err
}

// cellsCode is the capsule code of the scenario's i-th tenant: CELxAA, CELxAB, ...
func cellsCode(i int) string { return fmt.Sprintf("CELX%c%c", 'A'+i/26, 'A'+i%26) }

// cellOf reads a tenant's status.cell and status.move step ("" for none).
func cellOf(t *testing.T, tn *unstructured.Unstructured) (cell, step string) {
	t.Helper()
	got, err := current(context.Background(), tn)
	if err != nil {
		t.Fatal(err)
	}
	cell, _, _ = unstructured.NestedString(got.Object, "status", "cell")
	step, _, _ = unstructured.NestedString(got.Object, "status", "move", "step")
	return cell, step
}

// deliveredOn says whether c holds the tenant's namespace with every module's
// Deployment Available (kwok's pods, installed by c's own helm-controller), or, when
// want is false, holds nothing of it (kube-controller-manager emptied and removed the
// namespace).
func deliveredOn(ctx context.Context, c client.Client, code string, modules int, want bool) error {
	var ns corev1.Namespace
	err := c.Get(ctx, types.NamespacedName{Name: tenant.Namespace(code)}, &ns)
	switch {
	case !want && apierrors.IsNotFound(err):
		return nil
	case !want:
		return fmt.Errorf("namespace %s is still there (%v)", tenant.Namespace(code), err)
	case err != nil:
		return err
	}
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, client.InNamespace(tenant.Namespace(code))); err != nil {
		return err
	}
	available := 0
	for _, d := range deployments.Items {
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				available++
			}
		}
	}
	if available != modules {
		return fmt.Errorf("%d of %d module Deployments Available", available, modules)
	}
	return nil
}

// TestCellsOnTwoClusters places twenty Starter tenants on two cells, each a cluster with
// its own real Flux: the suite's cluster (eu-1, also the fleet cluster) and a second one
// (us-1). The fleet operator places them as evactl places the same tenants as files, and
// each is Active on its own cell alone (its cell's helm-controller installed its
// releases). With eu-1 filled, a tenant that may go anywhere goes to us-1 and one that
// requires region eu is refused; a pull request overfilling both is refused by evactl. Then one tenant moves from eu-1 to us-1 with the fleet operator
// and the source's operator killed (SIGKILL) mid-saga: it ends Active on us-1, and
// eu-1 holds nothing of it.
func TestCellsOnTwoClusters(t *testing.T) {
	if os.Getenv(cellsE2E) == "" {
		t.Skip("two clusters with Flux each: run with make e2e-cells")
	}
	ctx := context.Background()
	cell, _ := startCell(t)
	cellsDir := cellsOverlays(t)
	ns := tenantNamespace(t, "cells")
	ops := startCellOperators(t, cell, cellsDir, ns, 5*time.Second, nil)
	clusters := map[string]client.Client{"eu-1": cluster.Client, "us-1": cell.Client}
	modules := len(tenant.DefaultCatalog().ModulesOf("Starter"))

	var tenants []*unstructured.Unstructured
	for i := range 20 {
		tn := evaTenant(ns, cellsCode(i), "Starter")
		tenants = append(tenants, tn)
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	want, _, err := cellsPlacedByEvactl(t, cellsDir, tenants)
	if err != nil || len(want) != 20 {
		t.Fatalf("evactl cells: %v, %v", want, err)
	}
	kubectlWaitReady(t, 8*time.Minute, tenants...)
	perCell := map[string]int{}
	for _, tn := range tenants {
		code := codeOf(tn)
		if got, _ := cellOf(t, tn); got != want[code] {
			t.Fatalf("%s is on cell %q; evactl places it on %s", code, got, want[code])
		}
		perCell[want[code]]++
		for name, c := range clusters {
			if err := deliveredOn(ctx, c, code, modules, name == want[code]); err != nil {
				t.Errorf("%s on %s (placed on %s): %v", code, name, want[code], err)
			}
		}
	}

	// Fill eu-1 with tenants pinned to it; then a tenant that may go anywhere goes to
	// us-1, and one that requires region eu is refused.
	created := len(tenants)
	var pinned []*unstructured.Unstructured
	for range 8 - perCell["eu-1"] {
		tn := evaTenant(ns, cellsCode(created), "Starter")
		created++
		_ = unstructured.SetNestedField(tn.Object, map[string]any{"cell": "eu-1"}, "spec", "placement")
		pinned = append(pinned, tn)
	}
	next := evaTenant(ns, cellsCode(created), "Starter")
	euOnly := evaTenant(ns, cellsCode(created+1), "Starter")
	_ = unstructured.SetNestedField(euOnly.Object, map[string]any{"region": "eu"}, "spec", "placement", "labels")
	created += 2
	for _, tn := range append(append(pinned, next), euOnly) {
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	kubectlWaitReady(t, 3*time.Minute, append(pinned, next)...)
	if got, _ := cellOf(t, next); got != "us-1" {
		t.Fatalf("the tenant after eu-1 filled is on %q, want us-1", got)
	}
	deadline := time.Now().Add(within(t, time.Minute))
	for {
		n, _ := countEvents(t, ns, euOnly.GetName(), "NotPlaced")
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a tenant requiring region eu with eu-1 full: no NotPlaced event")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if cellNow, _ := cellOf(t, euOnly); cellNow != "" {
		t.Fatalf("a tenant requiring region eu with eu-1 full was placed on %s", cellNow)
	}
	if err := cluster.Client.Delete(ctx, euOnly); err != nil {
		t.Fatal(err)
	}

	// A pull request adding two more tenants overfills both cells (8 and 15).
	pr := append(append(append([]*unstructured.Unstructured{}, tenants...), pinned...), next)
	for i := range 2 {
		pr = append(pr, evaTenant(ns, cellsCode(created+i), "Starter"))
	}
	last := cellsCode(created + 1)
	if _, stderr, err := cellsPlacedByEvactl(t, cellsDir, pr); err == nil || !strings.Contains(stderr, last+".yaml") || !strings.Contains(stderr, "no cell has room") {
		t.Fatalf("evactl cells over a pull request overfilling both cells: %v\n%s", err, stderr)
	}

	// The move, with the fleet operator and the source's operator killed mid-saga.
	var moving *unstructured.Unstructured
	for _, tn := range tenants {
		if want[codeOf(tn)] == "eu-1" {
			moving = tn
			break
		}
	}
	code := codeOf(moving)
	got, err := current(ctx, moving)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(got.Object, map[string]any{"cell": "us-1"}, "spec", "placement"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	killed := map[string]bool{}
	var window availability
	deadline = time.Now().Add(within(t, 5*time.Minute))
	for {
		window.observe(servingOn(ctx, cluster.Client, code), servingOn(ctx, cell.Client, code))
		cellNow, step := cellOf(t, moving)
		switch {
		case step == "ProvisioningTarget" && !killed["fleet"]:
			killed["fleet"] = true
			ops.restart("fleet")
		case step == "RemovingSource" && !killed["eu-1"]:
			killed["eu-1"] = true
			ops.restart("eu-1")
		}
		if cellNow == "us-1" && step == "" {
			break
		}
		if time.Now().After(deadline) {
			fatalf(t, "the move of %s: cell %q, step %q after 5m", code, cellNow, step)
		}
		time.Sleep(200 * time.Millisecond)
	}
	kubectlWaitReady(t, 3*time.Minute, moving)
	for name, c := range clusters {
		waitDelivered(t, c, name, code, modules, name == "us-1")
	}
	if window.neither > 0 {
		t.Errorf("no cell served %s for %s of its move", code, window.neither.Round(time.Millisecond))
	}
	t.Logf("placed %v; operators killed during the move: %v; %s", perCell, killed, &window)
}

// cellOperators are the operators of the two-cluster scenarios: the fleet operator
// (on the suite's cluster) and one per cell, eu-1 (the suite's cluster) and us-1.
type cellOperators struct {
	start map[string]func() *testenv.Process
	procs map[string]*testenv.Process
}

// startCellOperators starts the fleet operator and the two cells' operators, each of
// these with a move drain of drain and the flags cellArgs gives for its cell (GitOps
// mode's).
func startCellOperators(t *testing.T, cell *testcluster.Cluster, cellsDir, ns string, drain time.Duration, cellArgs func(cell string) []string) *cellOperators {
	t.Helper()
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:eva-system", "system:authenticated"}
	fleetKC, err := cluster.KubeConfigAs(testenv.OperatorServiceAccount, groups...)
	if err != nil {
		t.Fatal(err)
	}
	usKC, err := cell.KubeConfigAs(testenv.OperatorServiceAccount, groups...)
	if err != nil {
		t.Fatal(err)
	}
	procEnv := []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=" + operatorNamespace}
	args := func(extra ...string) []string {
		return append([]string{"--overlays=" + cellsDir, "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--tenant-namespaces=" + ns}, extra...)
	}
	cellOperator := func(name, kubeconfig string) func() *testenv.Process {
		// On the fleet cluster, as the cell's identity (the chart's cellIdentities).
		asCell, err := cluster.KubeConfigAs("system:serviceaccount:eva-system:eva-cell-"+name, groups...)
		if err != nil {
			t.Fatal(err)
		}
		extra := []string{"--cell=" + name, "--fleet-kubeconfig=" + asCell, "--move-drain=" + drain.String()}
		if cellArgs != nil {
			extra = append(extra, cellArgs(name)...)
		}
		return func() *testenv.Process { return testenv.StartOperator(t, kubeconfig, procEnv, args(extra...)...) }
	}
	ops := &cellOperators{procs: map[string]*testenv.Process{}, start: map[string]func() *testenv.Process{
		"fleet": func() *testenv.Process { return testenv.StartOperator(t, fleetKC, procEnv, args()...) },
		"eu-1":  cellOperator("eu-1", fleetKC),
		"us-1":  cellOperator("us-1", usKC),
	}}
	for name, start := range ops.start {
		ops.procs[name] = start()
	}
	return ops
}

// restart kills an operator (SIGKILL) and starts it again.
func (o *cellOperators) restart(name string) {
	o.procs[name].Kill()
	o.procs[name] = o.start[name]()
}

// availability is the window of a move, polled: how long both cells served the tenant
// (an Ingress with a load-balancer address), and how long neither did.
type availability struct {
	both, neither time.Duration
	polled        time.Time
}

// observe adds the time since the last poll to what this poll found.
func (a *availability) observe(eu, us bool) {
	now := time.Now()
	if a.polled.IsZero() {
		a.polled = now
	}
	switch {
	case eu && us:
		a.both += now.Sub(a.polled)
	case !eu && !us:
		a.neither += now.Sub(a.polled)
	}
	a.polled = now
}

func (a *availability) String() string {
	return fmt.Sprintf("both cells served the moving tenant for %s, neither for %s",
		a.both.Round(100*time.Millisecond), a.neither.Round(100*time.Millisecond))
}

// servingOn says whether c holds the tenant's Ingress with a load-balancer address.
func servingOn(ctx context.Context, c client.Client, code string) bool {
	var ing networkingv1.Ingress
	err := c.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.IngressName(code)}, &ing)
	return err == nil && ing.DeletionTimestamp.IsZero() && len(ing.Status.LoadBalancer.Ingress) > 0
}
