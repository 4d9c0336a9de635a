package controller

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/testenv"
)

// BenchmarkAccountsProvisioning provisions a fleet of 1,000 Starter tenants in direct
// messaging mode, side by side in one run: "shared", every tenant's streams in one
// shared NATS account (provisioning before natsAccounts), and "accounts", an account
// per tenant (natsAccounts) on NATS in operator mode with a full resolver. NATS runs in
// a process of its own, as it does in production. It reports, per tenant, the
// operator's API requests of any kind, the CPU of this process (the operator and the
// HelmRelease stand-in, the same in both modes), the heap this process holds live once
// all are Active, the NATS server's CPU and, with accounts, the resolver pushes,
// counted by a system-account subscriber of $SYS.REQ.CLAIMS.UPDATE. The goal:
// accounts add at most 2 requests and 5 ms of the operator's CPU per tenant.
func BenchmarkAccountsProvisioning(b *testing.B) {
	fleet := 1000
	if testing.Short() {
		fleet = 30
	}
	startStandIn(b)
	for _, mode := range []string{"shared", "accounts"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				provisionFleet(b, mode, fleet)
			}
		})
	}
}

// processCPU is the CPU time p has used so far.
func processCPU(b *testing.B, p *testenv.Process) time.Duration {
	b.Helper()
	cpu, err := p.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// selfLiveHeap is the heap this process holds live, collected first.
func selfLiveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// benchRuns counts provisionFleet's runs in this process.
var benchRuns atomic.Int64

// provisionFleet starts an operator in direct mode with the mode's messaging, applies
// the fleet and waits until it is Active, reporting what it cost.
func provisionFleet(b *testing.B, mode string, fleet int) {
	var writes, requests atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} })
	var pushes atomic.Int64
	var configure func(*EvaTenantReconciler, ctrl.Manager)
	n := testenv.StartNATSProcess(b, mode == "accounts")
	if mode == "shared" {
		streams, err := messaging.Connect(messaging.Config{URL: n.URL, Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(streams.Close)
		configure = func(r *EvaTenantReconciler, _ ctrl.Manager) { r.Streams = streams }
	} else {
		signer, system := platformNATSSecrets(b, &n.OperatorNATS, fmt.Sprintf("bench-%d", time.Now().UnixNano()))
		sys, err := nats.Connect(n.URL, nats.UserCredentials(n.SystemCreds))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sys.Close)
		if _, err := sys.Subscribe("$SYS.REQ.CLAIMS.UPDATE", func(*nats.Msg) { pushes.Add(1) }); err != nil {
			b.Fatal(err)
		}
		configure = func(r *EvaTenantReconciler, mgr ctrl.Manager) {
			r.Renderer.Env.Settings.NATSAccounts = true
			r.Accounts = &Accounts{Reader: mgr.GetAPIReader(), Client: r.Client, Namespace: claimsNamespace,
				SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 5 * time.Second}}
			r.DirectAccounts = true
		}
	}
	_, stop := startBenchOperator(b, cfg, countingClient{writes: &writes}, 0, configure)
	defer stop()
	ns := newTestNamespace(b)
	// Before the tenants are purged: the next run's operator would cache this fleet's
	// objects too (see removeFleet); without it, -count 3 measured 46, 54 and 60 ms of
	// this process's CPU per tenant with accounts, run after run.
	b.Cleanup(func() { removeFleet(b, ns) })
	cost := startCPUCost(b)
	natsCPU := processCPU(b, n.Process)
	heap := selfLiveHeap()
	requests.Store(0)
	start := time.Now()
	// Each run its own codes: tenant namespaces are named by code, and the last run's
	// are still going when -count runs again.
	prefix := fmt.Sprintf("%c%c", mode[0]-'a'+'A', 'A'+benchRuns.Add(1)%26)
	for i := range fleet {
		// Starter alone: one NATS server runs no stream of three replicas (Enterprise's).
		code := fmt.Sprintf("%s%c%c%c%c", prefix, 'A'+i/17576%26, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26)
		if err := k8s.Create(context.Background(), newTenant(ns, code, evav1.TierStarter)); err != nil {
			b.Fatal(err)
		}
	}
	waitAllActive(b, ns, fleet)
	b.ReportMetric(time.Since(start).Seconds(), "s-to-all-Active")
	cost.report(b, fleet)
	b.ReportMetric(float64(selfLiveHeap()-heap)/1024/float64(fleet), "live-heap-kB/tenant")
	b.ReportMetric(float64((processCPU(b, n.Process)-natsCPU).Microseconds())/1000/float64(fleet), "nats-server-cpu-ms/tenant")
	b.ReportMetric(float64(requests.Load())/float64(fleet), "requests/tenant")
	b.ReportMetric(float64(writes.Load())/float64(fleet), "writes/tenant")
	if mode == "accounts" {
		b.ReportMetric(float64(pushes.Load())/float64(fleet), "resolver-pushes/tenant")
	}
}
