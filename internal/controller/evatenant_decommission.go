package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// decommission runs the saga, in order, each step idempotent, a failed step recorded
// and the next still run: 1 delete the streams, 2 delete the alert rules, 3 delete the
// HelmReleases and wait until they are gone (their uninstall runs as the tenant's
// service account, so the namespace goes last), then the namespace, 4 phase
// Decommissioned and an event, 5 remove the finalizer (when the tenant is deleted).
// The finalizer stays while any step failed, so nothing is left behind unnoticed.
func (r *EvaTenantReconciler) decommission(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	if t.Status.Phase == evav1.PhaseDecommissioned {
		// The phase is a record, and a record can be forged: the saga is skipped only
		// when the cluster shows nothing of the tenant is left. A tenant already gone
		// has nothing left for deletionProtection to protect: it stays Decommissioned
		// (and is let go when deleted) whatever the flag says now.
		left, err := r.leftovers(ctx, t)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(left) == 0 {
			return letGo(r.releaseFinalizer(ctx, t))
		}
		s.log.Info("Tenant recorded as Decommissioned still has objects in the cluster; running the saga again", "left", left)
	}
	if t.Spec.DeletionProtection {
		if findCondition(t, evav1.ConditionReady).Reason != status.ReasonDeletionProtected {
			s.event(corev1.EventTypeWarning, status.EventDeprovisionRefused, "Decommission refused: spec.deletionProtection is true")
		}
		s.outcome = status.Outcome{Settled: true, Refused: &status.Refusal{Reason: status.ReasonDeletionProtected,
			Message: "decommission refused: spec.deletionProtection is true; set it to false to proceed"}}
		return ctrl.Result{}, nil
	}
	if t.Status.Phase != evav1.PhaseDecommissioning {
		s.event(corev1.EventTypeNormal, status.EventDeprovisionStarted, "Decommissioning tenant %s", t.Spec.CapsuleCode)
	}
	s.waiting(status.ReasonDecommissioning, "decommission saga under way")
	if r.GitOps != nil {
		return r.decommissionGitOps(ctx, s)
	}
	done, res, err := r.removeAll(ctx, s, true)
	if !done || err != nil {
		return res, err
	}
	return r.finishDecommission(ctx, s)
}

