package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestRolloutAcrossBlueAndGreen: two operator versions watch one namespace, each owning
// one tenant. One rollout reaches both: each owner renders the release's crm version for
// its tenant, the rollout counts both, and its status settles instead of each operator
// rewriting it from the half of the tenants it owns.
func TestRolloutAcrossBlueAndGreen(t *testing.T) {
	startStandIn(t) // tenants not Ready are passed over: Flux's part is played
	for _, version := range []string{"1.0.0", "2.0.0"} {
		startOperatorWith(t, version, func(_ *EvaTenantReconciler, mgr ctrl.Manager) {
			ro := &EvaRolloutReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(recorderName(version))}
			if err := ro.SetupWithManager(mgr); err != nil {
				t.Fatal(err)
			}
		})
	}
	ns := newTestNamespace(t)
	tenants := map[string]string{"BLUERO": "1.0.0", "GREENR": "2.0.0"}
	for code, version := range tenants {
		tn := newTenant(ns, code, evav1.TierStarter)
		tn.Annotations = map[string]string{tenant.AnnotationOperatorVersion: version}
		createTenant(t, tn)
	}
	ctx := context.Background()
	ro := &evav1.EvaRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm-next"},
		Spec: evav1.EvaRolloutSpec{
			Versions: map[string]evav1.ModuleVersion{"crm": "9.9.9"},
			Waves:    []evav1.RolloutWave{{Wave: 2}},
		},
	}
	if err := k8s.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: ro.Name}
	eventually(t, waitFor, "both tenants on the release, the rollout complete", func() error {
		if err := k8s.Get(ctx, key, ro); err != nil {
			return err
		}
		if ro.Status.Updated != 2 || ro.Status.Total != 2 || ro.Status.Phase != evav1.RolloutComplete {
			return fmt.Errorf("%s, updated %d of %d: %s", ro.Status.Phase, ro.Status.Updated, ro.Status.Total, ro.Status.Message)
		}
		for code := range tenants {
			got := getTenant(t, newTenant(ns, code, evav1.TierStarter))
			if got.Status.Release != ro.Name {
				return fmt.Errorf("%s: status.release %q", code, got.Status.Release)
			}
			var hr helmv2.HelmRelease
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: "crm"}, &hr); err != nil {
				return err
			}
			if v := render.ReleaseChartVersion(&hr); v != "9.9.9" {
				return fmt.Errorf("%s: crm renders %s", code, v)
			}
		}
		return nil
	})
	settled := ro.ResourceVersion
	consistently(t, "the rollout's status settles", func() error {
		var now evav1.EvaRollout
		if err := k8s.Get(ctx, key, &now); err != nil {
			return err
		}
		if now.ResourceVersion != settled {
			return fmt.Errorf("rewritten: %d of %d, %s", now.Status.Updated, now.Status.Total, now.Status.Message)
		}
		return nil
	})
}

// TestRolloutDeletionWaitsForASuccessor: deleting the release a tenant renders would
// move it back to the catalog's versions at once; the rollout stays, saying why, until
// a newer rollout reaches the tenant.
func TestRolloutDeletionWaitsForASuccessor(t *testing.T) {
	startStandIn(t)
	reg := prometheus.NewRegistry()
	startOperatorWith(t, "", func(_ *EvaTenantReconciler, mgr ctrl.Manager) {
		m, err := metrics.New(reg, mgr.GetClient())
		if err != nil {
			t.Fatal(err)
		}
		ro := &EvaRolloutReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(recorderName("")), Metrics: m}
		if err := ro.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	})
	ns := newTestNamespace(t)
	tn := newTenant(ns, "HELDON", evav1.TierStarter)
	createTenant(t, tn)
	ctx := context.Background()
	release := func(name, version string) *evav1.EvaRollout {
		ro := &evav1.EvaRollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: evav1.EvaRolloutSpec{Versions: map[string]evav1.ModuleVersion{"crm": evav1.ModuleVersion(version)},
				Waves: []evav1.RolloutWave{{Wave: 2}}}}
		if err := k8s.Create(ctx, ro); err != nil {
			t.Fatal(err)
		}
		return ro
	}
	crmRenders := func(want string) func() error {
		return func() error {
			var hr helmv2.HelmRelease
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace("HELDON"), Name: "crm"}, &hr); err != nil {
				return err
			}
			if v := render.ReleaseChartVersion(&hr); v != want {
				return fmt.Errorf("crm renders %s, want %s", v, want)
			}
			return nil
		}
	}
	first := release("crm-a", "9.9.1")
	eventually(t, waitFor, "the tenant on crm-a", crmRenders("9.9.1"))
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "crm-a"}
	eventually(t, waitFor, "crm-a says why it stays", func() error {
		var ro evav1.EvaRollout
		if err := k8s.Get(ctx, key, &ro); err != nil {
			return err
		}
		if !strings.Contains(ro.Status.Message, "still the release of HELDON") {
			return fmt.Errorf("message %q", ro.Status.Message)
		}
		return nil
	})
	consistently(t, "the tenant keeps crm-a's version", crmRenders("9.9.1"))
	time.Sleep(1100 * time.Millisecond) // rollouts are ordered by creation, to the second
	release("crm-b", "9.9.2")
	eventually(t, waitFor, "the tenant on crm-b", crmRenders("9.9.2"))
	eventually(t, waitFor, "crm-a gone", func() error {
		var ro evav1.EvaRollout
		if err := k8s.Get(ctx, key, &ro); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v): %s", err, ro.Status.Message)
		}
		return nil
	})
	// The gauges name the rollout's namespace, and a rollout's series go with it.
	eventually(t, waitFor, "crm-a's series gone, crm-b's there", func() error {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		var seen []string
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "eva_rollout_") {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				seen = append(seen, fmt.Sprintf("%s{%s/%s}", f.GetName(), labels["namespace"], labels["rollout"]))
			}
		}
		got := strings.Join(seen, " ")
		if strings.Contains(got, "/crm-a}") || !strings.Contains(got, "eva_rollout_halted{"+ns+"/crm-b}") ||
			!strings.Contains(got, "eva_rollout_wave_tenants{"+ns+"/crm-b}") {
			return fmt.Errorf("series: %s", got)
		}
		return nil
	})
}

