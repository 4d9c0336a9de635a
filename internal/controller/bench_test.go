package controller

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/testenv"
)

// countingClient counts the operator's API writes, and its dry runs apart when dryRuns
// is set.
type countingClient struct {
	client.Client
	writes, dryRuns *atomic.Int64
}

func (c countingClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	c.writes.Add(1)
	return c.Client.Create(ctx, o, opts...)
}
func (c countingClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	c.writes.Add(1)
	return c.Client.Update(ctx, o, opts...)
}
func (c countingClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	if isDryRun(opts) {
		if c.dryRuns != nil {
			c.dryRuns.Add(1)
		}
	} else {
		c.writes.Add(1)
	}
	return c.Client.Patch(ctx, o, p, opts...)
}
func (c countingClient) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	c.writes.Add(1)
	return c.Client.Delete(ctx, o, opts...)
}
func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status(), c.writes}
}

type countingStatus struct {
	client.SubResourceWriter
	writes *atomic.Int64
}

func (c countingStatus) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.writes.Add(1)
	return c.SubResourceWriter.Patch(ctx, o, p, opts...)
}
func (c countingStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	c.writes.Add(1)
	return c.SubResourceWriter.Update(ctx, o, opts...)
}

// BenchmarkOperatorFleet applies 1,000 tenants of mixed tiers at once and measures the
// time until all are Active (with the stand-in playing the other controllers), the
// operator's API writes per tenant and the process's peak heap (the stand-in and its
// embedded JetStream included). Then a new operator takes over the Active fleet: its
// writes while it looks at every tenant, and its writes, requests and CPU per
// tenant-hour of drift checks when nothing drifts (idleFleet).
//
// On a machine of few cores the time to all Active is bounded by CPU, not by waiting:
// the benchmark also reports what the fleet cost it, per tenant: the operator's API
// requests of any kind (reads and Events included), the CPU time of the API server and
// etcd, and the CPU time of this process (the operator, the stand-in and its JetStream).
// Their sum over the cores is a floor under the time.
func BenchmarkOperatorFleet(b *testing.B) {
	const fleet = 1000
	startStandIn(b)
	for b.Loop() {
		var writes, requests atomic.Int64
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} })
		_, stop := startBenchOperator(b, cfg, countingClient{writes: &writes}, 0)

		var peak atomic.Uint64
		stopSampling := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-stopSampling:
					return
				case <-time.After(100 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}()

		ns := newTestNamespace(b)
		cost := startCPUCost(b)
		requests.Store(0)
		start := time.Now()
		createFleet(b, ns, "BN", 0, fleet, nil)
		waitAllActive(b, ns, fleet)
		elapsed := time.Since(start)
		close(stopSampling)
		cost.report(b, fleet)
		b.ReportMetric(elapsed.Seconds(), "s-to-all-Active")
		b.ReportMetric(float64(writes.Load())/fleet, "writes/tenant")
		b.ReportMetric(float64(requests.Load())/fleet, "requests/tenant")
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		stop()
		idle := idleFleet(b, fleet)
		b.ReportMetric(float64(idle.restartWrites), "writes-at-restart")
		b.ReportMetric(float64(idle.restartDryRuns), "dry-runs-at-restart")
		b.ReportMetric(idle.restartRequests/fleet, "requests-at-restart/tenant")
		b.ReportMetric(idle.restartSeconds, "s-to-look-at-fleet")
		b.ReportMetric(idle.writesPerTenantHour, "idle-writes/tenant-hour")
		b.ReportMetric(idle.dryRunsPerTenantHour, "idle-dry-runs/tenant-hour")
		b.ReportMetric(idle.requestsPerTenantHour, "idle-requests/tenant-hour")
		b.ReportMetric(idle.cpuMsPerTenantHour, "idle-cpu-ms/tenant-hour")
	}
}

