package controller

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// cellsOverlays writes an overlays folder whose dev environment has two cells, each
// with room for two Starter tenants (4 CPU), and returns its path.
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
    capacity: {cpu: "4", memory: 8Gi}
  - name: us-1
    labels: {region: us}
    path: cells/us-1
    capacity: {cpu: "4", memory: 8Gi}
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

// TestCellsPlaceAndDeliverAcrossTwoAPIServers runs the operator binary as deployed, in
// the three roles of an environment with two cells, on two API servers: the fleet
// operator and eu-1's operator on the fleet cluster (the suite's), us-1's operator on a
// second API server, reaching the fleet cluster through its kubeconfig. Four Starter
// tenants are placed as evactl places the same tenants as files, two on each cell; each
// is delivered only into its own cell's API server, and its conditions are written on the
// fleet cluster by its cell's operator. A fifth tenant fits nowhere: it is refused with a
// NotPlaced event, and a cell label written by the tenant's author delivers it nowhere
// (status.cell, which only the fleet operator writes, decides).
func TestCellsPlaceAndDeliverAcrossTwoAPIServers(t *testing.T) {
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

	ns := newTestNamespace(t)
	overlays := cellsOverlays(t)
	fleetKubeconfig := env.KubeConfigAs(t, testenv.OperatorServiceAccount)
	procEnv := []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=" + claimsNamespace}
	args := func(extra ...string) []string {
		return append([]string{"--overlays=" + overlays, "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--tenant-namespaces=" + ns}, extra...)
	}
	testenv.StartOperator(t, fleetKubeconfig, procEnv, args()...)
	testenv.StartOperator(t, fleetKubeconfig, procEnv, args("--cell=eu-1", "--fleet-kubeconfig="+fleetKubeconfig)...)
	testenv.StartOperator(t, cellEnv.KubeConfigAs(t, testenv.OperatorServiceAccount), procEnv,
		args("--cell=us-1", "--fleet-kubeconfig="+fleetKubeconfig)...)

	var tenants []*evav1.EvaTenant
	for _, code := range []string{"CELLAA", "CELLAB", "CELLAC", "CELLAD"} {
		tn := newTenant(ns, code, evav1.TierStarter)
		createTenant(t, tn)
		tenants = append(tenants, tn)
	}
	want := evactlPlacements(t, overlays, tenants)
	if len(want) != 4 {
		t.Fatalf("evactl places %v", want)
	}
	clusters := map[string]client.Client{"eu-1": k8s, "us-1": cellClient}
	for _, tn := range tenants {
		code, cell := tn.Spec.CapsuleCode, want[tn.Spec.CapsuleCode]
		eventually(t, 90*time.Second, code+" placed and its namespace ready", func() error {
			got := getTenant(t, tn)
			if got.Status.Cell != cell {
				return fmt.Errorf("status.cell %q, evactl places it on %s", got.Status.Cell, cell)
			}
			if c := condition(got, evav1.ConditionNamespaceReady); c.Status != metav1.ConditionTrue {
				return fmt.Errorf("NamespaceReady %s: %s", c.Status, c.Message)
			}
			return nil
		})
		for name, c := range clusters {
			var nsObj corev1.Namespace
			err := c.Get(context.Background(), types.NamespacedName{Name: tenant.Namespace(code)}, &nsObj)
			switch {
			case name == cell && err != nil:
				t.Fatalf("%s is placed on %s, whose API server has no namespace for it: %v", code, cell, err)
			case name != cell && !apierrors.IsNotFound(err):
				t.Fatalf("%s is placed on %s, and cell %s holds its namespace too (%v)", code, cell, name, err)
			}
		}
	}

	// Full: the fifth tenant is refused, whatever cell label its author wrote.
	extra := newTenant(ns, "CELLAE", evav1.TierStarter, func(tn *evav1.EvaTenant) {
		tn.Labels = map[string]string{tenant.LabelCell: "us-1"}
	})
	createTenant(t, extra)
	eventually(t, 60*time.Second, "CELLAE refused", func() error {
		for _, r := range eventReasons(t, extra) {
			if r == status.EventNotPlaced {
				return nil
			}
		}
		return fmt.Errorf("events %v", eventReasons(t, extra))
	})
	consistently(t, "CELLAE delivered nowhere", func() error {
		if got := getTenant(t, extra); got.Status.Cell != "" || len(got.Status.Conditions) > 0 {
			return fmt.Errorf("status.cell %q, conditions %v", got.Status.Cell, got.Status.Conditions)
		}
		for name, c := range clusters {
			var nsObj corev1.Namespace
			if err := c.Get(context.Background(), types.NamespacedName{Name: tenant.Namespace("CELLAE")}, &nsObj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("cell %s holds its namespace (%v)", name, err)
			}
		}
		return nil
	})
	if got := strings.Join(eventReasons(t, tenants[0]), ","); !strings.Contains(got, status.EventPlaced) {
		t.Errorf("CELLAA's events lack %s: %s", status.EventPlaced, got)
	}
}
