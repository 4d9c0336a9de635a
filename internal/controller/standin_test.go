package controller

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// Annotations a test puts on a HelmRelease to steer the helm-controller stand-in.
const (
	// standInRelease set to standInStalled makes the release fail for good.
	standInRelease = "test.eva.aidonow.com/release"
	standInStalled = "Stalled"
	// standInHoldUninstall keeps a deleted release's finalizer while it is set.
	standInHoldUninstall = "test.eva.aidonow.com/hold-uninstall"
)

// helmFinalizer is the finalizer helm-controller puts on every release it installs.
const helmFinalizer = "helm.toolkit.fluxcd.io/finalizer"

// standInConfig is what a test may change about its stand-in.
type standInConfig struct {
	js *messaging.Client
	// natsURL is where the NACK stand-in connects with a NACK Account's credentials.
	natsURL string
}

type standInOption func(*standInConfig)

// withJetStream makes the NACK stand-in create the streams in the test's own JetStream
// (default: one started for the stand-in).
func withJetStream(js *messaging.Client) standInOption {
	return func(c *standInConfig) { c.js = js }
}

// withNATSAccounts makes the NACK stand-in connect to the server at url with the
// credentials a Stream's NACK Account names, as NACK does.
func withNATSAccounts(url string) standInOption {
	return func(c *standInConfig) { c.natsURL = url }
}

// startStandIn starts the stand-in for helm-controller, the Job controller and
// kube-controller-manager's namespace controller (with the NACK and ingress stand-ins of
// internal/testcluster), the one fake of the controllers a tenant depends on for every
// test of this package. It exists because envtest runs a kube-apiserver and etcd and no
// controller at all: without it nothing a tenant waits for would ever be ready. The
// real controllers run in internal/e2e (kube-controller-manager, kwok nodes and the real
// Flux controllers); what only they can show (real Helm installs and uninstalls, real
// namespace deletion, a release that never becomes ready, an operator killed by
// SIGKILL) is tested there, not here.
//
// It runs until the test ends, cluster-wide: its own three parts driven by watches (a
// controller-runtime manager of its own), the two of internal/testcluster by polling
// that manager's cache. A
// test starts it once it has seen what it wants to see before anything is ready; in a
// test that does not start it nothing becomes ready. What it plays:
//
//   - helm-controller: every HelmRelease gets helm-controller's finalizer, then
//     Ready=True for its generation with its chart version as the last attempted
//     revision. A release annotated standInRelease=Stalled has failed for good instead,
//     as helm-controller reports exhausted retries: upgrade failures one more than its
//     remediation retries for its generation, Ready=False UpgradeFailed, Stalled=True
//     RetriesExceeded. Once the annotation goes it recovers to Ready, its failure
//     counters cleared (as a new generation would clear them). A deleted release loses
//     the finalizer (its uninstall is done) unless it is annotated standInHoldUninstall,
//     a slow uninstall that ends when the annotation goes.
//   - the Job controller: every Job succeeds at once.
//   - the namespace controller: a terminating namespace is finalized.
//   - NACK and the ingress controller: testcluster.RunNACKStandIn (streams created in a
//     real, embedded JetStream; withJetStream picks the test's own) and
//     testcluster.RunIngressStandIn, the same stand-ins the end-to-end suite runs.
//
// It does not model: Helm itself (no chart is fetched or installed, no HelmRepository
// or HelmChart, no dependsOn order, no impersonation of the release's service account,
// no retries or remediation, no flicker of Stalled while helm-controller looks at a
// stalled release again: a release is Ready or Stalled because the test says so);
// pods (a Job never runs, fails or backs off); the namespace controller's deletion of
// what is in the namespace (those objects stay in etcd); garbage collection. It writes
// nothing once it has reported, so it does not disturb tests of the operator's writes.
func startStandIn(t testing.TB, opts ...standInOption) {
	t.Helper()
	startStandInOn(t, env.Config, opts...)
}

