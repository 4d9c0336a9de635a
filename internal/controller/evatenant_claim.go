package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// namespaceAllowed reports whether EvaTenants are accepted from ns. An empty list
// accepts every namespace; the operator binary never leaves it empty (its default is its
// own namespace).
func (r *EvaTenantReconciler) namespaceAllowed(ns string) bool {
	return namespaceAccepted(r.TenantNamespaces, ns)
}

// namespaceAccepted reports whether ns is one of accepted, or accepted is empty.
func namespaceAccepted(accepted []string, ns string) bool {
	return len(accepted) == 0 || slices.Contains(accepted, ns)
}

// refuseImpostor handles a tenant whose code another tenant holds: it applies, adopts,
// prunes and deletes nothing, drops this operator's finalizer (deleting the impostor
// must not wait on, or run, a saga over objects it does not own) and reports Stalled
// with the owner named.
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
	s := &scope{tenant: t, base: t.DeepCopy(), log: ctrl.LoggerFrom(ctx)}
	msg := fmt.Sprintf("capsule code %s is owned by EvaTenant %s; this object is ignored and changes nothing",
		t.Spec.CapsuleCode, holder)
	r.markStalled(s, status.ReasonCapsuleCodeInUse, msg)
	if err := r.patchStatus(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.flushEvents(s)
	// Looked at again now and then: once the owner is deleted the code is free.
	return ctrl.Result{RequeueAfter: r.requeueAfter(t)}, nil
}

// markStalled reports a terminal refusal: Stalled True (kstatus reads it as Failed),
// Ready and every condition False with the reason, phase Failed, and one warning event
// when the tenant enters it. observedGeneration moves: the refusal is the outcome of
// this generation.
func (r *EvaTenantReconciler) markStalled(s *scope, reason, msg string) {
	t := s.tenant
	now := metav1.NewTime(r.now())
	if findCondition(t, evav1.ConditionStalled).Reason != reason {
		s.event(corev1.EventTypeWarning, reason, "%s", msg)
	}
	t.Status.Phase = evav1.PhaseFailed
	status.SetProgress(&t.Status, evav1.PhaseFailed, &status.Verdict{Reason: reason, Message: msg}, "", t.Generation, now)
	setCondition(t, evav1.ConditionReady, metav1.ConditionFalse, reason, msg, now)
	t.Status.ObservedGeneration = t.Generation
}

// checkNamespaceOwner refuses to apply into a tenant namespace that exists and is not
// this tenant's: one stamped with another tenant's UID, or one Eva never created (no
// capsule label for this code). A namespace with this code's label but no owner stamp
// was created by an earlier operator version and is adopted. The read goes to the API
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
	case uid != "":
		return fmt.Errorf("%w: Namespace %s belongs to another EvaTenant (uid %s)", errNamespaceInUse, ns, uid)
	case namespace.Labels[tenant.LabelCapsule] != t.Spec.CapsuleCode:
		return fmt.Errorf("%w: Namespace %s exists and was not created by Eva for %s", errNamespaceInUse, ns, t.Spec.CapsuleCode)
	}
	return nil
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
