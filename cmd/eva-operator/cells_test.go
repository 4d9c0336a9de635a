package main

import (
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidonow/eva/internal/shard"
)

// TestLeaderElectionIDs: each role, cell, operator version and shard elects its own
// leader, on a Lease name the API server accepts, and replicas alike share one.
func TestLeaderElectionIDs(t *testing.T) {
	sharded, err := shard.Parse("eva.aidonow.com/shard=a")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		r             role
		cell, version string
		shards        shard.Selector
	}{
		{roleOneCluster, "", "", shard.Selector{}},
		{roleOneCluster, "", "1.2.0", shard.Selector{}},
		{roleOneCluster, "", "1.3.0", shard.Selector{}},
		{roleOneCluster, "", "v1.3.0-RC.1+build_7", sharded},
		{roleFleet, "", "1.3.0", shard.Selector{}},
		{roleCell, "eu-1", "1.3.0", shard.Selector{}},
		{roleCell, "us-1", "1.3.0", shard.Selector{}},
		{roleCell, "us-1", "1.3.0", sharded},
	}
	seen := map[string]int{}
	for i, c := range cases {
		id := leaderElectionID(c.r, c.cell, c.version, c.shards)
		if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
			t.Errorf("%+v: %q is no Lease name: %v", c, id, msgs)
		}
		if j, dup := seen[id]; dup {
			t.Errorf("%+v and %+v share the Lease %q", cases[j], c, id)
		}
		seen[id] = i
		if again := leaderElectionID(c.r, c.cell, c.version, c.shards); again != id {
			t.Errorf("%+v: %q then %q", c, id, again)
		}
	}
}

// TestChartRefusesAShardedFleetOperator: on the fleet cluster of an environment with
// cells (cell unset), the chart refuses shards, as the operator refuses --shard in the
// fleet role: each shard's placer would count the cells' room for its own tenants only.
// A cell's operator may be sharded.
func TestChartRefusesAShardedFleetOperator(t *testing.T) {
	chrt, err := loader.Load("../../deploy/charts/eva-operator")
	if err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile("../../overlays/dev/tenant/environment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kustomization, err := os.ReadFile("../../overlays/dev/tenant/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cells := string(env) + "cells:\n  - {name: eu-1, path: cells/eu-1, capacity: {cpu: \"8\", memory: 16Gi}}\n"
	render := func(values map[string]any) error {
		install := action.NewInstall(&action.Configuration{})
		install.ReleaseName, install.Namespace, install.ClientOnly, install.DryRun = "eva-operator", "eva-system", true, true
		values["environmentFiles"] = map[string]any{"environment.yaml": cells, "kustomization.yaml": string(kustomization)}
		_, err := install.Run(chrt, values)
		return err
	}
	if err := render(map[string]any{"shards": []any{"a"}}); err == nil || !strings.Contains(err.Error(), "cannot be sharded") {
		t.Errorf("a sharded fleet operator: %v", err)
	}
	if err := render(map[string]any{}); err != nil {
		t.Errorf("the fleet operator unsharded: %v", err)
	}
	if err := render(map[string]any{"shards": []any{"a"}, "cell": "eu-1", "fleetKubeconfigSecret": "fleet"}); err != nil && strings.Contains(err.Error(), "cannot be sharded") {
		t.Errorf("a cell's sharded operator: %v", err)
	}
}
