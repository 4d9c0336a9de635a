package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// errNamespaceInUse is returned by the apply when the tenant namespace exists and does
// not carry this tenant's identity: nothing is applied and the tenant is Stalled.
var errNamespaceInUse = errors.New("namespace in use")

// ownerOf is the identity a tenant claims its code with and stamps on its objects.
func ownerOf(t *evav1.EvaTenant) claim.Owner {
	return claim.Owner{Namespace: t.Namespace, Name: t.Name, UID: t.UID}
}

// claimCode claims the tenant's capsule code, or, for a cell's operator, reads the claim
// the fleet operator made (cells never write claims: docs/cells.md#the-cell-identity).
// holder is nil when a cell finds no claim on a tenant still to serve; a tenant being
// deleted whose claim the fleet operator released (its saga is done) is this one's.
func (r *EvaTenantReconciler) claimCode(ctx context.Context, t *evav1.EvaTenant) (holder *claim.Owner, owned bool, err error) {
	if r.Cell == "" {
		h, owned, err := r.Claims.Acquire(ctx, t.Spec.CapsuleCode, ownerOf(t))
		return &h, owned, err
	}
	h, found, err := r.Claims.Holder(ctx, t.Spec.CapsuleCode)
	switch {
	case err != nil:
		return nil, false, err
	case found:
		return &h, h.UID == t.UID, nil
	case !t.DeletionTimestamp.IsZero():
		self := ownerOf(t)
		return &self, true, nil
	}
	return nil, false, nil
}

// errClaimHeld says a cell's operator waits for the fleet operator to release a
// decommissioned tenant's claim before it lets the tenant go.
var errClaimHeld = errors.New("the capsule code's claim is not released yet")

// releaseClaim releases the tenant's claim before its finalizer goes. A cell's operator
// does not write claims: the fleet operator releases the claim of a deleted tenant
// recorded as Decommissioned, and until it has, errClaimHeld.
func (r *EvaTenantReconciler) releaseClaim(ctx context.Context, t *evav1.EvaTenant) error {
	if r.Cell == "" {
		return r.Claims.Release(ctx, t.Spec.CapsuleCode, ownerOf(t))
	}
	holder, found, err := r.Claims.Holder(ctx, t.Spec.CapsuleCode)
	if err == nil && found && holder.UID == t.UID {
		return errClaimHeld
	}
	return err
}

// namespaceAllowed reports whether EvaTenants are accepted from ns. An empty list
// accepts every namespace; the operator binary never leaves it empty (its default is its
// own namespace).
func (r *EvaTenantReconciler) namespaceAllowed(ns string) bool {
	return namespaceAccepted(r.TenantNamespaces, ns)
}

// ignoreOutsideNamespaces leaves a tenant outside the accepted namespaces alone. It
// warns with an event only while no operator serves the tenant (it has no finalizer): a
// tenant that an operator accepting its namespace has taken up is not ignored, and
// otherwise every operator for other namespaces would warn about each such tenant each
// time it starts.
func (r *EvaTenantReconciler) ignoreOutsideNamespaces(ctx context.Context, t *evav1.EvaTenant) {
	log := ctrl.LoggerFrom(ctx)
	if controllerutil.ContainsFinalizer(t, tenant.Finalizer) {
		log.V(1).Info("Leaving a tenant another operator serves", "accepted", r.TenantNamespaces)
		return
	}
	log.V(1).Info("Ignoring a tenant outside the accepted namespaces", "accepted", r.TenantNamespaces)
	r.event(t, corev1.EventTypeWarning, status.ReasonNamespaceNotAllowed,
		"EvaTenants are not accepted in namespace %s; this object is ignored", t.Namespace)
}

// namespaceAccepted reports whether ns is one of accepted, or accepted is empty.
func namespaceAccepted(accepted []string, ns string) bool {
	return len(accepted) == 0 || slices.Contains(accepted, ns)
}

