// Package controller holds the EvaTenant reconciler: pure-cluster mode, where the
// operator server-side applies each tenant's rendered bundle, prunes what is no longer
// rendered, reads the tenant's objects back into five conditions, and runs the
// decommission saga.
package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// FieldOwner is the server-side apply field manager of everything the operator applies.
const FieldOwner = "eva-operator"

// Requeue intervals.
const (
	// ResyncActive is the drift check of an Active tenant (jittered up to 20% more).
	ResyncActive = 5 * time.Minute
	// ResyncProvisioning is how often a provisioning tenant is looked at even without
	// events from its objects.
	ResyncProvisioning = time.Minute
	// WaitDeletion is how often the saga checks that releases are gone.
	WaitDeletion = 5 * time.Second
	// MessagingRetry is how soon a tenant is looked at again while NATS is unreachable.
	MessagingRetry = 5 * time.Second
	// QuotaRetry is how soon a tenant whose workloads wait for its quota to be enforced
	// looks again if no change of the quota's status woke it first.
	QuotaRetry = 2 * time.Second
	// ClaimRetry is how soon a cell's operator looks again at a tenant whose capsule
	// code the fleet operator has not claimed yet (its claim wakes the tenant first).
	ClaimRetry = 2 * time.Second
	// ProgressInterval is how often, at most, the status of a tenant provisioning a
	// generation whose provisioning it already reports is written while it only
	// reports progress (see progressHold).
	ProgressInterval = 10 * time.Second
	// ConflictRetry is how soon a tenant whose status patch lost to another write is
	// looked at again (the watch event of that write usually comes first).
	ConflictRetry = 200 * time.Millisecond
)

// EvaTenantReconciler reconciles EvaTenant objects in pure-cluster mode.
type EvaTenantReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Renderer *render.Renderer
	// OperatorVersion is this operator's version (OPERATOR_VERSION); empty processes
	// only tenants no version has claimed.
	OperatorVersion string
	// Streams, when set, is direct messaging mode: the operator creates and deletes the
	// tenant's JetStream streams itself instead of rendering NACK Stream objects, and
	// Provisioned reflects their real existence.
	Streams StreamManager
	// Accounts, when set (an environment with natsAccounts), gives each tenant a NATS
	// account of its own and writes its workloads' credentials into its namespace. In
	// direct messaging (DirectAccounts) the operator makes the tenant's streams in that
	// account itself; otherwise NACK does, from the rendered Stream objects, which name
	// the tenant's NACK Account (connected with those credentials).
	Accounts       *Accounts
	DirectAccounts bool
	// MoveFrom, with Accounts, is the shared account the tenants' streams lived in
	// before: what they still hold there is moved into each tenant's own account
	// (movePhase), and the emptied streams deleted.
	MoveFrom *messaging.Client
	// GitOps, when set, is GitOps mode: tenants are published for Flux instead of applied.
	GitOps *GitOps
	// APIReader reads from the API server, bypassing the cache: for decisions that must
	// not rest on a stale or label-filtered copy (whose namespace, whose object to delete).
	APIReader client.Reader
	// Claims records which tenant owns each capsule code (required).
	Claims *claim.Store
	// TenantNamespaces are the namespaces EvaTenants are accepted from; tenants elsewhere
	// are ignored with an event. Empty accepts every namespace.
	TenantNamespaces []string
	// AgeKeys, when set, decrypts the tenants' encrypted Secrets in memory in
	// pure-cluster mode (GitOps mode publishes them encrypted, for kustomize-controller).
	AgeKeys *AgeKeys
	// Presence, when set, says which operator versions run: a tenant of a version none
	// runs is marked Unserved.
	Presence *Presence
	// Fence, when set, says whether the cluster's fence enforces the environment the
	// operator renders with (the Provisioned condition reports a mismatch).
	Fence *FenceCheck
	// Metrics, when set, receive render timings and condition times.
	Metrics *metrics.Metrics
	// Now returns the current time (tests fix it).
	Now func() time.Time
	// BlockedGrace is how long a release may wait on something only a person can fix
	// before the tenant is Failed; zero is status.DefaultBlockedGrace.
	BlockedGrace time.Duration
	// Cell, for the operator of one cell of an environment with cells, is that cell:
	// only tenants whose status.cell names it are delivered (docs/cells.md). Client and
	// APIReader then reach the fleet cluster for EvaTenants and EvaRollouts
	// (CellClient, CellReader), and TenantCache is the fleet cluster's cache they are
	// watched from.
	Cell        string
	TenantCache cache.Cache
	// MoveDrain is how long a move waits between taking a tenant's traffic off this
	// cell and removing it here; zero is saga.DefaultMoveDrain.
	MoveDrain time.Duration

	// lastApply remembers when each tenant's bundle was last applied in full or checked
	// for drift, for the periodic drift check.
	lastApply sync.Map // types.UID → time.Time
	// resync is the drift check interval of an Active tenant; zero is ResyncActive
	// (benchmarks shorten it to simulate hours of checks).
	resync time.Duration
	// memo remembers the resourceVersion at which each object was last known to hold
	// what is applied: a shortcut for the drift check (see applyMemo).
	memo applyMemo
	// written remembers the applied bundle each tenant's last status write recorded,
	// to tell a cache copy from before that write (see ownWrites).
	written ownWrites
	// statusWrites remembers when this process last wrote each tenant's status, for
	// progressHold.
	statusWrites sync.Map // types.UID → time.Time
	// phases are the mode's provisioning steps, chosen once (provisionPhases).
	phases     []phase
	phasesOnce sync.Once
}

