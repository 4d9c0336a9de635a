package controller

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

// unservedFleet and unservedValues are the attack BenchmarkOperatorUnservedTenants
// repeats: 500 EvaTenants of about 1 MiB each (their helmValues), created by a
// requester in a namespace the operator does not serve.
const (
	unservedFleet  = 500
	unservedValues = 1 << 20
)

// BenchmarkOperatorUnservedTenants runs the operator binary as deployed, serving one
// namespace, and creates unservedFleet tenants of unservedValues bytes each in another:
// the operator's live heap must not grow with what a namespace it does not serve holds.
// It reports the live heap's growth (unserved-heap-MiB) beside what was created
// (payload-MiB), and the growth per tenant (heap-kB/unserved-tenant). Before the
// operator cached unserved namespaces' tenants slim, the same attack took a process from
// 72 MiB to 604 MiB.
func BenchmarkOperatorUnservedTenants(b *testing.B) {
	kubeconfig, err := env.KubeConfigFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	overlays := filepath.Join(testenv.RepoRoot(), "overlays")
	ensureFenceParams(b, overlays, "dev")
	for b.Loop() {
		served, unserved := newTestNamespace(b), newTestNamespace(b)
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
		pprofAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
		testenv.StartOperator(b, kubeconfig, []string{"POD_NAMESPACE=" + claimsNamespace},
			"--overlays="+overlays, "--env=dev", "--tenant-namespaces="+served, "--claims-namespace="+claimsNamespace,
			"--metrics-bind-address="+metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=0",
			"--profiler-bind-address="+pprofAddr)
		before := liveHeap(b, []string{pprofAddr})
		values := largeValues(b, unservedValues)
		createFleet(b, unserved, "UN", 0, unservedFleet, func(int) []tenantOpt {
			return []tenantOpt{func(t *evav1.EvaTenant) { t.Spec.HelmValues = values }}
		})
		b.Cleanup(func() { purgeTenants(b, unserved) })
		// Each tenant is looked at once (and warned about: NamespaceNotAllowed).
		deadline := time.Now().Add(10 * time.Minute)
		for scrapeOperatorReconciles(metricsAddr) < unservedFleet {
			if time.Now().After(deadline) {
				b.Fatalf("the operator did not look at the %d unserved tenants within 10m", unservedFleet)
			}
			time.Sleep(time.Second)
		}
		grown := float64(liveHeap(b, []string{pprofAddr}) - before)
		b.ReportMetric(grown/(1<<20), "unserved-heap-MiB")
		b.ReportMetric(float64(unservedFleet*unservedValues)/(1<<20), "payload-MiB")
		b.ReportMetric(grown/1000/unservedFleet, "heap-kB/unserved-tenant")
	}
}

// scrapeOperatorReconciles is how many times an operator's tenant controller has
// reconciled, 0 while its metrics do not answer yet.
func scrapeOperatorReconciles(addr string) float64 {
	m, err := readOperatorMetrics(addr)
	if err != nil {
		return 0
	}
	return m.reconciles
}