// refuseImpostor handles a tenant whose code another tenant holds: it applies, adopts,
// prunes and deletes nothing, drops this operator's finalizer (deleting the impostor
// must not wait on, or run, a saga over objects it does not own) and reports Stalled.
// The message names the holder only where the impostor's reader may see it (refusal);
// a claim whose holder no longer exists is reported as orphaned, with the Lease to
// delete, and an event whenever the refusal changes. Nothing is adopted: the dead
// holder's objects may still be there, and taking them over is an operator's decision.
func (r *EvaTenantReconciler) refuseImpostor(ctx context.Context, t *evav1.EvaTenant, holder claim.Owner) (ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(t, tenant.Finalizer) {
		cp := t.DeepCopy()
		controllerutil.RemoveFinalizer(cp, tenant.Finalizer)
		if err := r.Patch(ctx, cp, client.MergeFrom(t)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		t.Finalizers, t.ResourceVersion = cp.Finalizers, cp.ResourceVersion
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orphaned, err := r.holderGone(ctx, holder)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{tenant: t, base: t.DeepCopy(), log: ctrl.LoggerFrom(ctx)}
	lease := r.Claims.Key(t.Spec.CapsuleCode)
	msg := refusal(t, holder, orphaned, lease)
	if c := findCondition(t, evav1.ConditionStalled); c.Reason == status.ReasonCapsuleCodeInUse && c.Message != msg {
		// Refused before, for another cause (the holder has gone since): markStalled
		// records an event only on a new reason, and this one must be seen too.
		s.event(corev1.EventTypeWarning, status.ReasonCapsuleCodeInUse, "%s", msg)
	}
	if findCondition(t, evav1.ConditionStalled).Message != msg {
		// The holder in full, for the platform's operators only.
		s.log.Info("Capsule code held by another EvaTenant; refusing this one", "code", t.Spec.CapsuleCode,
			"holder", holder.String(), "orphaned", orphaned, "claim", lease.String())
	}
	r.markStalled(s, status.ReasonCapsuleCodeInUse, msg)
	if err := r.writeStatus(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	// Looked at again now and then: once the owner is deleted (or the orphaned claim is)
	// the code is free.
	return ctrl.Result{RequeueAfter: r.requeueAfter(evav1.PhaseFailed)}, nil
}

// refuseOverLimit handles a new tenant the fleet has no room for (the entitlements'
// maxTenants): nothing is applied, it is Stalled saying so, and it is looked at again
// now and then, taking the place once another tenant releases its code.
func (r *EvaTenantReconciler) refuseOverLimit(ctx context.Context, t *evav1.EvaTenant, full *claim.FullError) (ctrl.Result, error) {
	s := &scope{tenant: t, base: t.DeepCopy(), log: ctrl.LoggerFrom(ctx)}
	r.markStalled(s, status.ReasonTenantLimit, full.Error())
	if err := r.writeStatus(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(evav1.PhaseFailed)}, nil
}

// holderGone reports whether the EvaTenant a claim names no longer exists: not found,
// or found with another UID (deleted and created again under the same name). Such a
// claim is orphaned: its holder was deleted without the saga (its finalizer removed by
// hand), so the code stays refused until someone deletes the claim. A claim naming no
// EvaTenant at all counts as orphaned too.
func (r *EvaTenantReconciler) holderGone(ctx context.Context, holder claim.Owner) (bool, error) {
	if holder.Namespace == "" || holder.Name == "" || holder.UID == "" {
		return true, nil
	}
	var h evav1.EvaTenant
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: holder.Namespace, Name: holder.Name}, &h)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading EvaTenant %s/%s, holder of a capsule code: %w", holder.Namespace, holder.Name, err)
	}
	return h.UID != holder.UID, nil
}

// refusal is the message of a tenant refused its capsule code. It names the holder
// only when the holder is in the tenant's own namespace: whoever reads this tenant may
// read the tenants beside it, but not another team's, and naming those would let anyone
// list other teams' tenants by probing codes (the operator's log keeps the holder). An
// orphaned claim is reported with the explicit step that frees the code; the leftovers
// are never adopted by the next tenant.
func refusal(t *evav1.EvaTenant, holder claim.Owner, orphaned bool, lease types.NamespacedName) string {
	code := t.Spec.CapsuleCode
	sameNamespace := holder.Namespace == t.Namespace
	switch {
	case orphaned:
		who := "whose EvaTenant"
		if sameNamespace && holder.Name != "" {
			who = "whose EvaTenant " + holder.Namespace + "/" + holder.Name
		}
		return fmt.Sprintf("capsule code %s is held by an orphaned claim: Lease %s, %s no longer exists "+
			"(deleted without its teardown, so its objects may remain); this object is ignored and changes nothing. "+
			"To reuse the code, remove what is left of the old tenant (Namespace %s, its streams and releases), then delete the Lease",
			code, lease, who, tenant.Namespace(code))
	case sameNamespace:
		return fmt.Sprintf("capsule code %s is owned by EvaTenant %s; this object is ignored and changes nothing", code, holder)
	}
	return fmt.Sprintf("capsule code %s is taken by an EvaTenant in another namespace; this object is ignored and changes nothing", code)
}

