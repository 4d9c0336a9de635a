// Package metrics defines the operator's Prometheus metrics and the background loop
// that keeps the queue-depth gauge current off the reconcile path.
package metrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
)

// Metric names, also used by the rendered PrometheusRule.
const (
	QueueDepthName       = "capsule_queue_depth"
	ConditionSecondsName = "eva_tenant_condition_seconds"
	TenantsName          = "eva_tenants"
	RenderSecondsName    = "eva_render_seconds"
	PublishSecondsName   = "eva_publish_seconds"
	PublishRetriesName   = "eva_publish_retries_total"
	RolloutUpdatedName   = "eva_rollout_wave_updated_tenants"
	RolloutTotalName     = "eva_rollout_wave_tenants"
	RolloutHaltedName    = "eva_rollout_halted"
	// PublishThrottledName counts, per tenant, changes held back because the tenant
	// published less than the minimum interval before: a tenant changing all the time
	// (a patch loop) shows here, and the alert TenantPublishingTooOften fires on it.
	PublishThrottledName = "eva_tenant_publish_throttled_total"
)

// Metrics are the operator's metrics.
type Metrics struct {
	QueueDepth       *prometheus.GaugeVec
	ConditionSeconds *prometheus.HistogramVec
	RenderSeconds    prometheus.Histogram
	PublishSeconds   prometheus.Histogram
	PublishRetries   prometheus.Counter
	// PublishThrottled counts each tenant's changes held back by the publish interval.
	PublishThrottled *prometheus.CounterVec
	// RolloutUpdated and RolloutTotal are each rollout wave's admitted and total
	// tenants; RolloutHalted is 1 while a rollout is halted on a failed gate. A rollout's
	// series go with it (ForgetRollout).
	RolloutUpdated *prometheus.GaugeVec
	RolloutTotal   *prometheus.GaugeVec
	RolloutHalted  *prometheus.GaugeVec
}

// New creates the metrics and registers them, with a collector counting tenants by
// phase and tier from reader (the manager's cache) at scrape time.
func New(reg prometheus.Registerer, reader client.Reader) (*Metrics, error) {
	m := &Metrics{
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: QueueDepthName, Help: "Messages held by a capsule's JetStream stream.",
		}, []string{"capsule", "stream"}),
		ConditionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    ConditionSecondsName,
			Help:    "Seconds from the start of provisioning until a tenant condition first became True.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 180, 300, 480, 600, 900, 1800},
		}, []string{"condition", "tier"}),
		RenderSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: RenderSecondsName, Help: "Seconds to render one tenant's bundle.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8),
		}),
		PublishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: PublishSecondsName, Help: "Seconds to publish rendered tenants to git or OCI.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 9),
		}),
		PublishRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: PublishRetriesName, Help: "Publish attempts rejected because the target moved, and retried.",
		}),
		PublishThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: PublishThrottledName, Help: "Tenant changes held back because the tenant published less than the minimum interval before.",
		}, []string{"capsule"}),
		RolloutUpdated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: RolloutUpdatedName, Help: "Tenants of a rollout's wave given the release.",
		}, []string{"namespace", "rollout", "wave"}),
		RolloutTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: RolloutTotalName, Help: "Tenants of a rollout's wave.",
		}, []string{"namespace", "rollout", "wave"}),
		RolloutHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: RolloutHaltedName, Help: "1 while a rollout is halted on a failed gate.",
		}, []string{"namespace", "rollout"}),
	}
	for _, c := range []prometheus.Collector{m.QueueDepth, m.ConditionSeconds, m.RenderSeconds, m.PublishSeconds,
		m.PublishRetries, m.PublishThrottled, m.RolloutUpdated, m.RolloutTotal, m.RolloutHalted, &tenantCollector{reader: reader}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var tenantsDesc = prometheus.NewDesc(TenantsName, "Tenants by phase and tier.", []string{"phase", "tier"}, nil)

// tenantCollector counts tenants by phase and tier when scraped.
type tenantCollector struct{ reader client.Reader }

func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tenantsDesc }