// StreamManager is JetStream as the operator uses it in direct mode (messaging.Client).
type StreamManager interface {
	Ensure(ctx context.Context, s messaging.StreamSpec) (messaging.Outcome, error)
	Delete(ctx context.Context, name string) error
	Exists(ctx context.Context, name string) (bool, error)
}

// scope holds everything read and decided in one reconcile.
type scope struct {
	tenant *evav1.EvaTenant
	// rendered is the tenant as it renders: its spec with the module versions of the
	// platform releases that reached it (rollout.WithReleases); the tenant itself
	// without one.
	rendered *evav1.EvaTenant
	// release is the newest of those releases, written to status.release only together
	// with the conditions computed against it (statusPhase): a reconcile that ends
	// early must not pair the new release with the previous Ready.
	release string
	// base is the tenant as last written; the deferred status patch diffs against it.
	base     *evav1.EvaTenant
	log      logr.Logger
	bundle   *render.Bundle
	digest   string
	observed status.Observed
	// deliverErr is a failed apply or publish: the reconcile goes on reading the objects
	// and writing the conditions, then returns it.
	deliverErr error
	// publishWait is how long a changed tenant waits for its next publish (GitOps.MinInterval).
	publishWait time.Duration
	// done is set by a phase that decided the reconcile's outcome (an invalid spec, a
	// namespace that belongs to someone else): the phases after it do not run.
	done bool
	// outcome is what the reconcile concluded; the status patch derives the tenant's
	// conditions, phase and observedGeneration from it (status.Record), in one place.
	outcome status.Outcome
	// events are recorded only once the status that explains them is written, so a
	// reconcile that loses a race (and is retried) does not record them twice.
	events []pendingEvent
	// observations are metric samples recorded with the events, once the status is written.
	observations []func()
}

type pendingEvent struct{ kind, reason, message string }

// event queues an event about the tenant.
func (s *scope) event(kind, reason, format string, args ...any) {
	s.events = append(s.events, pendingEvent{kind, reason, fmt.Sprintf(format, args...)})
}

