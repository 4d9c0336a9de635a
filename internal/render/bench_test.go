package render

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// BenchmarkRenderFleet renders 10,000 tenants of mixed tiers to disk (chart
// verification off) and, in the same run, builds a sample of the same tenants the way
// a team would without Eva: a kustomize base plus one overlay per tenant, each built
// with `kubectl kustomize`. It reports tenants/s, MB/s and the per-tenant ratio.
func BenchmarkRenderFleet(b *testing.B) { renderFleet(b, benchDir, true) }

// BenchmarkRenderFleetDisk is the same render written to the work disk (os.TempDir),
// where creating 30,000 files costs what the machine's file system costs.
func BenchmarkRenderFleetDisk(b *testing.B) {
	renderFleet(b, func(b *testing.B) string { return b.TempDir() }, false)
}

func renderFleet(b *testing.B, dirFor func(*testing.B) string, compare bool) {
	const fleet = 10_000
	r := renderer(b)
	tenants := syntheticTenants(fleet)
	// evactl render runs with this garbage collector target (cli.RenderGCPercent).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	var evaPerTenant time.Duration
	for b.Loop() {
		dir := dirFor(b)
		start := time.Now()
		stats, err := r.Tree(tenants, func(f File) error {
			p := filepath.Join(dir, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, f.Data, 0o644)
		}, nil)
		elapsed := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		evaPerTenant = elapsed / fleet
		b.ReportMetric(elapsed.Seconds(), "s/fleet")
		b.ReportMetric(float64(stats.Tenants)/elapsed.Seconds(), "tenants/s")
		b.ReportMetric(float64(stats.Bytes)/(1<<20)/elapsed.Seconds(), "MB/s")
		b.ReportMetric(float64(stats.Objects), "objects")
	}
	if !compare {
		return
	}
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		per := kustomizeWay(b, kubectl, r, tenants[:40])
		b.ReportMetric(float64(per.Microseconds())/1000, "kustomize-ms/tenant")
		b.ReportMetric(float64(evaPerTenant.Microseconds())/1000, "eva-ms/tenant")
		b.ReportMetric(float64(per)/float64(evaPerTenant), "speedup-x")
	} else {
		b.Log("kubectl not found: the kustomize comparison is skipped")
	}
}

// kustomizeWay builds tenants as a base and one overlay each with kubectl kustomize,
// returning the time per tenant. The base is one rendered tenant per tier; each overlay
// sets the namespace, the capsule label and patches what differs per tenant (stream
// names and subjects, the host, the identity values).
func kustomizeWay(b *testing.B, kubectl string, r *Renderer, tenants []*evav1.EvaTenant) time.Duration {
	dir := b.TempDir()
	for _, tier := range evav1.Tiers {
		bundle, err := r.Bundle(tenantFor("BASEXX", withTier(tier)))
		if err != nil {
			b.Fatal(err)
		}
		data, _ := bundle.Manifest()
		base := filepath.Join(dir, "base", strings.ToLower(string(tier)))
		must(b, os.MkdirAll(base, 0o755))
		must(b, os.WriteFile(filepath.Join(base, "manifests.yaml"), data, 0o644))
		must(b, os.WriteFile(filepath.Join(base, "kustomization.yaml"), []byte("resources:\n- manifests.yaml\n"), 0o644))
	}
	var overlays []string
	for _, t := range tenants {
		code, lower := t.Spec.CapsuleCode, strings.ToLower(t.Spec.CapsuleCode)
		ov := filepath.Join(dir, "overlays", lower)
		must(b, os.MkdirAll(ov, 0o755))
		k := fmt.Sprintf(`resources:
- ../../base/%s
namespace: eva-tenant-%s
labels:
- pairs:
    eva.aidonow.com/capsule: %s
patches:
- target: {kind: Stream, name: eva-basexx-events}
  patch: |-
    - {op: replace, path: /metadata/name, value: eva-%s-events}
    - {op: replace, path: /spec/name, value: eva-%s-events}
    - {op: replace, path: /spec/subjects/0, value: "capsule.%s.events.>"}
- target: {kind: Stream, name: eva-basexx-commands}
  patch: |-
    - {op: replace, path: /metadata/name, value: eva-%s-commands}
    - {op: replace, path: /spec/name, value: eva-%s-commands}
    - {op: replace, path: /spec/subjects/0, value: "capsule.%s.commands.>"}
- target: {kind: Ingress}
  patch: |-
    - {op: replace, path: /spec/rules/0/host, value: %s.dev.eva.example.com}
- target: {kind: HelmRelease}
  patch: |-
    - {op: replace, path: /spec/values/capsule/code, value: %s}
    - {op: replace, path: /spec/values/capsule/namespace, value: eva-tenant-%s}
    - {op: replace, path: /spec/values/capsule/queues/events, value: eva-%s-events}
    - {op: replace, path: /spec/values/capsule/queues/commands, value: eva-%s-commands}
`, strings.ToLower(string(t.Spec.Tier)), lower, code, lower, code, code, lower, code, code, lower, code, lower, code, code)
		must(b, os.WriteFile(filepath.Join(ov, "kustomization.yaml"), []byte(k), 0o644))
		overlays = append(overlays, ov)
	}
	start := time.Now()
	for _, ov := range overlays {
		out, err := exec.Command(kubectl, "kustomize", ov).CombinedOutput()
		if err != nil {
			b.Fatalf("kubectl kustomize %s: %v\n%s", ov, err, out)
		}
	}
	return time.Since(start) / time.Duration(len(overlays))
}

// benchDir returns an empty folder for the rendered tree: on the memory file system
// when the machine has one (EVA_BENCH_DIR overrides), so the figure measures Eva rather
// than the disk; BenchmarkRenderFleetDisk measures the same on the work disk.
func benchDir(b *testing.B) string {
	base := os.Getenv("EVA_BENCH_DIR")
	if base == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			base = "/dev/shm"
		}
	}
	if base == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(base, "eva-bench-")
	must(b, err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