// removeAll is the pure-cluster saga's removal, each step idempotent, a failed step
// recorded and the next still run: 1 the streams (in JetStream itself in direct mode,
// when jetStream says so; NATS away is recorded and the next steps still run), 2 the
// alert rules, 3 the HelmReleases, waited for (their uninstall runs as the tenant's
// service account), then the namespace, waited for. done says everything is gone; until
// then the scope says what it waits for.
func (r *EvaTenantReconciler) removeAll(ctx context.Context, s *scope, jetStream bool) (done bool, res ctrl.Result, err error) {
	t := s.tenant
	code := t.Spec.CapsuleCode
	ns := tenant.Namespace(code)
	var failures []string
	record := func(err error) {
		if err != nil {
			s.log.Error(err, "decommission step failed")
			failures = append(failures, err.Error())
		}
	}

	// 1. Streams (in JetStream itself in direct mode; NATS away is recorded and the
	// next steps still run).
	if r.directMessaging() && jetStream {
		record(r.deleteStreams(ctx, t))
	} else if jetStream {
		record(r.cutOffWorkloads(ctx, t))
	}
	for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		record(r.deleteRef(ctx, t, evav1.ObjectRef{APIVersion: nackv1beta2.GroupVersion.String(), Kind: "Stream",
			Namespace: ns, Name: tenant.StreamObjectName(stream)}))
	}
	// 2. Alert rules.
	record(r.deleteRef(ctx, t, evav1.ObjectRef{APIVersion: monitoringv1.GroupVersion.String(), Kind: "PrometheusRule",
		Namespace: ns, Name: render.AlertRulesName(code)}))
	// 3. Releases, and only once they are gone, the namespace.
	var remaining []string
	names, err := r.releaseNames(ctx, t)
	record(err)
	for _, module := range names {
		var hr helmv2.HelmRelease
		found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: module}, &hr)
		if err != nil {
			record(err)
			continue
		}
		if !found || !ownedBy(&hr, t) {
			continue // not this tenant's: neither deleted nor waited for
		}
		remaining = append(remaining, module)
		if hr.DeletionTimestamp.IsZero() {
			_, err := r.deleteOwned(ctx, t, &hr)
			record(err)
		}
	}
	if len(remaining) > 0 {
		msg := "waiting for HelmReleases to be uninstalled: " + strings.Join(remaining, ", ")
		if len(failures) > 0 {
			msg += "; failed steps: " + strings.Join(failures, "; ")
		}
		s.waiting(status.ReasonDecommissioning, msg)
		return false, ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	record(r.deleteRef(ctx, t, evav1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: ns}))
	if len(failures) > 0 {
		if findCondition(t, evav1.ConditionReady).Reason != status.ReasonStepFailed {
			s.event(corev1.EventTypeWarning, status.ReasonStepFailed, "%d decommission step(s) failed; retrying", len(failures))
		}
		s.waiting(status.ReasonStepFailed, "decommission steps failed: "+strings.Join(failures, "; "))
		return false, ctrl.Result{}, fmt.Errorf("decommissioning %s: %s", code, strings.Join(failures, "; "))
	}
	// The tenant is decommissioned only once its namespace is gone: a namespace stuck
	// terminating (a finalizer nobody clears) is reported, not hidden.
	var namespace corev1.Namespace
	found, err := r.get(ctx, types.NamespacedName{Name: ns}, &namespace)
	if err != nil {
		// Said in the condition and returned (logged by the controller, retried with
		// backoff): never a hint at logs nothing wrote.
		s.waiting(status.ReasonNamespaceTerminating, fmt.Sprintf("reading Namespace %s failed: %v", ns, err))
		return false, ctrl.Result{}, fmt.Errorf("reading Namespace %s: %w", ns, err)
	}
	if found && ownedBy(&namespace, t) {
		s.waiting(status.ReasonNamespaceTerminating, fmt.Sprintf("waiting for Namespace %s to finish terminating", ns))
		return false, ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	return true, ctrl.Result{}, nil
}

// leftovers lists what of the tenant the cluster still holds: its namespace (in
// pure-cluster mode the one stamped with its UID, as the saga's own last check; in GitOps
// mode any namespace of its code, as that saga waits for Flux to prune it), in direct
// messaging mode its streams in JetStream (NACK's Stream objects live in the namespace),
// and its NATS account while it is open (finishDecommission closes it).
// Reads go to the API server: the answer frees the tenant's code.
func (r *EvaTenantReconciler) leftovers(ctx context.Context, t *evav1.EvaTenant) ([]string, error) {
	code := t.Spec.CapsuleCode
	ns := tenant.Namespace(code)
	var left []string
	var namespace corev1.Namespace
	err := r.APIReader.Get(ctx, types.NamespacedName{Name: ns}, &namespace)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading namespace %s: %w", ns, err)
	case r.GitOps != nil || ownedBy(&namespace, t):
		left = append(left, "Namespace "+ns)
	}
	if r.directMessaging() {
		streams, done, err := r.streamsOf(ctx, t)
		defer done()
		if err != nil {
			return nil, err
		}
		for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			if streams == nil {
				break // an account never made holds no stream
			}
			found, err := streams.Exists(ctx, stream)
			if err != nil {
				return nil, fmt.Errorf("looking up stream %s: %w", stream, err)
			}
			if found {
				left = append(left, "stream "+stream)
			}
		}
	}
	if r.Accounts != nil {
		open, err := r.Accounts.Open(ctx, code, tenant.Owner(string(t.UID)))
		if err != nil {
			return nil, err
		}
		if open {
			left = append(left, "NATS account of "+code)
		}
	}
	return left, nil
}