// Writes below are fenced to eva-tenant-* namespaces by the ValidatingAdmissionPolicy in
// base/rbac/admission_policy.yaml: RBAC cannot name namespaces by pattern.
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evatenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evatenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evatenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts;resourcequotas;limitranges,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// The tenant's deployer account is bound to one ClusterRole made for it, never to admin.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=eva-tenant-deployer
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=helmrepositories;ocirepositories,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=jetstream.nats.io,resources=streams;accounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=prometheusrules,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings one tenant toward its spec.
func (r *EvaTenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)
	t := &evav1.EvaTenant{}
	if err := r.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.behind(t, r.now()) {
		// The cache has not caught up with this process's own status write: acting on
		// it would apply the bundle again and lose the write to a conflict.
		log.V(1).Info("the cache is behind this operator's last status write; waiting for it")
		return ctrl.Result{RequeueAfter: ConflictRetry}, nil
	}
	if !r.owns(t) {
		log.V(1).Info("tenant belongs to another operator version", "annotation", t.Annotations[tenant.AnnotationOperatorVersion])
		return ctrl.Result{}, r.markUnserved(ctx, t)
	}
	if r.Cell != "" && !r.concerns(t) {
		// Another cell's tenant, or one the fleet operator has not placed yet.
		return ctrl.Result{}, nil
	}
	if !r.namespaceAllowed(t.Namespace) {
		r.ignoreOutsideNamespaces(ctx, t)
		return ctrl.Result{}, nil
	}
	// One owner per code, before anything else: an object whose code another tenant
	// holds touches nothing, not even its own finalizer's saga.
	holder, owned, err := r.claimCode(ctx, t)
	var full *claim.FullError
	switch {
	case errors.As(err, &full):
		return r.refuseOverLimit(ctx, t, full)
	case err != nil:
		return ctrl.Result{}, err
	case holder == nil:
		log.V(1).Info("waiting for the fleet operator to claim the tenant's capsule code")
		return ctrl.Result{RequeueAfter: ClaimRetry}, nil
	case !owned:
		return r.refuseImpostor(ctx, t, *holder)
	}
	if r.Cell != "" {
		if res, handled, err := r.moveStep(ctx, t); handled {
			return res, err
		}
	}
	if err := r.ensureMetadata(ctx, t); err != nil {
		return ctrl.Result{}, err
	}

	s := &scope{tenant: t, base: t.DeepCopy(), log: log}
	// One status patch per reconcile, whatever path it takes, guarded by the
	// resourceVersion: a reconcile working from a stale cache (or an older operator
	// version still finishing) loses with a conflict and is retried, instead of
	// overwriting newer status. Events follow the write they explain.
	defer func() {
		if wait := r.progressHold(s); wait > 0 {
			// Nothing is written, so the events this reconcile queued are dropped: the
			// write that records the progress derives them again.
			result = soonest(result, ctrl.Result{RequeueAfter: wait})
			return
		}
		err := r.writeStatus(ctx, s)
		switch {
		case apierrors.IsConflict(err):
			// Another write won (a newer reconcile, or the cache was behind): not an
			// error, just look again with what is there now. Nothing was written, so
			// the events this reconcile queued are dropped with it.
			log.V(1).Info("status changed meanwhile; reconciling again")
			result, retErr = ctrl.Result{RequeueAfter: ConflictRetry}, nil
			return
		case err != nil:
			retErr = err
		}
	}()
	if err := r.resolveRelease(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() || t.Spec.LifecycleOrDefault() == evav1.LifecycleDecommissioned {
		return r.decommission(ctx, s)
	}
	return runPhases(ctx, s, r.provisionPhases())
}

// owns applies the blue/green rule: a tenant annotated with an operator version belongs
// to that version; an unannotated one can be claimed, unless its spec names another
// version; an operator without a version processes only unannotated tenants.
func (r *EvaTenantReconciler) owns(t *evav1.EvaTenant) bool {
	if claimed := t.Annotations[tenant.AnnotationOperatorVersion]; claimed != "" {
		return claimed == r.OperatorVersion
	}
	if want := t.Spec.OperatorVersion; want != "" && normalVersion(want) != normalVersion(r.OperatorVersion) {
		return false
	}
	return true
}

// ensureMetadata claims the tenant for this operator version, adds the finalizer and
// stamps the wave label, in one patch when anything is missing.
func (r *EvaTenantReconciler) ensureMetadata(ctx context.Context, t *evav1.EvaTenant) error {
	base := t.DeepCopy()
	if r.OperatorVersion != "" && t.Annotations[tenant.AnnotationOperatorVersion] == "" {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[tenant.AnnotationOperatorVersion] = r.OperatorVersion
	}
	if t.DeletionTimestamp.IsZero() {
		controllerutil.AddFinalizer(t, tenant.Finalizer)
	}
	wave := fmt.Sprint(t.Spec.WaveOrDefault())
	if t.Labels[tenant.LabelWave] != wave {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[tenant.LabelWave] = wave
	}
	if equality.Semantic.DeepEqual(base.ObjectMeta, t.ObjectMeta) {
		return nil
	}
	// An optimistic lock: two operator versions racing to claim cannot both win.
	if err := r.Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating metadata of %s/%s: %w", t.Namespace, t.Name, err)
	}
	return nil
}

