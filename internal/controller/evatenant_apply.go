package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/quota"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
)

func refOf(u *unstructured.Unstructured) evav1.ObjectRef {
	return evav1.ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// objectOf is the object ref names, empty but for its kind and name: what a client
// reads into or deletes.
func objectOf(ref evav1.ObjectRef) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(ref.APIVersion)
	u.SetKind(ref.Kind)
	u.SetNamespace(ref.Namespace)
	u.SetName(ref.Name)
	return u
}

func refString(r evav1.ObjectRef) string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// applyBundle server-side applies the bundle when it changed since the last apply, or,
// when the periodic drift check is due (or the operator restarted), the objects that
// drifted from it (see driftedObjects); then it prunes what the previous inventory held and
// the bundle no longer does. The foundation (namespace, confinement, streams, rules) and
// the decrypted Secrets go first; the workloads (releases, seed Job, Ingress) only once
// the tenant's quota is enforced (see internal/quota), or their pods could be admitted
// past it: until then s.observed.Applied.Waiting says why, and the reconcile looks
// again soon (or when the quota's status changes). Apply failures are recorded on the
// scope for the Provisioned condition; the error returned makes the reconcile retry
// with backoff.
func (r *EvaTenantReconciler) applyBundle(ctx context.Context, s *scope) error {
	t := s.tenant
	foundation := s.bundle.UnstructuredLayer(render.Foundation)
	if r.directMessaging() {
		// Direct mode: the streams live in JetStream only, not as NACK objects (nor the
		// NACK Account they would name).
		foundation = slices.DeleteFunc(foundation, func(u *unstructured.Unstructured) bool {
			return u.GroupVersionKind().Group == nackv1beta2.GroupVersion.Group
		})
	}
	secrets, err := r.decryptedSecrets(ctx, t)
	if err != nil {
		s.observed.Applied.Error = err.Error()
		return err
	}
	foundation = append(foundation, secrets...)
	workloads := s.bundle.UnstructuredLayer(render.Workloads)
	inventory := refsOf(append(slices.Clone(foundation), workloads...))
	last, _ := r.lastApply.Load(t.UID)
	due := last == nil || r.now().Sub(last.(time.Time)) >= r.resyncActive()
	if t.Status.AppliedDigest == s.digest && slices.Equal(t.Status.Inventory, inventory) && !due {
		s.observed.Applied.Revision = s.digest
		return nil
	}
	changed := t.Status.AppliedDigest != s.digest
	quotaFrom := foundation
	if !changed && slices.Equal(t.Status.Inventory, inventory) {
		// The drift check (periodic, or the first look after a restart): only what
		// drifted from the bundle is applied.
		var drifted, more []string
		foundation, drifted = r.driftedObjects(ctx, s, foundation)
		workloads, more = r.driftedObjects(ctx, s, workloads)
		if drifted = append(drifted, more...); len(drifted) > 0 {
			s.log.Info("Correcting drift", "objects", drifted)
			s.event(corev1.EventTypeWarning, status.EventDriftCorrected, "Re-applying %d object(s) changed outside Eva: %s", len(drifted), firstOf(drifted, 5))
		}
		if len(foundation) == 0 && len(workloads) == 0 {
			s.observed.Applied.Revision = s.digest
			r.lastApply.Store(t.UID, r.now())
			return nil
		}
	}
	if err := r.checkNamespaceOwner(ctx, t); err != nil {
		return err
	}
	if err := r.applyObjects(ctx, s, foundation, inventory); err != nil {
		return err
	}
	if len(workloads) > 0 {
		enforced, why, err := r.quotaEnforced(ctx, quotaFrom)
		if err != nil {
			s.observed.Applied.Error = "could not read the tenant's ResourceQuota: " + err.Error()
			t.Status.Inventory = union(t.Status.Inventory, refsOf(foundation))
			return err
		}
		if !enforced {
			s.observed.Applied.Waiting = why
			// What did apply must stay tracked, or a later prune or the saga would miss it.
			t.Status.Inventory = union(t.Status.Inventory, refsOf(foundation))
			return nil
		}
	}
	if err := r.applyObjects(ctx, s, workloads, inventory); err != nil {
		return err
	}
	if err := r.prune(ctx, t, t.Status.Inventory, inventory); err != nil {
		s.observed.Applied.Error = "could not prune objects no longer rendered: " + err.Error()
		t.Status.Inventory = union(t.Status.Inventory, inventory)
		return err
	}
	if changed && hasReleases(inventory) {
		s.event(corev1.EventTypeNormal, status.EventModuleDeployStarted, "Deploying %d module(s)", countKind(inventory, "HelmRelease"))
	}
	t.Status.Inventory = inventory
	t.Status.AppliedDigest = s.digest
	s.observed.Applied.Revision = s.digest
	r.lastApply.Store(t.UID, r.now())
	return nil
}