// finishDecommission is steps 4 and 5: phase Decommissioned and an event (written
// before the finalizer goes, so a restart never runs the saga again), then the finalizer.
func (r *EvaTenantReconciler) finishDecommission(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	if mv := t.Status.Move; mv != nil && mv.TargetRemovedAt == nil {
		// Decommissioned during a move between cells: done once the target's copy is
		// gone too (cellmove.go), so nothing is left behind in either cell.
		s.waiting(status.ReasonDecommissioning, fmt.Sprintf("waiting for cell %s to remove the tenant's copy there", mv.To))
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	if r.Accounts != nil {
		// Everything else gone (the streams with it), the tenant's NATS account goes: the
		// credentials anyone kept are refused from now, and a tenant made again with the
		// code gets a new account.
		if err := r.Accounts.Close(ctx, t.Spec.CapsuleCode, tenant.Owner(string(t.UID))); err != nil {
			s.waiting(status.ReasonStepFailed, "closing the tenant's NATS account failed: "+err.Error())
			return ctrl.Result{}, err
		}
	}
	s.outcome = status.Outcome{Decommission: &status.Decommission{Done: true}, Settled: true}
	s.event(corev1.EventTypeNormal, status.EventDeprovisionComplete, "Tenant %s decommissioned", t.Spec.CapsuleCode)
	if err := r.writeStatus(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if r.GitOps != nil {
		r.GitOps.forget(t.UID)
	}
	r.memo.forget(t.UID)
	r.lastApply.Delete(t.UID)
	r.statusWrites.Delete(t.UID)
	// 5. The finalizer.
	return letGo(r.releaseFinalizer(ctx, t))
}

// letGo is the result of releasing a tenant's finalizer: a cell's operator waiting for
// the fleet operator to release the tenant's claim looks again soon.
func letGo(err error) (ctrl.Result, error) {
	if errors.Is(err, errClaimHeld) {
		return ctrl.Result{RequeueAfter: ClaimRetry}, nil
	}
	return ctrl.Result{}, err
}

// waiting records that the decommission saga is under way and what it waits for.
func (s *scope) waiting(reason, msg string) {
	s.outcome = status.Outcome{Decommission: &status.Decommission{Reason: reason, Message: msg}}
}

// releaseNames lists the releases a tenant may have: the catalog's modules of its tier,
// any in its inventory (a tier may have changed), and any HelmRelease carrying its
// capsule label in its namespace.
func (r *EvaTenantReconciler) releaseNames(ctx context.Context, t *evav1.EvaTenant) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, m := range r.Renderer.Catalog.ModulesOf(t.Spec.Tier) {
		add(m)
	}
	for _, ref := range t.Status.Inventory {
		if ref.Kind == "HelmRelease" {
			add(ref.Name)
		}
	}
	var list helmv2.HelmReleaseList
	err := r.List(ctx, &list, client.InNamespace(tenant.Namespace(t.Spec.CapsuleCode)),
		client.MatchingLabels{tenant.LabelCapsule: t.Spec.CapsuleCode})
	for _, hr := range list.Items {
		add(hr.Name)
	}
	return out, err
}

func (r *EvaTenantReconciler) releaseFinalizer(ctx context.Context, t *evav1.EvaTenant) error {
	if t.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(t, tenant.Finalizer) {
		return nil
	}
	// A copy is patched: the patch response would otherwise overwrite the status held
	// in memory.
	// The code's claim goes first: were the finalizer removed first, a crash in between
	// would leave the code claimed by a tenant that no longer exists.
	if err := r.releaseClaim(ctx, t); err != nil {
		return err
	}
	cp := t.DeepCopy()
	base := cp.DeepCopy()
	controllerutil.RemoveFinalizer(cp, tenant.Finalizer)
	if err := r.Patch(ctx, cp, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}