// markInvalid refuses a spec the catalog does not allow: terminal until the spec
// changes (Stalled tells kstatus and kubectl wait that waiting will not help), judged on
// every condition, with one warning event when the tenant enters it.
func (r *EvaTenantReconciler) markInvalid(s *scope, msg string) {
	// Bounded, so the status that reports the problem can always be written.
	problems := status.ProblemsMessage([]string{msg})
	if findCondition(s.tenant, evav1.ConditionReady).Reason != status.ReasonInvalidSpec {
		s.event(corev1.EventTypeWarning, status.ReasonInvalidSpec, "Tenant spec is invalid: %s", problems)
	}
	s.outcome = status.Outcome{Settled: true, Refused: &status.Refusal{Reason: status.ReasonInvalidSpec,
		Message: "the tenant spec is invalid: " + problems, Judged: true}}
}

// progressHold says how long the status this reconcile computed may wait before it is
// written, zero when it must be written now. It may wait when it only reports progress
// of a provisioning this process reported less than ProgressInterval ago: the same
// generation, the same release, still Provisioning, nothing that failed. A tenant's
// objects change many times while it provisions (every release's status as
// helm-controller installs it, the seed Job, the Ingress's address), and each change
// that reached the status was a write of the tenant: at most one every
// ProgressInterval now. What ends the provisioning (Active, Failed, Stalled), a new
// generation or release, a failed apply and the first status this process writes go
// at once. A condition's first True time (and its metric) is when the status recording
// it is written, so at most ProgressInterval late.
func (r *EvaTenantReconciler) progressHold(s *scope) time.Duration {
	t, was, o := s.tenant, s.base.Status, s.outcome
	if o.Observed == nil || !o.Settled || s.deliverErr != nil || o.Observed.Phase != evav1.PhaseProvisioning {
		return 0
	}
	if was.Phase != evav1.PhaseProvisioning || was.ObservedGeneration != t.Generation || was.Release != o.Release {
		return 0
	}
	last, ok := r.statusWrites.Load(t.UID)
	if !ok {
		return 0
	}
	return max(0, ProgressInterval-r.now().Sub(last.(time.Time)))
}

// writeStatus records the reconcile's outcome (status.Record: conditions, phase,
// Reconciling and Stalled, observedGeneration), queues the events and metrics of what
// changed, writes the status if it changed, and then records the events. Writing it
// twice in one reconcile is harmless: the second finds nothing changed.
func (r *EvaTenantReconciler) writeStatus(ctx context.Context, s *scope) error {
	t := s.tenant
	phaseBefore, firstBefore := t.Status.Phase, len(t.Status.FirstTrue)
	transitions := status.Record(&t.Status, s.outcome, t.Generation, metav1.NewTime(r.now()))
	if s.outcome.Observed != nil {
		emitTransitions(s, transitions, phaseBefore)
	}
	if len(t.Status.FirstTrue) != firstBefore {
		r.observeConditionTimes(s, s.base.Status.FirstTrue)
	}
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	r.flushEvents(s)
	return nil
}

