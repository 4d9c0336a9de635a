package controller

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

func TestMetricsScrapedOverHTTP(t *testing.T) {
	ns := testenv.StartNATS(t, -1, t.TempDir())
	streams, err := messaging.Connect(messaging.Config{URL: ns.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer streams.Close()

	reg := prometheus.NewRegistry()
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		m, err := metrics.New(reg, mgr.GetClient())
		if err != nil {
			t.Fatal(err)
		}
		r.Metrics = m
		if err := mgr.Add(&metrics.QueueDepthLoop{Reader: mgr.GetClient(), Streams: streams, Gauge: m.QueueDepth,
			Interval: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	tn := newTenant(newTestNamespace(t), "METRIC", evav1.TierStarter)
	createTenant(t, tn)
	// The NACK stand-in creates the streams in the JetStream the queue-depth loop reads.
	startStandIn(t, withJetStream(streams))
	waitPhase(t, tn, evav1.PhaseActive)

	// Publish on the tenant's subjects.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const published = 5
	for i := range published {
		msg, err := nc.Request(fmt.Sprintf("capsule.METRIC.events.e%d", i), []byte("x"), 2*time.Second)
		if err != nil || !strings.Contains(string(msg.Data), "seq") {
			t.Fatalf("publish: %v %s", err, msg.Data)
		}
	}

	scrape := func() string {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	eventually(t, waitFor, "metrics", func() error {
		body := scrape()
		for _, want := range []string{
			fmt.Sprintf(`capsule_queue_depth{capsule="METRIC",stream="%s"} %d`, tenant.EventsStream("METRIC"), published),
			fmt.Sprintf(`capsule_queue_depth{capsule="METRIC",stream="%s"} 0`, tenant.CommandsStream("METRIC")),
			`eva_tenant_condition_seconds_count{condition="Ready",tier="Starter"}`,
			`eva_tenant_condition_seconds_count{condition="NamespaceReady",tier="Starter"}`,
			`eva_tenants{phase="Active",tier="Starter"}`,
			`eva_render_seconds_count`,
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("scrape lacks %s", want)
			}
		}
		return nil
	})
}
