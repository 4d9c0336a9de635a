package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/rollout"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// EvaRolloutReconciler moves platform releases (EvaRollout) through the waves: it admits
// tenants (records them in the rollout's status, which the tenant reconciler reads to
// render the release's versions), checks the gates on their health, bakes each wave and
// halts on a failed gate. Every decision is rollout.Plan's; this reconciler only reads
// the tenants and writes the status, so a restarted operator resumes from it.
type EvaRolloutReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// TenantNamespaces are the namespaces EvaTenants are accepted from (empty: all).
	TenantNamespaces []string
	// Metrics, when set, receive each wave's progress.
	Metrics *metrics.Metrics
	// Depths, when set, say how many messages a tenant's streams hold (the queue-depth
	// gate); an operator not connected to NATS has none, and the gate is not checked.
	Depths QueueDepths
	// Presence, when set, says which operator versions run: a tenant none serves is not
	// admitted.
	Presence *Presence
	// Now returns the current time (tests fix it).
	Now func() time.Time
	// Delivery, FluxShards and Catalog say how fast the tenants' releases are installed
	// and what each admission costs its Flux shard: a rollout admits no more than the
	// shards install within the ready timeout (rollout.Delivery). A nil Catalog counts
	// no cost.
	Delivery   rollout.Delivery
	FluxShards *overlay.FluxShards
	Catalog    *tenant.Catalog
}

// QueueDepths reads the most messages one of a capsule's streams held when last
// measured (metrics.QueueDepthLoop).
type QueueDepths interface {
	QueueDepth(code string) (uint64, bool)
}

// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evarollouts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evarollouts/finalizers,verbs=update
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evarollouts/status,verbs=get;update;patch

