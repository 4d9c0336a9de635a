package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

// chaosRounds is how many tenants go through the three kill points: one per tier, the
// modes alternating, so each tier is killed once and each mode twice (a fifth round
// would repeat the first's tier and mode).
var chaosRounds = len(evav1.Tiers)

// onceEvents are the events a tenant's life records at most once, whatever happens to
// the operator: each marks a transition the status records before the event is sent.
var onceEvents = []string{"ProvisioningStarted", "NamespaceCreated", "SeedLoaded", "ModuleDeployComplete",
	"IngressProvisioned", "ProvisioningComplete", "DeprovisionStarted", "DeprovisionComplete"}

// TestOperatorSurvivesSIGKILL kills the operator process with SIGKILL at three moments of
// a tenant's life, one round per tier (one tenant and one operator each, the tiers in turn,
// pure-cluster and GitOps mode alternating, the rounds side by side), while the real
// Flux controllers work on the same objects: right after NamespaceReady turns True,
// right after Provisioned turns True, and in the middle of the decommission saga (while
// it waits for helm-controller to uninstall the releases, or for the namespace to go).
// After each kill a new operator process starts (the GitOps one on the same git cache,
// as a restarted container on its emptyDir). Every round must converge: Active with
// exactly one namespace, two streams and one HelmRelease per module, then gone; no event
// recorded twice.
func TestOperatorSurvivesSIGKILL(t *testing.T) {
	parallelGroup(t)
	watcher, err := client.NewWithWatch(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for round := range chaosRounds {
		t.Run(fmt.Sprintf("round%d", round+1), func(t *testing.T) {
			parallel(t)
			chaosRound(t, watcher, round)
		})
	}
}

func chaosRound(t *testing.T, watcher client.WithWatch, round int) {
	ctx := context.Background()
	tier := evav1.Tiers[round%len(evav1.Tiers)]
	code := fmt.Sprintf("CHAOS%c", 'A'+round)
	ns := tenantNamespace(t, fmt.Sprintf("e2e-chaos-%d", round+1))
	var args []string
	mode := "pure-cluster"
	if round%2 == 1 {
		source := fmt.Sprintf("eva-chaos-%d", round+1)
		url := newGitRepository(t, source+".git")
		if err := bootstrapSource(ctx, "GitRepository", source, url, "main", "10s"); err != nil {
			t.Fatal(err)
		}
		args = []string{"--overlays=" + environment(t, gitOpsSource("GitRepository", source)),
			"--publish=git", "--git-url=" + url, "--git-branch=main", "--git-cache=" + t.TempDir()}
		mode = "GitOps"
	}
	t.Logf("%s (%s), %s mode", code, tier, mode)
	tn := evaTenant(ns, code, tier)
	op := startOperator(t, ns, args...)
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	killWhen(t, watcher, op, tn, "NamespaceReady True", func(u *unstructured.Unstructured) bool {
		return conditionOf(u, evav1.ConditionNamespaceReady).Status == "True"
	})
	op = startOperator(t, ns, args...)
	killWhen(t, watcher, op, tn, "Provisioned True", func(u *unstructured.Unstructured) bool {
		return conditionOf(u, evav1.ConditionProvisioned).Status == "True"
	})
	op = startOperator(t, ns, args...)
	kubectlWaitReady(t, 6*time.Minute, tn)
	assertActive(t, tn)

	if err := cluster.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	killWhen(t, watcher, op, tn, "decommission saga under way", func(u *unstructured.Unstructured) bool {
		ready := conditionOf(u, evav1.ConditionReady)
		return ready.Reason == "Decommissioning" || ready.Reason == "NamespaceTerminating"
	})
	startOperator(t, ns, args...)
	waitGone(t, 5*time.Minute, tn)
	for _, reason := range onceEvents {
		if n, seen := countEvents(t, ns, tn.GetName(), reason); n > 1 {
			t.Errorf("%s: event %s recorded %d times:\n%s", code, reason, n, strings.Join(seen, "\n"))
		}
	}
}

// killWhen watches a tenant and SIGKILLs the operator the moment reached says so.
func killWhen(t *testing.T, watcher client.WithWatch, op *testenv.Process, tn *unstructured.Unstructured, what string,
	reached func(*unstructured.Unstructured) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tn.GroupVersionKind().GroupVersion().WithKind("EvaTenantList"))
	w, err := watcher.Watch(ctx, list, client.InNamespace(tn.GetNamespace()), client.MatchingFields{"metadata.name": tn.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	last := "no status yet"
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		last = fmt.Sprint(conditionsOf(u))
		if reached(u) {
			op.Kill()
			t.Logf("%s: SIGKILL at %s (resourceVersion %s)", tn.GetName(), what, u.GetResourceVersion())
			return
		}
	}
	t.Fatalf("%s: %s not reached within 5m (watch ended); last conditions %s\noperator: %s", tn.GetName(), what, last, op.Tail(3000))
}