// patchStatus writes the tenant's status if it changed since s.base.
func (r *EvaTenantReconciler) patchStatus(ctx context.Context, s *scope) error {
	t := s.tenant
	if equality.Semantic.DeepEqual(s.base.Status, t.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{})
	data, err := patch.Data(t)
	if err != nil {
		return fmt.Errorf("patching status of %s/%s: %w", t.Namespace, t.Name, err)
	}
	// The API server answers with the tenant's metadata alone: its new resourceVersion
	// is all this process needs of the answer (the status is the one it wrote).
	written := &metav1.PartialObjectMetadata{}
	written.SetGroupVersionKind(evav1.GroupVersion.WithKind("EvaTenant"))
	written.SetNamespace(t.Namespace)
	written.SetName(t.Name)
	err = r.Status().Patch(ctx, written, client.RawPatch(patch.Type(), data))
	switch {
	case err == nil:
		t.ResourceVersion, t.Generation = written.ResourceVersion, written.Generation
		s.base = t.DeepCopy()
		r.written.record(t, r.now())
		r.statusWrites.Store(t.UID, r.now())
		return nil
	case apierrors.IsNotFound(err):
		r.written.forget(t.UID)
		r.statusWrites.Delete(t.UID)
		return nil // the tenant is gone (its finalizer was the last)
	}
	return fmt.Errorf("patching status of %s/%s: %w", t.Namespace, t.Name, err)
}

func (r *EvaTenantReconciler) flushEvents(s *scope) {
	for _, e := range s.events {
		r.event(s.tenant, e.kind, e.reason, "%s", e.message)
	}
	for _, observe := range s.observations {
		observe()
	}
	s.events, s.observations = nil, nil
}

// observeConditionTimes queues, for each condition that became True for the first time,
// the seconds since provisioning started.
func (r *EvaTenantReconciler) observeConditionTimes(s *scope, before map[string]metav1.Time) {
	t := s.tenant
	if r.Metrics == nil || t.Status.ProvisioningStartedAt == nil {
		return
	}
	start := t.Status.ProvisioningStartedAt.Time
	for ct, at := range t.Status.FirstTrue {
		if _, seen := before[ct]; seen {
			continue
		}
		seconds, tier := at.Sub(start).Seconds(), string(t.Spec.Tier)
		s.observations = append(s.observations, func() {
			r.Metrics.ConditionSeconds.WithLabelValues(ct, tier).Observe(seconds)
		})
	}
}

// requeueAfter is when a tenant in a phase is looked at again without an event: an
// Active one at the drift check, jittered; any other soon.
func (r *EvaTenantReconciler) requeueAfter(phase evav1.Phase) time.Duration {
	if phase == evav1.PhaseActive {
		every := r.resyncActive()
		return every + time.Duration(rand.Int64N(int64(every/5)))
	}
	return ResyncProvisioning
}

func (r *EvaTenantReconciler) resyncActive() time.Duration {
	if r.resync > 0 {
		return r.resync
	}
	return ResyncActive
}

func (r *EvaTenantReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *EvaTenantReconciler) event(t *evav1.EvaTenant, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(t, nil, kind, reason, reason, format, args...)
	}
}

// emitTransitions queues one event per condition that turned True, and a warning when
// the tenant enters Failed.
func emitTransitions(s *scope, ts []status.Transition, phaseBefore evav1.Phase) {
	t := s.tenant
	events := []struct{ condition, reason, message string }{
		{evav1.ConditionNamespaceReady, status.EventNamespaceCreated, "Namespace %s is ready"},
		{evav1.ConditionSeedLoaded, status.EventSeedLoaded, "Seed data loaded into %s"},
		{evav1.ConditionModulesDeployed, status.EventModuleDeployComplete, "All modules of %s are deployed"},
		{evav1.ConditionIngressReady, status.EventIngressProvisioned, "Ingress of %s has an address"},
		{evav1.ConditionReady, status.EventProvisioningComplete, "Tenant %s is Active"},
	}
	for _, e := range events {
		if status.BecameTrue(ts, e.condition) {
			s.event(corev1.EventTypeNormal, e.reason, e.message, tenant.Namespace(t.Spec.CapsuleCode))
		}
	}
	if t.Status.Phase == evav1.PhaseFailed && phaseBefore != evav1.PhaseFailed {
		s.event(corev1.EventTypeWarning, status.EventProvisioningFailed, "%s", findCondition(t, evav1.ConditionReady).Message)
	}
}

// findCondition returns a condition, or an empty one when it is not set.
func findCondition(t *evav1.EvaTenant, ct string) *metav1.Condition {
	if c := apimeta.FindStatusCondition(t.Status.Conditions, ct); c != nil {
		return c
	}
	return &metav1.Condition{}
}

// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
