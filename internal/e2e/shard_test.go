package e2e

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestShardsSplitTheFleet runs two eva-operator processes on one tenant namespace, with
// leader election, one for shard e2e-a and one for shard e2e-b, while the real Flux
// controllers deliver the releases: each shard elects its own leader (two Leases, two
// holders), the tenants of both shards become Active with every object labelled with
// its shard, and with shard a's operator killed (SIGKILL) a new tenant of shard a stays
// untouched (no finalizer, no status: shard b's operator does not take it) while a new
// tenant of shard b is provisioned; shard a's next process picks its tenant up.
func TestShardsSplitTheFleet(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-shards")
	selectors := map[string]shard.Selector{}
	processes := map[string]*testenv.Process{}
	start := func(name string) {
		value := shard.Label + "=" + name
		sel, err := shard.Parse(value)
		if err != nil {
			t.Fatal(err)
		}
		selectors[name] = sel
		processes[name] = startOperator(t, ns, "--leader-elect", "--shard="+value)
	}
	start("e2e-a")
	start("e2e-b")
	inShard := func(code, name string) *unstructured.Unstructured {
		tn := evaTenant(ns, code, evav1.TierStarter)
		tn.SetLabels(map[string]string{shard.Label: name})
		return tn
	}
	a, b := inShard("SHARDA", "e2e-a"), inShard("SHARDB", "e2e-b")
	for _, tn := range []*unstructured.Unstructured{a, b} {
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	kubectlWaitReady(t, 6*time.Minute, a, b)
	for _, tn := range []*unstructured.Unstructured{a, b} {
		assertActive(t, tn)
		assertNamespaceShard(t, tn)
	}
	holders := map[string]string{}
	for name, sel := range selectors {
		var lease coordinationv1.Lease
		// The operators run as version 1.0.0 (startOperator): each version elects its own.
		key := types.NamespacedName{Namespace: operatorNamespace, Name: sel.LeaderElectionID("v1-0-0.eva-operator.eva.aidonow.com")}
		if err := cluster.Client.Get(ctx, key, &lease); err != nil {
			t.Fatalf("shard %s's leader Lease: %v", name, err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("shard %s's Lease %s has no holder", name, key.Name)
		}
		holders[*lease.Spec.HolderIdentity] = name
	}
	if len(holders) != 2 {
		t.Errorf("the two shards' leaders: %v, want two holders", holders)
	}

	processes["e2e-a"].Kill()
	c, d := inShard("SHARDC", "e2e-a"), inShard("SHARDD", "e2e-b")
	for _, tn := range []*unstructured.Unstructured{c, d} {
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	kubectlWaitReady(t, 6*time.Minute, d)
	assertActive(t, d)
	got, err := current(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, hasStatus := got.Object["status"]; hasStatus || len(got.GetFinalizers()) > 0 {
		t.Fatalf("shard a's tenant was worked on with shard a's operator down: finalizers %v, status %v",
			got.GetFinalizers(), got.Object["status"])
	}
	start("e2e-a")
	kubectlWaitReady(t, 6*time.Minute, c)
	assertActive(t, c)
	assertNamespaceShard(t, c)
}

// assertNamespaceShard checks a tenant's namespace carries the tenant's shard label.
func assertNamespaceShard(t *testing.T, tn *unstructured.Unstructured) {
	t.Helper()
	var nsObj corev1.Namespace
	if err := cluster.Client.Get(context.Background(), types.NamespacedName{Name: tenant.Namespace(codeOf(tn))}, &nsObj); err != nil {
		t.Fatal(err)
	}
	if got, want := nsObj.Labels[shard.Label], tn.GetLabels()[shard.Label]; got != want {
		t.Errorf("namespace %s: shard label %q, want %q", nsObj.Name, got, want)
	}
}
