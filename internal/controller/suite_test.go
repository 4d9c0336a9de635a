package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

var (
	env *testenv.Env
	// k8s is an uncached client for assertions.
	k8s client.Client
)

func TestMain(m *testing.M) {
	testenv.NATSChild() // BenchmarkAccountsProvisioning's NATS server, re-executed
	// The operators the tests start log nowhere unless EVA_TEST_LOG is set; without a
	// logger controller-runtime prints a warning with a stack trace after 30 seconds.
	logger := logr.Discard()
	if os.Getenv("EVA_TEST_LOG") != "" {
		logger = zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr))
	}
	ctrl.SetLogger(logger)
	crds := filepath.Join(testenv.RepoRoot(), "internal", "testenv", "crds")
	var err error
	env, err = testenv.Start(filepath.Join(crds, "flux"), filepath.Join(crds, "addons"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, err = client.New(env.Config, client.Options{Scheme: NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: claimsNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stopQuotaStandIn, err := startQuotaStandIn()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopQuotaStandIn()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

func testRenderer(t testing.TB) *render.Renderer {
	t.Helper()
	e, err := overlay.Load(filepath.Join(testenv.RepoRoot(), "overlays"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	return &render.Renderer{Catalog: tenant.DefaultCatalog(), Env: e}
}

// operator is a running manager with the real reconciler.
type operator struct {
	cancel context.CancelFunc
	done   chan error
}

// startOperator starts a manager with the reconciler for an operator version; it stops
// when the test ends, or earlier with stop (a clean shutdown: the SIGKILL of a running
// operator is tested in internal/e2e).
func startOperator(t testing.TB, version string) *operator {
	t.Helper()
	return startOperatorWith(t, version, nil)
}

// startOperatorWith is startOperator with a hook to configure the reconciler and add
// runnables before the manager starts.
func startOperatorWith(t testing.TB, version string, configure func(*EvaTenantReconciler, ctrl.Manager)) *operator {
	t.Helper()
	return startShardOperator(t, version, shard.Selector{}, configure)
}

// startShardOperator is startOperatorWith for an operator holding only the shards the
// selector names (the --shard flag).
func startShardOperator(t testing.TB, version string, shards shard.Selector, configure func(*EvaTenantReconciler, ctrl.Manager)) *operator {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  CacheOptions(claimsNamespace, shards, false, nil),
		Controller:             controllerConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &EvaTenantReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(recorderName(version)),
		Renderer: testRenderer(t), OperatorVersion: version, APIReader: mgr.GetAPIReader(),
		Claims: &claim.Store{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: claimsNamespace}}
	if configure != nil {
		configure(r, mgr)
	}
	if err := r.SetupWithManager(ctx, mgr, operatorConcurrency); err != nil {
		t.Fatal(err)
	}
	op := &operator{cancel: cancel, done: make(chan error, 1)}
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(op.stop)
	return op
}

func (o *operator) stop() {
	if o.cancel == nil {
		return
	}
	o.cancel()
	if err := <-o.done; err != nil {
		fmt.Fprintln(os.Stderr, "test operator stopped:", err)
	}
	o.cancel = nil
}

// claimsNamespace holds the capsule-code claims of every test operator, as the
// operator's own namespace does in a deployment.
const claimsNamespace = "eva-system"

// operatorConcurrency is how many tenants a test operator reconciles at once.
var operatorConcurrency = 4

// recorderName tells the events of one operator version from another's.
func recorderName(version string) string {
	if version == "" {
		return "eva-operator"
	}
	return "eva-operator-" + version
}

// newTestNamespace makes a namespace for a test's EvaTenant objects.
func newTestNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenants-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purgeTenants(t, ns.Name) })
	return ns.Name
}

// purgeTenants removes a test's tenants without their saga (finalizers dropped), so the
// operators of later tests do not work on them.
func purgeTenants(t testing.TB, ns string) {
	ctx := context.Background()
	for range 50 {
		var list evav1.EvaTenantList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) == 0 {
			return
		}
		for i := range list.Items {
			tn := &list.Items[i]
			if len(tn.Finalizers) > 0 {
				patch := client.MergeFrom(tn.DeepCopy())
				tn.Finalizers = nil
				_ = k8s.Patch(ctx, tn, patch)
			}
			_ = k8s.Delete(ctx, tn)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("tenants left in %s after purging", ns)
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
}

// consistently checks cond stays nil for two seconds.
func consistently(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
