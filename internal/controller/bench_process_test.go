package controller

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/testenv"
)

// BenchmarkOperatorProcess runs the eva-operator binary as deployed: its own process,
// pure-cluster mode, dev environment, --concurrency=8, against the envtest API server,
// with the stand-in (in the benchmark's process) playing helm-controller and the other
// controllers. It applies 1,000 tenants of the fleet mix at once and reports the time
// until all are Active and the peak resident memory (VmHWM) of each operator process:
// shards-1 is one process holding the whole fleet, shards-2 splits the same fleet
// between two processes started with --shard (half the tenants labelled for each), which
// shows what memory one shard costs per tenant it holds.
func BenchmarkOperatorProcess(b *testing.B) {
	const fleet = 1000
	startStandIn(b)
	kubeconfig, err := env.KubeConfigFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	overlays := filepath.Join(testenv.RepoRoot(), "overlays")
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards-%d", shards), func(b *testing.B) {
			for b.Loop() {
				ns := newTestNamespace(b)
				var procs []*testenv.Process
				for s := range shards {
					args := []string{"--overlays=" + overlays, "--env=dev", "--concurrency=8", "--tenant-namespaces=" + ns,
						"--claims-namespace=" + claimsNamespace, "--metrics-bind-address=0", "--health-probe-bind-address=0"}
					if shards > 1 {
						args = append(args, fmt.Sprintf("--shard=%s=bench-%d", shard.Label, s))
					}
					procs = append(procs, testenv.StartOperator(b, kubeconfig, []string{"POD_NAMESPACE=" + claimsNamespace}, args...))
				}
				start := time.Now()
				// Codes of their own per sub-benchmark: a purged tenant's claim stays.
				createFleet(b, ns, string(rune('O'+shards))+"P", fleet, func(i int) []tenantOpt {
					if shards == 1 {
						return nil
					}
					return []tenantOpt{func(t *evav1.EvaTenant) {
						t.Labels = map[string]string{shard.Label: fmt.Sprintf("bench-%d", i%shards)}
					}}
				})
				waitAllActive(b, ns, fleet)
				b.ReportMetric(time.Since(start).Seconds(), "s-to-all-Active")
				var maxRSS int64
				for _, p := range procs {
					rss, err := p.PeakRSS()
					if err != nil {
						b.Fatal(err)
					}
					maxRSS = max(maxRSS, rss)
					p.Kill()
				}
				b.ReportMetric(float64(maxRSS)/(1<<20), "peak-RSS-MiB/process")
			}
		})
	}
}