// TestRolloutQueueDepthGate: a backlog that builds up, on a tenant the release reached,
// past what the gate allows (measured in a real JetStream by the operator's queue-depth
// loop) halts the rollout while its wave bakes, naming the tenant; once the backlog
// drains, the rollout goes on by itself.
func TestRolloutQueueDepthGate(t *testing.T) {
	var measured *metrics.QueueDepthLoop
	server := testenv.StartNATS(t, -1, t.TempDir())
	streams, err := messaging.Connect(messaging.Config{URL: server.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer streams.Close()
	startStandIn(t, withJetStream(streams))
	startOperatorWith(t, "", func(_ *EvaTenantReconciler, mgr ctrl.Manager) {
		m, err := metrics.New(prometheus.NewRegistry(), mgr.GetClient())
		if err != nil {
			t.Fatal(err)
		}
		depths := &metrics.QueueDepthLoop{Reader: mgr.GetClient(), Streams: streams, Gauge: m.QueueDepth, Interval: 200 * time.Millisecond}
		if err := mgr.Add(depths); err != nil {
			t.Fatal(err)
		}
		measured = depths
		ro := &EvaRolloutReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(recorderName("")), Metrics: m, Depths: depths}
		if err := ro.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	})
	ns := newTestNamespace(t)
	tn := newTenant(ns, "QDEPTH", evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseActive)
	depth := func(want uint64) {
		t.Helper()
		eventually(t, waitFor, fmt.Sprintf("depth %d measured", want), func() error {
			if d, known := measured.QueueDepth("QDEPTH"); !known || d != want {
				return fmt.Errorf("depth %d (measured: %v)", d, known)
			}
			return nil
		})
	}
	depth(0)

	ctx := context.Background()
	limit := int64(3)
	ro := &evav1.EvaRollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm-deep"},
		Spec: evav1.EvaRolloutSpec{Versions: map[string]evav1.ModuleVersion{"crm": "9.9.3"},
			Waves: []evav1.RolloutWave{{Wave: 2, BakeTime: metav1.Duration{Duration: time.Hour}}},
			Gates: evav1.RolloutGates{MaxQueueDepth: &limit}}}
	if err := k8s.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(ro)
	phase := func(want evav1.RolloutPhase, message string) func() error {
		return func() error {
			var got evav1.EvaRollout
			if err := k8s.Get(ctx, key, &got); err != nil {
				return err
			}
			if got.Status.Phase != want || !strings.Contains(got.Status.Message, message) {
				return fmt.Errorf("%s: %s", got.Status.Phase, got.Status.Message)
			}
			return nil
		}
	}
	eventually(t, waitFor, "the wave baking", phase(evav1.RolloutBaking, "wave 2 baking until"))

	nc, err := nats.Connect(server.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range 5 {
		if _, err := nc.Request(fmt.Sprintf("capsule.QDEPTH.events.e%d", i), []byte("x"), 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	depth(5)
	eventually(t, waitFor, "halted on the backlog", phase(evav1.RolloutHalted, "QDEPTH queue depth 5 above 3"))

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, tenant.EventsStream("QDEPTH"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "baking again once drained", phase(evav1.RolloutBaking, "wave 2 baking until"))
}