// startStandInOn is startStandIn for the API server restConfig reaches (a test's second
// API server).
func startStandInOn(t testing.TB, restConfig *rest.Config, opts ...standInOption) {
	t.Helper()
	var cfg standInConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.js == nil {
		cfg.js = standInJetStream(t)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: controllerConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := mgr.GetClient()
	kinds := map[string]struct {
		obj client.Object
		fn  standInFunc
	}{
		"helm-controller":      {&helmv2.HelmRelease{}, func(ctx context.Context, key types.NamespacedName) error { return playHelmController(ctx, c, key) }},
		"job-controller":       {&batchv1.Job{}, func(ctx context.Context, key types.NamespacedName) error { return playJobController(ctx, c, key) }},
		"namespace-controller": {&corev1.Namespace{}, func(ctx context.Context, key types.NamespacedName) error { return playNamespaceController(ctx, c, key) }},
	}
	for name, k := range kinds {
		err := ctrl.NewControllerManagedBy(mgr).Named("stand-in-" + name).For(k.obj).
			WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Complete(k.fn)
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("stand-in: %v", err)
		}
	})
	// They read the stand-in manager's cache, fed by watches as the real controllers'
	// informers are, instead of listing every Stream and Ingress from the API server
	// three times a second: at a thousand tenants those lists cost the API server more
	// than the operator's own reads.
	wg.Go(func() { testcluster.RunNACKStandIn(ctx, c, cfg.js, cfg.natsURL) })
	wg.Go(func() { testcluster.RunIngressStandIn(ctx, c) })
	// Stopped before the test's earlier cleanups (its operator, its NATS server) run.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// standInFunc is one controller of the stand-in; a failed write is retried with backoff.
type standInFunc func(ctx context.Context, key types.NamespacedName) error

func (f standInFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, client.IgnoreNotFound(f(ctx, req.NamespacedName))
}

// standInJetStream starts an embedded JetStream for the NACK stand-in.
func standInJetStream(t testing.TB) *messaging.Client {
	t.Helper()
	s := testenv.StartNATS(t, -1, t.TempDir())
	js, err := messaging.Connect(messaging.Config{URL: s.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Close)
	return js
}

// playHelmController writes what helm-controller would: its finalizer, then the
// release's outcome; a deleted release is let go once its uninstall is not held.
func playHelmController(ctx context.Context, c client.Client, key types.NamespacedName) error {
	var hr helmv2.HelmRelease
	if err := c.Get(ctx, key, &hr); err != nil {
		return err
	}
	if hr.DeletionTimestamp != nil {
		if hr.Annotations[standInHoldUninstall] != "" || !controllerutil.RemoveFinalizer(&hr, helmFinalizer) {
			return nil
		}
		return c.Update(ctx, &hr)
	}
	if controllerutil.AddFinalizer(&hr, helmFinalizer) {
		if err := c.Update(ctx, &hr); err != nil {
			return err
		}
	}
	base := hr.DeepCopy()
	hr.Status.ObservedGeneration, hr.Status.LastAttemptedGeneration = hr.Generation, hr.Generation
	hr.Status.LastAttemptedRevision = render.ReleaseChartVersion(&hr)
	if hr.Annotations[standInRelease] == standInStalled {
		// The upgrade of this generation failed once more than its remediation retries.
		failures := int64(max(hr.GetUpgrade().GetRemediation().GetRetries(), 0)) + 1
		hr.Status.LastAttemptedReleaseAction, hr.Status.UpgradeFailures = helmv2.ReleaseActionUpgrade, failures
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
			Reason: "UpgradeFailed", Message: "Helm upgrade failed: timed out waiting for the condition", ObservedGeneration: hr.Generation})
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue,
			Reason: "RetriesExceeded", Message: fmt.Sprintf("Failed to upgrade after %d attempt(s)", failures), ObservedGeneration: hr.Generation})
	} else {
		if hr.Status.LastAttemptedReleaseAction == "" {
			hr.Status.LastAttemptedReleaseAction = helmv2.ReleaseActionInstall
		}
		hr.Status.ClearFailures()
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "InstallSucceeded", Message: "Helm install succeeded (helm-controller stand-in)", ObservedGeneration: hr.Generation})
		apimeta.RemoveStatusCondition(&hr.Status.Conditions, "Stalled")
	}
	if equality.Semantic.DeepEqual(base.Status, hr.Status) {
		return nil // nothing to write: an idle stand-in must not touch what it already reported
	}
	// A patch, as helm-controller's patch helper writes status: a copy read from a
	// cache a step behind does not fail with a conflict and go round again.
	return c.Status().Patch(ctx, &hr, client.MergeFrom(base))
}

