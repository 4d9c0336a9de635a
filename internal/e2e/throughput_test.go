package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

// throughputRun is one measured delivery: a fleet installed through some Flux shards,
// then a platform release through three waves.
type throughputRun struct {
	shards, tenants, releases int
	toActive, rollout         time.Duration
	// apiCPU is the API server's and etcd's CPU, helmCPU every helm-controller's, over
	// the run.
	apiCPU, helmCPU time.Duration
	// capRuns are the single-wave releases with and without a cap (measureReleases),
	// when asked for.
	capRuns []releaseRun
}

// TestThroughputReport measures delivery on the real controllers, the figures
// docs/sharding.md sizes shards with (`make throughput`; skipped unless
// EVA_THROUGHPUT_SHARDS lists the shard counts to measure, such as 1,2,4). For each
// count it starts that many Flux shards (source-, kustomize- and helm-controller, the
// environment's fluxShards spreading the tenants over them), creates
// EVA_THROUGHPUT_TENANTS Starter tenants (default 30) at once with the operator in
// pure-cluster mode, and times them to all Active; then an EvaRollout bringing crm
// 1.5.0 to every tenant through three waves (maxUpdate 100%, no bake) is timed to
// Complete. With EVA_THROUGHPUT_CAP (releases a minute per helm-controller) it then
// releases crm to every tenant through the three waves with EVA_THROUGHPUT_READY_TIMEOUT
// (default 1m), first without a cap and then with helmReleasesPerMinute at that figure
// (measureReleases). It writes the tables to EVA_THROUGHPUT_REPORT (default
// out/throughput.md).
func TestThroughputReport(t *testing.T) {
	counts := os.Getenv("EVA_THROUGHPUT_SHARDS")
	if counts == "" {
		t.Skip("EVA_THROUGHPUT_SHARDS unset: run `make throughput`")
	}
	parallel(t)
	tenants := 30
	if n := os.Getenv("EVA_THROUGHPUT_TENANTS"); n != "" {
		if _, err := fmt.Sscan(n, &tenants); err != nil || tenants < 3 {
			t.Fatalf("EVA_THROUGHPUT_TENANTS=%q: want a number of at least 3", n)
		}
	}
	pushCrmVersions(t)
	var runs []throughputRun
	for i, field := range strings.Split(counts, ",") {
		shards, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || shards < 1 {
			t.Fatalf("EVA_THROUGHPUT_SHARDS=%q: %q is not a shard count", counts, field)
		}
		run := measureDelivery(t, i, shards, tenants)
		t.Logf("%d shard(s): %d tenants (%d releases) Active in %s, crm to all through three waves in %s; API server and etcd %s CPU, helm-controllers %s",
			run.shards, run.tenants, run.releases, run.toActive.Round(time.Second), run.rollout.Round(time.Second), run.apiCPU.Round(time.Second), run.helmCPU.Round(time.Second))
		runs = append(runs, run)
	}
	out := os.Getenv("EVA_THROUGHPUT_REPORT")
	if out == "" {
		out = filepath.Join(testenv.RepoRoot(), "out", "throughput.md")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	report := throughputTable(runs)
	var capRuns []releaseRun
	for _, r := range runs {
		capRuns = append(capRuns, r.capRuns...)
	}
	if len(capRuns) > 0 {
		report += "\n" + releaseTable(capRuns)
	}
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("throughput report written to %s:\n%s", out, report)
}

// measureDelivery runs one measurement with shards Flux shards.
func measureDelivery(t *testing.T, round, shards, tenants int) throughputRun {
	ctx := context.Background()
	var names []string
	for s := range shards {
		name := fmt.Sprintf("tp%d-%d", round, s+1)
		stop, err := cluster.StartFluxShard(name)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		names = append(names, name)
	}
	ns := tenantNamespace(t, fmt.Sprintf("e2e-throughput-%d", round))
	settings := map[string]any{"fluxShards": map[string]any{"shards": names}}
	op := startOperator(t, ns, "--overlays="+environment(t, settings))
	defer func() { op.Kill() }()
	apiBefore, helmBefore := cpuOf(t)
	start := time.Now()
	var all []*unstructured.Unstructured
	for i := range tenants {
		tn := evaTenant(ns, fmt.Sprintf("TP%c%c%c%c", 'A'+round, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26), evav1.TierStarter)
		if err := unstructured.SetNestedField(tn.Object, int64(i%3+1), "spec", "wave"); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		all = append(all, tn)
	}
	kubectlWaitReady(t, 30*time.Minute, all...)
	run := throughputRun{shards: shards, tenants: tenants, toActive: time.Since(start)}
	releases := &unstructured.UnstructuredList{}
	releases.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	if err := cluster.Client.List(ctx, releases, client.HasLabels{"eva.aidonow.com/capsule"}); err != nil {
		t.Fatal(err)
	}
	for _, hr := range releases.Items {
		if slices.ContainsFunc(all, func(tn *unstructured.Unstructured) bool {
			return codeOf(tn) == hr.GetLabels()["eva.aidonow.com/capsule"]
		}) {
			run.releases++
		}
	}
	start = time.Now()
	waves := []map[string]any{
		{"wave": int64(1), "maxUpdate": "100%"}, {"wave": int64(2), "maxUpdate": "100%"}, {"wave": int64(3), "maxUpdate": "100%"}}
	createRollout(t, ns, "throughput", crmFixed, "30m", waves...)
	waitRollout(t, ns, "throughput", 30*time.Minute, evav1.RolloutComplete)
	run.rollout = time.Since(start)
	if readyTimeout, perMinute, ok := releaseSettings(t); ok {
		run.capRuns = measureReleases(t, ns, &op, settings, shards, tenants, readyTimeout, perMinute)
	}
	apiAfter, helmAfter := cpuOf(t)
	run.apiCPU, run.helmCPU = apiAfter-apiBefore, helmAfter-helmBefore
	deleteAndWaitGone(t, 15*time.Minute, all...)
	return run
}

// cpuOf reads the CPU used so far by the API server and etcd, and by every
// helm-controller.
func cpuOf(t *testing.T) (api, helm time.Duration) {
	t.Helper()
	api, err := testenv.ControlPlaneCPU()
	if err != nil {
		t.Fatal(err)
	}
	if helm, err = cluster.CPU("helm-controller"); err != nil {
		t.Fatal(err)
	}
	return api, helm
}

// throughputTable renders the runs as the Markdown table docs/sharding.md quotes.
func throughputTable(runs []throughputRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| Flux shards | tenants | releases | time to all Active | releases a minute (all shards) | per shard | crm to every tenant, three waves | API server + etcd CPU | helm-controllers CPU |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		perMinute := float64(r.releases) / r.toActive.Minutes()
		fmt.Fprintf(&b, "| %d | %d | %d | %s | %.1f | %.1f | %s | %s | %s |\n", r.shards, r.tenants, r.releases,
			r.toActive.Round(time.Second), perMinute, perMinute/float64(r.shards), r.rollout.Round(time.Second),
			r.apiCPU.Round(time.Second), r.helmCPU.Round(time.Second))
	}
	return b.String()
}