// Reconcile decides one rollout's next step.
func (r *EvaRolloutReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var ro evav1.EvaRollout
	if err := r.Get(ctx, req.NamespacedName, &ro); err != nil {
		if apierrors.IsNotFound(err) && r.Metrics != nil {
			r.Metrics.ForgetRollout(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !namespaceAccepted(r.TenantNamespaces, ro.Namespace) {
		return ctrl.Result{}, nil // another operator's tenants, or none
	}
	var all evav1.EvaRolloutList
	if err := r.List(ctx, &all, client.InNamespace(ro.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing rollouts: %w", err)
	}
	superseded := ""
	if newest := rollout.Newest(all.Items); newest != nil && newest.Name != ro.Name {
		superseded = newest.Name
	}
	if !ro.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &ro, all.Items)
	}
	tenants, err := r.tenants(ctx, &ro, all.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !controllerutil.ContainsFinalizer(&ro, rollout.Finalizer) {
		base := ro.DeepCopy()
		controllerutil.AddFinalizer(&ro, rollout.Finalizer)
		if err := r.Patch(ctx, &ro, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	d := rollout.Plan(&ro, tenants, r.Delivery, superseded, now)
	if !equality.Semantic.DeepEqual(ro.Status, d.Status) {
		base := ro.DeepCopy()
		ro.Status = d.Status
		// The optimistic lock keeps a reconcile working from a stale copy from undoing
		// an admission: it loses with a conflict and decides again.
		if err := r.Status().Patch(ctx, &ro, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: ConflictRetry}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patching status of rollout %s: %w", ro.Name, err)
		}
	}
	for _, e := range d.Events {
		if r.Recorder != nil {
			r.Recorder.Eventf(&ro, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
		}
	}
	if len(d.Admitted) > 0 {
		log.Info("Tenants admitted to the release", "rollout", ro.Name, "wave", ro.Status.CurrentWave, "count", len(d.Admitted))
	}
	r.observe(&ro)
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
}

// finalize lets a rollout go only once no tenant renders a version from it any more:
// deleting it would otherwise move those tenants back to an older release (or the
// catalog's versions) at once, without waves or gates. What a tenant renders is read
// from the rollouts' admissions, not from the tenant's status, which is written after
// the tenant's objects. Tenants being decommissioned count too (their teardown renders
// their releases until the end). A newer rollout reaching them with the same modules,
// or their removal, releases it.
func (r *EvaRolloutReconciler) finalize(ctx context.Context, ro *evav1.EvaRollout, all []evav1.EvaRollout) (ctrl.Result, error) {
	var list evav1.EvaTenantList
	if err := r.List(ctx, &list, client.InNamespace(ro.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing tenants: %w", err)
	}
	var held []string
	for _, t := range list.Items {
		if rollout.Needed(all, ro, t.Name, t.UID) {
			held = append(held, t.Spec.CapsuleCode)
		}
	}
	if len(held) == 0 {
		base := ro.DeepCopy()
		controllerutil.RemoveFinalizer(ro, rollout.Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, ro, client.MergeFrom(base)))
	}
	sort.Strings(held)
	msg := fmt.Sprintf("being deleted: still the release of %s; a newer EvaRollout must reach them first (deleting it would move them back without gates)",
		strings.Join(held, ", "))
	if ro.Status.Message != msg {
		base := ro.DeepCopy()
		ro.Status.Message = msg
		if err := r.Status().Patch(ctx, ro, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(ro, nil, corev1.EventTypeWarning, status.EventDeletionHeld, status.EventDeletionHeld, "%s", msg)
		}
	}
	return ctrl.Result{}, nil // the tenants' changes wake it
}

// tenants reads every live tenant of the rollout's namespace, as the planner sees them:
// those other operator versions own too (blue/green), so that every operator watching
// the namespace decides the same from the same status instead of each writing its own.
func (r *EvaRolloutReconciler) tenants(ctx context.Context, ro *evav1.EvaRollout, all []evav1.EvaRollout) ([]rollout.Tenant, error) {
	var list evav1.EvaTenantList
	if err := r.List(ctx, &list, client.InNamespace(ro.Namespace)); err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	var out []rollout.Tenant
	for i := range list.Items {
		t := &list.Items[i]
		if !t.DeletionTimestamp.IsZero() || t.Spec.LifecycleOrDefault() == evav1.LifecycleDecommissioned {
			continue
		}
		ready := findCondition(t, evav1.ConditionReady) // empty when not set
		rt := rollout.Tenant{
			Code: t.Spec.CapsuleCode, Name: t.Name, Tier: t.Spec.Tier, Generation: t.Generation,
			Wave: t.Spec.WaveOrDefault(), Frozen: t.Spec.Frozen,
			OnRelease: t.Status.Release == ro.Name,
			Ready: t.Status.Phase == evav1.PhaseActive && t.Status.ObservedGeneration == t.Generation &&
				ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == t.Generation,
			Failed:         t.Status.Phase == evav1.PhaseFailed,
			FailedAt:       ready.LastTransitionTime.Time,
			Message:        ready.Message,
			UID:            t.UID,
			OnOlderRelease: rollout.OnOlderRelease(all, ro, t.Name, t.UID, t.Generation),
		}
		if !rt.Ready && ready.Status != metav1.ConditionTrue {
			rt.NotReadySince = ready.LastTransitionTime.Time // zero when never set
		}
		rt.Unserved = r.Presence.Unserved(t)
		if r.Depths != nil {
			rt.QueueDepth, rt.QueueDepthKnown = r.Depths.QueueDepth(t.Spec.CapsuleCode)
		}
		rt.FluxShard = r.FluxShards.ShardOf(t.Spec.CapsuleCode, t.Labels[shard.Label])
		if r.Catalog != nil {
			rt.Releases = len(rollout.Changes(t, ro, r.Catalog.ModulesOf(t.Spec.Tier)))
			rt.Unchanged = rt.Releases == 0
		}
		out = append(out, rt)
	}
	return out, nil
}

// observe sets the rollout's gauges.
func (r *EvaRolloutReconciler) observe(ro *evav1.EvaRollout) {
	if r.Metrics == nil {
		return
	}
	for _, ws := range ro.Status.Waves {
		wave := fmt.Sprint(ws.Wave)
		r.Metrics.RolloutUpdated.WithLabelValues(ro.Namespace, ro.Name, wave).Set(float64(len(ws.Updated)))
		r.Metrics.RolloutTotal.WithLabelValues(ro.Namespace, ro.Name, wave).Set(float64(ws.Total))
	}
	halted := 0.0
	if ro.Status.Phase == evav1.RolloutHalted {
		halted = 1
	}
	r.Metrics.RolloutHalted.WithLabelValues(ro.Namespace, ro.Name).Set(halted)
}

// SetupWithManager registers the reconciler: rollouts, and a change of a tenant the
// planner can see (its readiness included: it is what the gates read) or of another
// rollout (a newer one supersedes) wakes the rollouts of its namespace. The rest of a
// tenant's status churn (modules, inventory, timings) wakes none.
func (r *EvaRolloutReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toRollouts := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list evav1.EvaRolloutList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, ro := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ro)})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("evarollout").
		For(&evav1.EvaRollout{}).
		Watches(&evav1.EvaTenant{}, toRollouts, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return plannerView(e.ObjectOld) != plannerView(e.ObjectNew) },
		})).
		Watches(&evav1.EvaRollout{}, toRollouts). // a newer release supersedes the others
		Complete(r)
}

// plannerView is what the planner reads of a tenant (rollout.Tenant), as one string:
// two versions of a tenant with the same view decide the same.
func plannerView(o client.Object) string {
	t, ok := o.(*evav1.EvaTenant)
	if !ok {
		return ""
	}
	ready := findCondition(t, evav1.ConditionReady)
	return fmt.Sprintf("%d|%v|%s|%s|%d|%q|%s|%s|%d|%s|%d|%s|%s|%q", t.Generation, t.DeletionTimestamp != nil,
		t.Spec.CapsuleCode, t.Spec.Tier, t.Spec.WaveOrDefault(), t.Spec.Frozen, t.Spec.LifecycleOrDefault(),
		t.Status.Phase, t.Status.ObservedGeneration, t.Status.Release,
		ready.ObservedGeneration, ready.Status, ready.LastTransitionTime.UTC().Format(time.RFC3339), ready.Message)
}
