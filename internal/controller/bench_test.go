package controller

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
)

// countingClient counts the operator's API writes.
type countingClient struct {
	client.Client
	writes *atomic.Int64
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
	c.writes.Add(1)
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
// embedded JetStream included).
func BenchmarkOperatorFleet(b *testing.B) {
	const fleet = 1000
	startStandIn(b)
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		var writes atomic.Int64
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme: NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Cache: CacheOptions(claimsNamespace), Controller: controllerConfig(),
		})
		if err != nil {
			b.Fatal(err)
		}
		counting := countingClient{mgr.GetClient(), &writes}
		r := &EvaTenantReconciler{Client: counting, Recorder: mgr.GetEventRecorder("eva-bench"),
			Renderer: testRenderer(b), APIReader: mgr.GetAPIReader(),
			Claims: &claim.Store{Client: counting, Reader: mgr.GetAPIReader(), Namespace: claimsNamespace}}
		if err := r.SetupWithManager(ctx, mgr, 8); err != nil {
			b.Fatal(err)
		}
		go func() { _ = mgr.Start(ctx) }()

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
		tiers := []evav1.Tier{evav1.TierStarter, evav1.TierStarter, evav1.TierStarter, evav1.TierStarter, evav1.TierStarter,
			evav1.TierStarter, evav1.TierStarter, evav1.TierCustomer, evav1.TierCustomer, evav1.TierEnterprise}
		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range fleet {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				code := fmt.Sprintf("BN%c%c%c%c", 'A'+i/17576%26, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26)
				if err := k8s.Create(ctx, newTenant(ns, code, tiers[i%len(tiers)])); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		deadline := time.Now().Add(10 * time.Minute)
		for {
			var list evav1.EvaTenantList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			active := 0
			for _, t := range list.Items {
				if t.Status.Phase == evav1.PhaseActive {
					active++
				}
			}
			if active == fleet {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d tenants Active after 10 minutes", active, fleet)
			}
			time.Sleep(250 * time.Millisecond)
		}
		elapsed := time.Since(start)
		close(stopSampling)
		b.ReportMetric(elapsed.Seconds(), "s-to-all-Active")
		b.ReportMetric(float64(writes.Load())/fleet, "writes/tenant")
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		cancel()
	}
}
