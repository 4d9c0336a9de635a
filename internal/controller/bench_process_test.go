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

// operatorFleets counts the fleets BenchmarkOperatorProcess has created in this test
// process, for codes no earlier fleet claimed.
var operatorFleets int

// BenchmarkOperatorProcess runs the eva-operator binary as deployed: its own process,
// pure-cluster mode, dev environment, --concurrency=8, against the envtest API server,
// with the stand-in (in the benchmark's process) playing helm-controller and the other
// controllers. It applies 1,000 tenants of the fleet mix at once and reports the time
// until all are Active and the peak resident memory (VmHWM) of each operator process:
// shards-1 is one process holding the whole fleet, shards-2 splits the same fleet
// between two processes started with --shard (half the tenants labelled for each), which
// shows what memory one shard costs per tenant it holds. shards-1-memlimit-128MiB is
// one process run as the chart deploys it (GOMEMLIMIT from the container's memory limit)
// with a 128Mi limit: what a limit costs in time, and what peak it holds the process to.
// It also reports the CPU time per tenant of the operator processes (from start-up to
// all Active), of the API server and etcd, and of this process (the stand-in).
func BenchmarkOperatorProcess(b *testing.B) {
	const fleet = 1000
	startStandIn(b)
	kubeconfig, err := env.KubeConfigFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	overlays := filepath.Join(testenv.RepoRoot(), "overlays")
	for i, run := range []struct {
		shards   int
		memLimit string
	}{{1, ""}, {2, ""}, {1, "128MiB"}} {
		shards := run.shards
		name := fmt.Sprintf("shards-%d", shards)
		environ := []string{"POD_NAMESPACE=" + claimsNamespace}
		if run.memLimit != "" {
			name += "-memlimit-" + run.memLimit
			environ = append(environ, "GOMEMLIMIT="+run.memLimit)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ns := newTestNamespace(b)
				var procs []*testenv.Process
				for s := range shards {
					args := []string{"--overlays=" + overlays, "--env=dev", "--concurrency=8", "--tenant-namespaces=" + ns,
						"--claims-namespace=" + claimsNamespace, "--metrics-bind-address=0", "--health-probe-bind-address=0"}
					if shards > 1 {
						args = append(args, fmt.Sprintf("--shard=%s=bench-%d", shard.Label, s))
					}
					procs = append(procs, testenv.StartOperator(b, kubeconfig, environ, args...))
				}
				cost := startCPUCost(b)
				start := time.Now()
				// Codes of their own per sub-benchmark and per run (-count runs them again in
				// the same API server): a purged tenant's claim stays, and refuses its code.
				prefix := fmt.Sprintf("%c%c", 'O'+i, 'A'+operatorFleets%26)
				operatorFleets++
				createFleet(b, ns, prefix, fleet, func(i int) []tenantOpt {
					if shards == 1 {
						return nil
					}
					return []tenantOpt{func(t *evav1.EvaTenant) {
						t.Labels = map[string]string{shard.Label: fmt.Sprintf("bench-%d", i%shards)}
					}}
				})
				waitAllActive(b, ns, fleet)
				b.ReportMetric(time.Since(start).Seconds(), "s-to-all-Active")
				cost.report(b, fleet)
				var maxRSS, maxFile int64
				var operatorCPU time.Duration
				for _, p := range procs {
					cpu, err := p.CPUTime()
					if err != nil {
						b.Fatal(err)
					}
					operatorCPU += cpu
					rss, err := p.PeakRSS()
					if err != nil {
						b.Fatal(err)
					}
					file, err := p.FileRSS()
					if err != nil {
						b.Fatal(err)
					}
					maxRSS, maxFile = max(maxRSS, rss), max(maxFile, file)
					p.Kill()
				}
				b.ReportMetric(float64(operatorCPU.Microseconds())/1000/fleet, "operator-cpu-ms/tenant")
				b.ReportMetric(float64(maxRSS)/(1<<20), "peak-RSS-MiB/process")
				b.ReportMetric(float64(maxFile)/(1<<20), "file-RSS-MiB/process")
			}
		})
	}
}