func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	if c.reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list evav1.EvaTenantList
	if err := c.reader.List(ctx, &list); err != nil {
		return
	}
	counts := map[[2]string]float64{}
	for _, t := range list.Items {
		phase := string(t.Status.Phase)
		if phase == "" {
			phase = string(evav1.PhaseRequested)
		}
		counts[[2]string{phase, string(t.Spec.Tier)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(tenantsDesc, prometheus.GaugeValue, n, k[0], k[1])
	}
}

// DepthReader reads how many messages a stream holds.
type DepthReader interface {
	Depth(ctx context.Context, stream string) (uint64, error)
}

// DepthSnapshotter reads how many messages every stream holds, at once, by the public
// key of the NATS account it lives in (natsaccount.Depths).
type DepthSnapshotter interface {
	DepthSnapshot(ctx context.Context) (natsaccount.Depths, error)
}

// QueueDepthLoop refreshes capsule_queue_depth for every tenant at an interval; it is
// a manager Runnable, so it runs beside the reconciler, never in it. It reads the
// streams of the one shared account through Streams or, when each tenant has an
// account of its own (natsAccounts), all of them at once through Accounts, each
// tenant's in the account its status records (status.natsAccount: a stream is the
// tenant's only there, as any account may name a stream eva-<CODE>-events).
type QueueDepthLoop struct {
	Reader   client.Reader
	Streams  DepthReader
	Accounts DepthSnapshotter
	Gauge    *prometheus.GaugeVec
	Interval time.Duration
	Log      logr.Logger

	mu     sync.Mutex
	latest map[[2]string]uint64
}

// QueueDepth returns the most messages one of the capsule's streams held when last
// measured, and whether any was measured.
func (l *QueueDepthLoop) QueueDepth(code string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var most uint64
	known := false
	for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if d, ok := l.latest[[2]string{code, stream}]; ok {
			most, known = max(most, d), true
		}
	}
	return most, known
}

func (l *QueueDepthLoop) record(key [2]string, depth uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.latest == nil {
		l.latest = map[[2]string]uint64{}
	}
	if ok {
		l.latest[key] = depth
	} else {
		delete(l.latest, key)
	}
}

// Start runs the loop until ctx ends.
func (l *QueueDepthLoop) Start(ctx context.Context) error {
	interval := l.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	known := map[[2]string]bool{}
	for {
		l.refresh(ctx, known)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

func (l *QueueDepthLoop) refresh(ctx context.Context, known map[[2]string]bool) {
	var list evav1.EvaTenantList
	if err := l.Reader.List(ctx, &list); err != nil {
		l.Log.Error(err, "listing tenants for queue depth")
		return
	}
	depthOf := l.depthReader(ctx)
	seen := map[[2]string]bool{}
	for _, t := range list.Items {
		code := t.Spec.CapsuleCode
		if t.Status.Phase == evav1.PhaseDecommissioned {
			continue
		}
		for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			key := [2]string{code, stream}
			depth, err := depthOf(ctx, &t, stream)
			if err != nil {
				// A stream not created yet, or NATS away: keep the last value.
				seen[key] = known[key]
				continue
			}
			seen[key] = true
			l.Gauge.WithLabelValues(code, stream).Set(float64(depth))
			l.record(key, depth, true)
		}
	}
	for key := range known {
		if !seen[key] {
			l.Gauge.DeleteLabelValues(key[0], key[1])
			l.record(key, 0, false)
			delete(known, key)
		}
	}
	for key, ok := range seen {
		if ok {
			known[key] = true
		}
	}
}

// errNotRead is a stream the refresh's snapshot did not report.
var errNotRead = errors.New("not in the stream depths read")

// depthReader returns how this refresh reads a tenant's stream: through Streams, or
// from one snapshot of every account's (what it holds when part of it could not be
// read: the others keep their last value).
func (l *QueueDepthLoop) depthReader(ctx context.Context) func(context.Context, *evav1.EvaTenant, string) (uint64, error) {
	if l.Accounts == nil {
		return func(ctx context.Context, _ *evav1.EvaTenant, stream string) (uint64, error) {
			return l.Streams.Depth(ctx, stream)
		}
	}
	snapshot, err := l.Accounts.DepthSnapshot(ctx)
	if err != nil {
		l.Log.Error(err, "reading the tenants' stream depths")
	}
	return func(_ context.Context, t *evav1.EvaTenant, stream string) (uint64, error) {
		depth, ok := snapshot[t.Status.NATSAccount][stream]
		if !ok || t.Status.NATSAccount == "" {
			return 0, errNotRead
		}
		return depth, nil
	}
}

// ForgetRollout removes the series of a rollout that is gone.
func (m *Metrics) ForgetRollout(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "rollout": name}
	m.RolloutUpdated.DeletePartialMatch(labels)
	m.RolloutTotal.DeletePartialMatch(labels)
	m.RolloutHalted.DeletePartialMatch(labels)
}