// applyObjects server-side applies objects of the tenant, but not those the memo says
// still hold exactly what is to be applied. On a failure it records what
// failed for the Provisioned condition (one warning per failing episode), keeps the
// whole inventory tracked, and returns the failures.
func (r *EvaTenantReconciler) applyObjects(ctx context.Context, s *scope, objects []*unstructured.Unstructured, inventory []evav1.ObjectRef) error {
	t := s.tenant
	var failed []string
	var errs []error
	for _, u := range objects {
		if u.GetKind() == "Job" {
			// A Job is one run: its template is immutable, and a finished seed Job must
			// not be replaced. A new seeds version renders a new Job name.
			var existing batchv1.Job
			if found, err := r.get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, &existing); err == nil && found {
				continue
			}
		}
		stampOwner(u, t)
		ref := refOf(u)
		body, err := json.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", refString(ref), err)
		}
		hash := ""
		if !isSecret(u) {
			hash = hashOf(body)
		}
		if hash != "" && r.memo.known(t.UID, ref) {
			// Applied by this process before: an object still at the version it had
			// right after exactly this was applied needs no write (a new bundle changes
			// a few of a tenant's objects, not all of them).
			if rv := r.cachedVersion(ctx, u); rv != "" && r.memo.holds(t.UID, ref, rv, hash) {
				continue
			}
		}
		// Forced: drift (a kubectl edit) is corrected. Safe only because the code's claim
		// and the namespace check make this tenant the one owner of these objects.
		rv, err := r.serverSideApply(ctx, u, body)
		if err != nil {
			failed = append(failed, refString(ref))
			errs = append(errs, fmt.Errorf("applying %s: %w", refString(ref), err))
			s.log.Error(err, "apply failed", "object", refString(ref))
			continue
		}
		r.memo.record(t.UID, ref, rv, hash)
	}
	if len(failed) == 0 {
		return nil
	}
	// The API server's answer (an admission policy's refusal, the quota) is the
	// tenant's to read: the first one is in the condition, all are in the log.
	s.observed.Applied.Error = fmt.Sprintf("could not apply %v: %v", failed, errs[0])
	if findCondition(t, evav1.ConditionProvisioned).Reason != status.ReasonApplyFailed {
		s.event(corev1.EventTypeWarning, status.ReasonApplyFailed, "Could not apply %d object(s): %v", len(failed), failed)
	}
	// What did apply must stay tracked, or a later prune or the saga would miss it.
	t.Status.Inventory = union(t.Status.Inventory, inventory)
	return errors.Join(errs...)
}

// serverSideApply applies body, the JSON of u, as the operator's field manager, forced,
// and returns the object's driftVersion after it. The API server answers with the
// object's metadata alone (PartialObjectMetadata, in protobuf): the version is all the
// operator keeps of an apply, and decoding the whole object the server returns (its
// managed fields included) into a map was the costliest part of an apply.
func (r *EvaTenantReconciler) serverSideApply(ctx context.Context, u *unstructured.Unstructured, body []byte) (string, error) {
	applied := &metav1.PartialObjectMetadata{}
	applied.SetGroupVersionKind(u.GroupVersionKind())
	applied.SetNamespace(u.GetNamespace())
	applied.SetName(u.GetName())
	if err := r.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return "", err
	}
	return driftVersion(u.GroupVersionKind(), applied, false), nil
}

// quotaEnforced reads the tenant's ResourceQuota (from the API server: the cached copy
// has no status.used, and the decision must not rest on a stale copy) and says whether the quota
// admission enforces it. A bundle without a quota has nothing to wait for.
func (r *EvaTenantReconciler) quotaEnforced(ctx context.Context, foundation []*unstructured.Unstructured) (bool, string, error) {
	for _, u := range foundation {
		if u.GetKind() != "ResourceQuota" {
			continue
		}
		var rq corev1.ResourceQuota
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, &rq); err != nil {
			return false, "", fmt.Errorf("reading ResourceQuota %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		if ok, why := quota.Enforced(&rq); !ok {
			return false, why, nil
		}
	}
	return true, "", nil
}

func refsOf(objects []*unstructured.Unstructured) []evav1.ObjectRef {
	out := make([]evav1.ObjectRef, len(objects))
	for i, u := range objects {
		out[i] = refOf(u)
	}
	return out
}

// identity is an object's identity whatever its API version: an object rendered at a
// newer version of its API is the same object, and must not be pruned.
func identity(ref evav1.ObjectRef) string {
	group, _, _ := strings.Cut(ref.APIVersion, "/")
	if !strings.Contains(ref.APIVersion, "/") {
		group = ""
	}
	return group + "/" + ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// union merges two inventories (by identity, the newer entry winning).
func union(old, current []evav1.ObjectRef) []evav1.ObjectRef {
	seen := map[string]bool{}
	out := append([]evav1.ObjectRef{}, current...)
	for _, ref := range current {
		seen[identity(ref)] = true
	}
	for _, ref := range old {
		if !seen[identity(ref)] {
			seen[identity(ref)] = true
			out = append(out, ref)
		}
	}
	return out
}

// prune deletes what the old inventory lists and the new one does not (a module dropped
// by a tier change, a seed Job of an older version).
func (r *EvaTenantReconciler) prune(ctx context.Context, t *evav1.EvaTenant, old, current []evav1.ObjectRef) error {
	keep := map[string]bool{}
	for _, ref := range current {
		keep[identity(ref)] = true
	}
	var errs []error
	for _, ref := range old {
		if keep[identity(ref)] {
			continue
		}
		if err := r.deleteRef(ctx, t, ref); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteRef deletes one object of the tenant, if it exists and carries the tenant's
// identity (see deleteOwned). The read goes to the API server: most of these kinds are
// not cached, and a delete decision is not made on a stale copy.
func (r *EvaTenantReconciler) deleteRef(ctx context.Context, t *evav1.EvaTenant, ref evav1.ObjectRef) error {
	u := objectOf(ref)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("reading %s: %w", refString(ref), err)
	}
	// Background propagation: a Job's pods, a release's objects go with it.
	if _, err := r.deleteOwned(ctx, t, u, client.PropagationPolicy("Background")); err != nil {
		return fmt.Errorf("deleting %s: %w", refString(ref), err)
	}
	return nil
}

// firstOf lists up to n items, and how many more there are.
func firstOf(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

func hasReleases(refs []evav1.ObjectRef) bool { return countKind(refs, "HelmRelease") > 0 }

func countKind(refs []evav1.ObjectRef, kind string) int {
	n := 0
	for _, r := range refs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}