// playJobController completes every Job as soon as it exists.
func playJobController(ctx context.Context, c client.Client, key types.NamespacedName) error {
	var job batchv1.Job
	if err := c.Get(ctx, key, &job); err != nil {
		return err
	}
	if job.DeletionTimestamp != nil || job.Status.CompletionTime != nil {
		return nil
	}
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	return c.Status().Update(ctx, &job)
}

// playNamespaceController finalizes a terminating namespace (without deleting what is
// in it).
func playNamespaceController(ctx context.Context, c client.Client, key types.NamespacedName) error {
	var ns corev1.Namespace
	if err := c.Get(ctx, key, &ns); err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 {
		return nil
	}
	ns.Spec.Finalizers = nil
	return c.SubResource("finalize").Update(ctx, &ns)
}

// heldQuotas are the namespaces whose ResourceQuotas the quota stand-in leaves
// unenforced (holdQuota), as a busy kube-controller-manager does for a while.
var heldQuotas sync.Map

// startQuotaStandIn starts, for the whole package (TestMain), the stand-in for
// kube-controller-manager's resourcequota controller: it records every quota's hard
// limits in its status (with no usage), which is what makes the API server's quota
// admission enforce it. The operator applies a tenant's workloads only then, so without
// it no test would see a release. Unlike the rest of the stand-in it runs for every
// test, as the real controller runs in every cluster. It does not compute usage (no
// pods run in envtest). The real one runs in internal/e2e.
func startQuotaStandIn() (stop func(), err error) { return startQuotaStandInOn(env.Config) }

// startQuotaStandInOn is startQuotaStandIn for the API server restConfig reaches.
func startQuotaStandInOn(restConfig *rest.Config) (stop func(), err error) {
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: controllerConfig(),
	})
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	play := standInFunc(func(ctx context.Context, key types.NamespacedName) error { return playQuotaController(ctx, c, key) })
	if err := ctrl.NewControllerManagedBy(mgr).Named("stand-in-resourcequota-controller").For(&corev1.ResourceQuota{}).
		Complete(reconcileHeld{play}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "quota stand-in:", err)
		}
	}, nil
}

// reconcileHeld looks again soon at a quota it was told to hold, so that releasing the
// hold (in the test's memory, not in the cluster) takes effect.
type reconcileHeld struct{ play standInFunc }

func (r reconcileHeld) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if _, held := heldQuotas.Load(req.Namespace); held {
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	return r.play.Reconcile(ctx, req)
}

// playQuotaController records a quota's hard limits in its status.
func playQuotaController(ctx context.Context, c client.Client, key types.NamespacedName) error {
	var rq corev1.ResourceQuota
	if err := c.Get(ctx, key, &rq); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(rq.Status.Hard, rq.Spec.Hard) {
		return nil
	}
	rq.Status.Hard = rq.Spec.Hard.DeepCopy()
	rq.Status.Used = corev1.ResourceList{}
	for name := range rq.Spec.Hard {
		rq.Status.Used[name] = resource.Quantity{}
	}
	return c.Status().Update(ctx, &rq)
}

// holdQuota keeps the quotas of a namespace unenforced until releaseQuota (or the end of
// the test).
func holdQuota(t testing.TB, namespace string) {
	t.Helper()
	heldQuotas.Store(namespace, true)
	t.Cleanup(func() { releaseQuota(namespace) })
}

// releaseQuota lets the quota stand-in enforce the quotas of a namespace.
func releaseQuota(namespace string) { heldQuotas.Delete(namespace) }