// markStalled reports a terminal refusal: phase Failed, Stalled True (kstatus reads it
// as Failed) and Ready False with the reason, and one warning event when the tenant
// enters it. The five conditions are left as last observed: a refusal observes nothing
// of the tenant's objects (they may be another owner's). The refusal is this
// generation's outcome: observedGeneration moves.
func (r *EvaTenantReconciler) markStalled(s *scope, reason, msg string) {
	if findCondition(s.tenant, evav1.ConditionStalled).Reason != reason {
		s.event(corev1.EventTypeWarning, reason, "%s", msg)
	}
	s.outcome = status.Outcome{Refused: &status.Refusal{Reason: reason, Message: msg}, Settled: true}
}

// checkNamespaceOwner refuses to apply into a tenant namespace that exists and is not
// stamped with this tenant's UID: one stamped with another tenant's, and one carrying
// no stamp at all, whoever made it (a tenant file's publish applied by Flux, a person,
// an operator of another mode or an earlier version). The operator never adopts a
// namespace it did not stamp: adopting one is an explicit step, annotating it with the
// tenant's UID, which the API server's audit log records. The read goes to the API
// server: the cache only holds labelled namespaces, and an unlabelled one is exactly the
// case to catch.
func (r *EvaTenantReconciler) checkNamespaceOwner(ctx context.Context, t *evav1.EvaTenant) error {
	ns := tenant.Namespace(t.Spec.CapsuleCode)
	var namespace corev1.Namespace
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: ns}, &namespace); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	switch uid := namespace.Annotations[claim.AnnotationOwnerUID]; {
	case uid == string(t.UID):
		return nil
	case uid == tenant.FileOwner:
		return fmt.Errorf("%w: Namespace %s belongs to a tenant published from a file (tenants/)", errNamespaceInUse, ns)
	case uid != "":
		// The message goes to this tenant's condition: it names no other tenant, the
		// log does.
		ctrl.LoggerFrom(ctx).Info("Tenant namespace belongs to another EvaTenant", "namespace", ns, "ownerUID", uid)
		return fmt.Errorf("%w: Namespace %s belongs to another EvaTenant", errNamespaceInUse, ns)
	case namespace.Labels[tenant.LabelCapsule] != t.Spec.CapsuleCode:
		return fmt.Errorf("%w: Namespace %s exists and was not created by Eva for %s", errNamespaceInUse, ns, t.Spec.CapsuleCode)
	}
	return fmt.Errorf("%w: Namespace %s exists without this tenant's stamp (a tenant file's, or made by hand or by another operator); "+
		"to hand it to this EvaTenant, annotate it %s=%s", errNamespaceInUse, ns, claim.AnnotationOwnerUID, t.UID)
}

// stampOwner marks an object with the tenant's UID before it is applied; only objects
// carrying it are ever deleted for this tenant.
func stampOwner(u *unstructured.Unstructured, t *evav1.EvaTenant) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[claim.AnnotationOwnerUID] = string(t.UID)
	u.SetAnnotations(a)
}

// deleteOwned deletes obj (already read, with its kind set) only if it carries the
// tenant's identity, with a UID precondition so a replacement created since the read
// is never deleted. It reports whether a delete was issued.
func (r *EvaTenantReconciler) deleteOwned(ctx context.Context, t *evav1.EvaTenant, obj client.Object, opts ...client.DeleteOption) (bool, error) {
	if !ownedBy(obj, t) {
		ctrl.LoggerFrom(ctx).Info("Not deleting an object that does not carry this tenant's identity",
			"kind", obj.GetObjectKind().GroupVersionKind().Kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
		return false, nil
	}
	uid := obj.GetUID()
	opts = append(opts, client.Preconditions{UID: &uid})
	if err := r.Delete(ctx, obj, opts...); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return true, nil
}

// ownedBy reports whether obj carries the tenant's identity.
func ownedBy(obj client.Object, t *evav1.EvaTenant) bool {
	return obj.GetAnnotations()[claim.AnnotationOwnerUID] == string(t.UID)
}
