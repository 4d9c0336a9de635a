package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestQueueDepthKeepsNoTenantConnection: with an account per tenant, on a real NATS
// server in operator mode, the operator holds no connection in a tenant's account once
// its streams are made (each would take one of the tier's connections, and 50 kB of the
// operator's memory, for good), and the queue-depth loop reads every tenant's depth as
// the system user, without a read of the API server: a tenant's in its own account
// only, so a stream another tenant names after it changes nothing.
// Seen failing before the connections were pooled: "the operator holds 1 connection(s)
// in ACCDAA's account".
func TestQueueDepthKeepsNoTenantConnection(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "depths")
	accounts, reads := startAccountsOperator(t, n, signer, system)
	startStandIn(t)
	ns := newTestNamespace(t)
	a, b := newTenant(ns, "ACCDAA", evav1.TierStarter), newTenant(ns, "ACCDBB", evav1.TierStarter)
	createTenant(t, a)
	createTenant(t, b)
	ga, gb := waitPhase(t, a, evav1.PhaseActive), waitPhase(t, b, evav1.PhaseActive)
	ctx := context.Background()

	for _, g := range []*evav1.EvaTenant{ga, gb} {
		eventually(t, waitFor, "no operator connection in "+g.Spec.CapsuleCode+"'s account", func() error {
			connz, err := n.Server.Connz(&server.ConnzOptions{Account: g.Status.NATSAccount})
			if err != nil {
				return err
			}
			if connz.NumConns > 0 {
				return fmt.Errorf("the operator holds %d connection(s) in %s's account", connz.NumConns, g.Spec.CapsuleCode)
			}
			return nil
		})
	}

	// ACCDAA's workloads publish three events; ACCDBB makes room in its account and
	// names a stream after ACCDAA's events, holding five.
	publish := func(code, subject string, count int) {
		nc, err := dialCreds(n.URL, tenantCreds(t, code))
		if err != nil {
			t.Fatalf("%s's workloads connect: %v", code, err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if code == "ACCDBB" {
			own, err := js.Stream(ctx, tenant.EventsStream(code))
			if err != nil {
				t.Fatal(err)
			}
			info, _ := own.Info(ctx)
			if err := js.DeleteStream(ctx, tenant.CommandsStream(code)); err != nil {
				t.Fatal(err)
			}
			spoof := info.Config
			spoof.Name, spoof.Subjects = tenant.EventsStream("ACCDAA"), []string{tenant.EventsSubject("ACCDAA")}
			if _, err := js.CreateStream(ctx, spoof); err != nil {
				t.Fatalf("ACCDBB names a stream of its own after ACCDAA's: %v", err)
			}
		}
		for i := range count {
			if _, err := js.Publish(ctx, fmt.Sprintf("%s.n%d", subject, i), []byte("x")); err != nil {
				t.Fatalf("%s publishes: %v", code, err)
			}
		}
	}
	publish("ACCDAA", "capsule.ACCDAA.events", 3)
	publish("ACCDBB", "capsule.ACCDAA.events", 5)

	before := reads.n.Load()
	depths, err := accounts.DepthSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := reads.n.Load() - before; got != 0 {
		t.Errorf("reading the depths read the API server %d times, want none", got)
	}
	if got := depths[ga.Status.NATSAccount][tenant.EventsStream("ACCDAA")]; got != 3 {
		t.Errorf("ACCDAA's events in its own account: %d, want 3 (all read: %v)", got, depths)
	}

	loop := &metrics.QueueDepthLoop{Reader: k8s, Accounts: accounts, Interval: 100 * time.Millisecond,
		Gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "depth_test"}, []string{"capsule", "stream"})}
	loopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = loop.Start(loopCtx) }()
	eventually(t, waitFor, "queue depths read", func() error {
		aDepth, aOK := loop.QueueDepth("ACCDAA")
		bDepth, bOK := loop.QueueDepth("ACCDBB")
		if !aOK || !bOK || aDepth != 3 || bDepth != 0 {
			return fmt.Errorf("queue depth of ACCDAA %d (read: %v), of ACCDBB %d (read: %v); want 3 and 0", aDepth, aOK, bDepth, bOK)
		}
		return nil
	})
}