// annotateRelease sets (or, with an empty value, removes) a stand-in annotation on one
// of a tenant's releases, once the release exists.
func annotateRelease(t testing.TB, code, module, key, value string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, waitFor, "annotating HelmRelease "+module, func() error {
		var hr helmv2.HelmRelease
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: module}, &hr); err != nil {
			return err
		}
		patch := client.MergeFrom(hr.DeepCopy())
		if value == "" {
			delete(hr.Annotations, key)
		} else {
			metav1.SetMetaDataAnnotation(&hr.ObjectMeta, key, value)
		}
		return k8s.Patch(ctx, &hr, patch)
	})
}

// holdUninstall makes the tenant's releases wait, once deleted, until finishUninstall.
func holdUninstall(t testing.TB, code string, modules []string) {
	t.Helper()
	for _, m := range modules {
		annotateRelease(t, code, m, standInHoldUninstall, "true")
	}
}

// finishUninstall lets the held releases go.
func finishUninstall(t testing.TB, code string, modules []string) {
	t.Helper()
	for _, m := range modules {
		annotateRelease(t, code, m, standInHoldUninstall, "")
	}
}

// TestStandInPlaysHelmController checks the part of the stand-in that the other tests
// steer: a release becomes Ready, fails for good while annotated Stalled and recovers
// once the annotation goes; a deleted release stays while its uninstall is held.
func TestStandInPlaysHelmController(t *testing.T) {
	ctx := context.Background()
	startStandIn(t)
	const code = "STANDN"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant.Namespace(code)}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace(code), Name: "crm"},
		Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: time.Minute}, Chart: &helmv2.HelmChartTemplate{
			Spec: helmv2.HelmChartTemplateSpec{Chart: "eva-crm", Version: "1.2.3",
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "eva-charts", Namespace: "flux-system"}}}}}
	if err := k8s.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	release := func(what string, want func(*helmv2.HelmRelease) bool) {
		t.Helper()
		eventually(t, waitFor, what, func() error {
			var got helmv2.HelmRelease
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(hr), &got); err != nil {
				return err
			}
			if !want(&got) {
				return errNot(what + fmt.Sprintf(": finalizers %v, status %+v", got.Finalizers, got.Status.Conditions))
			}
			return nil
		})
	}
	ready := func(hr *helmv2.HelmRelease) bool {
		return apimeta.IsStatusConditionTrue(hr.Status.Conditions, "Ready") && apimeta.FindStatusCondition(hr.Status.Conditions, "Stalled") == nil &&
			hr.Status.ObservedGeneration == hr.Generation && hr.Status.LastAttemptedRevision == "1.2.3" &&
			hr.Status.InstallFailures == 0 && hr.Status.UpgradeFailures == 0
	}
	release("Ready, with helm-controller's finalizer", func(hr *helmv2.HelmRelease) bool {
		return ready(hr) && controllerutil.ContainsFinalizer(hr, helmFinalizer)
	})

	annotateRelease(t, code, "crm", standInRelease, standInStalled)
	release("Stalled, retries exhausted", func(hr *helmv2.HelmRelease) bool {
		return apimeta.IsStatusConditionFalse(hr.Status.Conditions, "Ready") && apimeta.IsStatusConditionTrue(hr.Status.Conditions, "Stalled") &&
			hr.GetActiveRemediation() != nil && hr.GetActiveRemediation().RetriesExhausted(hr)
	})
	annotateRelease(t, code, "crm", standInRelease, "")
	release("recovered to Ready", ready)

	holdUninstall(t, code, []string{"crm"})
	if err := k8s.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	consistently(t, "a held uninstall keeps the release", func() error {
		var got helmv2.HelmRelease
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(hr), &got); err != nil {
			return err
		}
		if got.DeletionTimestamp == nil {
			return fmt.Errorf("release not being deleted")
		}
		return nil
	})
	finishUninstall(t, code, []string{"crm"})
	eventually(t, waitFor, "release gone once the uninstall is let go", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(hr), &helmv2.HelmRelease{}); !apierrors.IsNotFound(err) {
			return errNot("gone")
		}
		return nil
	})
}
