package controller

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
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

// fluxPlayer plays helm-controller, NACK, the Job controller and the ingress
// controller for a whole fleet: a controller per kind, driven by watches, that writes
// the ready status those controllers would write.
type fluxPlayer struct {
	client.Client
	mark func(ctx context.Context, c client.Client, key types.NamespacedName) error
}

func (p *fluxPlayer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, client.IgnoreNotFound(p.mark(ctx, p.Client, req.NamespacedName))
}

func startFluxPlayer(b testing.TB, ctx context.Context) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: CacheOptions(claimsNamespace), Controller: controllerConfig(),
	})
	if err != nil {
		b.Fatal(err)
	}
	kinds := map[string]struct {
		obj  client.Object
		mark func(ctx context.Context, c client.Client, key types.NamespacedName) error
	}{
		"hr": {&helmv2.HelmRelease{}, func(ctx context.Context, c client.Client, key types.NamespacedName) error {
			var hr helmv2.HelmRelease
			if err := c.Get(ctx, key, &hr); err != nil || apimeta.IsStatusConditionTrue(hr.Status.Conditions, "Ready") {
				return err
			}
			hr.Status.ObservedGeneration = hr.Generation
			hr.Status.LastAttemptedRevision = hr.Spec.Chart.Spec.Version
			apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InstallSucceeded", ObservedGeneration: hr.Generation})
			return c.Status().Update(ctx, &hr)
		}},
		"stream": {&nackv1beta2.Stream{}, func(ctx context.Context, c client.Client, key types.NamespacedName) error {
			var st nackv1beta2.Stream
			if err := c.Get(ctx, key, &st); err != nil || apimeta.IsStatusConditionTrue(st.Status.Conditions, "Ready") {
				return err
			}
			apimeta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Created"})
			return c.Status().Update(ctx, &st)
		}},
		"job": {&batchv1.Job{}, func(ctx context.Context, c client.Client, key types.NamespacedName) error {
			var job batchv1.Job
			if err := c.Get(ctx, key, &job); err != nil || job.Status.CompletionTime != nil {
				return err
			}
			now := metav1.Now()
			job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
			job.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
			return c.Status().Update(ctx, &job)
		}},
		"ingress": {&networkingv1.Ingress{}, func(ctx context.Context, c client.Client, key types.NamespacedName) error {
			var ing networkingv1.Ingress
			if err := c.Get(ctx, key, &ing); err != nil || len(ing.Status.LoadBalancer.Ingress) > 0 {
				return err
			}
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.10"}}
			return c.Status().Update(ctx, &ing)
		}},
	}
	for name, k := range kinds {
		err := ctrl.NewControllerManagedBy(mgr).Named("flux-player-" + name).For(k.obj).
			WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
			Complete(&fluxPlayer{Client: mgr.GetClient(), mark: k.mark})
		if err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = mgr.Start(ctx) }()
}

// BenchmarkOperatorFleet applies 1,000 tenants of mixed tiers at once and measures the
// time until all are Active, the operator's API writes per tenant and the process's
// peak heap.
func BenchmarkOperatorFleet(b *testing.B) {
	const fleet = 1000
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
		startFluxPlayer(b, ctx)

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