// startBenchOperator starts an operator on cfg whose writes go through counting (its
// Client is set here), with drift checks resync apart (zero: ResyncActive). stop stops it
// and waits until it has.
func startBenchOperator(b *testing.B, cfg *rest.Config, counting countingClient, resync time.Duration,
	configure ...func(*EvaTenantReconciler, ctrl.Manager)) (*EvaTenantReconciler, func()) {
	b.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: CacheOptions(claimsNamespace, shard.Selector{}, false, nil), Controller: controllerConfig(),
	})
	if err != nil {
		b.Fatal(err)
	}
	counting.Client = mgr.GetClient()
	r := &EvaTenantReconciler{Client: counting, Recorder: mgr.GetEventRecorder("eva-bench"),
		Renderer: testRenderer(b), APIReader: mgr.GetAPIReader(), resync: resync,
		Claims: &claim.Store{Client: counting, Reader: mgr.GetAPIReader(), Namespace: claimsNamespace}}
	for _, c := range configure {
		c(r, mgr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.SetupWithManager(ctx, mgr, 8); err != nil {
		cancel()
		b.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { _ = mgr.Start(ctx); close(stopped) }()
	return r, func() { cancel(); <-stopped }
}

// idleResults are what an operator restarted over an Active fleet costs: its writes
// while it looks at every tenant once, then its writes and API requests per tenant and
// hour of drift checks (12 per hour) when nothing drifts, and the CPU they take.
type idleResults struct {
	restartWrites, restartDryRuns int64
	// restartRequests are the API requests of the restarted operator's first look at
	// every tenant (reads included), restartSeconds how long that took.
	restartRequests, restartSeconds                                  float64
	writesPerTenantHour, dryRunsPerTenantHour, requestsPerTenantHour float64
	// cpuMsPerTenantHour is this process's CPU time (the operator's drift checks; the
	// stand-in is idle) per tenant and hour.
	cpuMsPerTenantHour float64
}

// idleFleet starts a new operator over the fleet, waits until it has looked at every
// tenant, then lets it run drift checks 2 s apart (instead of 5 minutes) for 30 s and
// counts its writes and its requests to the API server.
func idleFleet(b *testing.B, fleet int) idleResults {
	b.Helper()
	var writes, dryRuns, requests atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} })
	r, stop := startBenchOperator(b, cfg, countingClient{writes: &writes, dryRuns: &dryRuns}, 2*time.Second)
	defer stop()
	started := time.Now()
	deadline := started.Add(5 * time.Minute)
	for looked := 0; looked < fleet; {
		if time.Now().After(deadline) {
			b.Fatalf("the restarted operator looked at %d of %d tenants in 5 minutes", looked, fleet)
		}
		time.Sleep(250 * time.Millisecond)
		looked = 0
		r.lastApply.Range(func(any, any) bool { looked++; return true })
	}
	out := idleResults{restartWrites: writes.Load(), restartDryRuns: dryRuns.Load(),
		restartRequests: float64(requests.Load()), restartSeconds: time.Since(started).Seconds()}
	reconcilesBefore := reconcileTotal(b)
	writes.Store(0)
	dryRuns.Store(0)
	requests.Store(0)
	cpuBefore := selfCPU(b)
	time.Sleep(30 * time.Second)
	cpu := selfCPU(b) - cpuBefore
	checks := reconcileTotal(b) - reconcilesBefore
	if checks < float64(fleet) {
		b.Fatalf("only %.0f drift checks in 30 s for %d tenants", checks, fleet)
	}
	tenantHours := checks / float64(time.Hour/ResyncActive)
	out.writesPerTenantHour = float64(writes.Load()) / tenantHours
	out.dryRunsPerTenantHour = float64(dryRuns.Load()) / tenantHours
	out.requestsPerTenantHour = float64(requests.Load()) / tenantHours
	out.cpuMsPerTenantHour = float64(cpu.Microseconds()) / 1000 / tenantHours
	return out
}

// countingTransport counts the requests sent to the API server.
type countingTransport struct {
	http.RoundTripper
	n *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.RoundTripper.RoundTrip(req)
}

// reconcileTotal is controller-runtime's count of the tenant controller's reconciles.
func reconcileTotal(b *testing.B) float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "evatenant" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// fleetTiers is the tier mix of the operator benchmarks' fleets: 70% Starter, 20%
// Customer, 10% Enterprise.
var fleetTiers = []evav1.Tier{evav1.TierStarter, evav1.TierStarter, evav1.TierStarter, evav1.TierStarter, evav1.TierStarter,
	evav1.TierStarter, evav1.TierStarter, evav1.TierCustomer, evav1.TierCustomer, evav1.TierEnterprise}

// createFleet creates tenants from to to-1 of a fleet in ns at once (16 creates in
// flight), codes prefix and four letters, tiers in the fleet mix; opts, when set, adds
// options to tenant i.
func createFleet(b *testing.B, ns, prefix string, from, to int, opts func(i int) []tenantOpt) {
	b.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			code := fmt.Sprintf("%s%c%c%c%c", prefix, 'A'+i/17576%26, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26)
			var o []tenantOpt
			if opts != nil {
				o = opts(i)
			}
			if err := k8s.Create(context.Background(), newTenant(ns, code, fleetTiers[i%len(fleetTiers)], o...)); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

// cpuCost is the CPU time used by the control plane and this process since it started.
type cpuCost struct{ controlPlane, self time.Duration }

func startCPUCost(b *testing.B) cpuCost {
	b.Helper()
	cp, err := testenv.ControlPlaneCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpuCost{controlPlane: cp, self: selfCPU(b)}
}

// report reports the CPU time per tenant since c: the API server's and etcd's, and this
// process's.
func (c cpuCost) report(b *testing.B, tenants int) {
	b.Helper()
	cp, err := testenv.ControlPlaneCPU()
	if err != nil {
		b.Fatal(err)
	}
	perTenant := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(tenants) }
	b.ReportMetric(perTenant(cp-c.controlPlane), "apiserver-etcd-cpu-ms/tenant")
	b.ReportMetric(perTenant(selfCPU(b)-c.self), "bench-process-cpu-ms/tenant")
}

// selfCPU is the CPU time, user and system, this process has used.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitAllActive waits until n tenants in ns (those opts select) are Active, for at most
// 10 minutes a thousand tenants. It lists them once a second (every 10 s past a thousand): listing a
// thousand tenants costs the API server as much as a few tenants' provisioning.
func waitAllActive(b *testing.B, ns string, n int, opts ...client.ListOption) {
	b.Helper()
	limit := 10 * time.Minute * time.Duration(max(1, n/1000))
	poll := time.Second * time.Duration(min(10, max(1, n/1000)))
	deadline := time.Now().Add(limit)
	for {
		var list evav1.EvaTenantList
		if err := k8s.List(context.Background(), &list, append(opts, client.InNamespace(ns))...); err != nil {
			b.Fatal(err)
		}
		active := 0
		for _, t := range list.Items {
			if t.Status.Phase == evav1.PhaseActive {
				active++
			}
		}
		if active == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d tenants Active after %s", active, n, limit)
		}
		time.Sleep(poll)
	}
}
