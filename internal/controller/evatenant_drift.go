package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/drift"
	"github.com/aidonow/eva/internal/safetext"
)

// The periodic drift check of an Active tenant, and the first look after an operator
// restart, apply only the objects that drifted (edited or deleted outside Eva): a tenant
// nobody touched costs no API write, and what was applied is read from the cluster, not
// from memory, so a restarted operator re-applies nothing that is unchanged.
//
// An object is in sync when, in order of cost:
//  1. it is still at the version it had right after the operator applied (or last
//     confirmed) exactly this (memo, in memory), checked against the cache's copy
//     before anything is converted (most checks of an untouched tenant end here): its
//     resourceVersion, or for the kinds whose status other controllers write, a version
//     those writes leave as it is (driftVersion);
//  2. the object equals the rendered object, both read through the kind's Go type
//     (drift.Find; exact, so an edit anywhere in what Eva sets shows): the informer
//     cache's copy, or the API server's for the kinds whose cache holds less than is
//     applied (cachedWhole: names and versions alone, or the status and little else),
//     read after an edit, a deletion or a restart;
//  3. a server-side dry run of the apply leaves it as it is: the API server's defaults
//     make most objects differ from what is rendered, and only the API server can say
//     they are defaults. The confirmation is remembered (1), so the dry run is made once
//     per object and process, until someone writes the object.
//
// Secrets are the exception: the operator may write the tenants' Secrets but not read
// them (no get, list or watch outside its own namespace), so a Secret is applied at
// every check.

// driftedObjects returns the objects to apply at a drift check: those missing or no
// longer holding what the bundle sets, and for the log and the event each one's
// reference with the first field that differs ("missing" for a deleted one). An object
// that could not be read or dry-run is applied too, and logged, not reported as drift.
func (r *EvaTenantReconciler) driftedObjects(ctx context.Context, s *scope, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, []string) {
	t := s.tenant
	var apply []*unstructured.Unstructured
	var report []string
	for _, u := range objects {
		if isSecret(u) {
			apply = append(apply, u)
			continue
		}
		stampOwner(u, t)
		field, err := r.driftOf(ctx, t, u)
		switch {
		case err != nil:
			s.log.Error(err, "Drift check failed; applying", "object", refString(refOf(u)))
			apply = append(apply, u)
		case field != "":
			// The path can hold key names a tenant wrote (its Helm values).
			report = append(report, refString(refOf(u))+" ("+safetext.Limit(safetext.Escape(field), 200)+")")
			apply = append(apply, u)
		}
	}
	return apply, report
}

// driftOf returns "" when the object in the cluster holds what u sets, "missing" when
// there is none, or the first field that differs. A Job that exists has not drifted: it
// is one run, and its template cannot change (see applyObjects).
func (r *EvaTenantReconciler) driftOf(ctx context.Context, t *evav1.EvaTenant, u *unstructured.Unstructured) (string, error) {
	ref, hash := refOf(u), appliedHash(u)
	if rv := r.cachedVersion(ctx, u); rv != "" && r.memo.holds(t.UID, ref, rv, hash) {
		return "", nil // 1, without reading the object through its type
	}
	gvk := u.GroupVersionKind()
	desired, typed := drift.Canonical(r.Scheme(), gvk, u.Object)
	live, err := r.liveCopy(ctx, u, typed)
	if apierrors.IsNotFound(err) {
		return "missing", nil
	}
	if err != nil {
		return "", err
	}
	if gvk.Kind == "Job" && gvk.Group == "batch" {
		return "", nil
	}
	rv := driftVersion(gvk, &unstructured.Unstructured{Object: live}, false)
	if r.memo.holds(t.UID, ref, rv, hash) {
		return "", nil
	}
	if drift.Find(desired, live) == "" {
		r.memo.record(t.UID, ref, rv, hash)
		return "", nil
	}
	dry := u.DeepCopy()
	if err := r.Patch(ctx, dry, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
		return "", fmt.Errorf("dry-run apply: %w", err)
	}
	wouldBe := dry.Object
	if typed {
		wouldBe, _ = drift.AsRead(r.Scheme(), gvk, dry.Object)
	}
	if field := drift.Find(wouldBe, live); field != "" {
		return field, nil
	}
	r.memo.record(t.UID, ref, rv, hash)
	return "", nil
}

// cachedVersion returns the driftVersion of the informer cache's copy of the object u
// names (of its metadata alone for versionOnlyKinds), or "" when the kind has no Go
// type or the cache holds no copy: what the memo is checked against before anything
// costlier (most drift checks end there).
func (r *EvaTenantReconciler) cachedVersion(ctx context.Context, u *unstructured.Unstructured) string {
	var obj client.Object
	if gvk := u.GroupVersionKind(); versionOnlyKinds[gvk] {
		obj = metadataKey(gvk)
	} else {
		typed, err := r.Scheme().New(gvk)
		if err != nil {
			return ""
		}
		cobj, ok := typed.(client.Object)
		if !ok {
			return ""
		}
		obj = cobj
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, obj); err != nil {
		return ""
	}
	return driftVersion(u.GroupVersionKind(), obj, true)
}

// liveCopy reads the object u names, in its JSON form, through its kind's Go type when
// typed: from the informer cache (the kinds the operator has types for, cached by the
// capsule label, see CacheOptions), or from the API server for the kinds whose cache
// holds less than is applied (cachedWhole) and the kinds without a type.
func (r *EvaTenantReconciler) liveCopy(ctx context.Context, u *unstructured.Unstructured, typed bool) (map[string]any, error) {
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
	if !typed {
		other := &unstructured.Unstructured{}
		other.SetGroupVersionKind(u.GroupVersionKind())
		if err := r.APIReader.Get(ctx, key, other); err != nil {
			return nil, err
		}
		return other.Object, nil
	}
	obj, err := r.Scheme().New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	cobj, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object kind", u.GroupVersionKind())
	}
	var reader client.Reader = r.Client
	if !cachedWhole(u.GroupVersionKind()) {
		reader = r.APIReader
	}
	if err := reader.Get(ctx, key, cobj); err != nil {
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(cobj)
}

func isSecret(u *unstructured.Unstructured) bool {
	return u.GetKind() == "Secret" && u.GetAPIVersion() == "v1"
}

// appliedHash identifies what is applied of an object (its owner stamp included).
func appliedHash(u *unstructured.Unstructured) string {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return ""
	}
	return hashOf(b)
}

// hashOf is appliedHash of the object whose JSON is b.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return string(sum[:])
}

// applyMemo remembers, per tenant and object, the version (driftVersion) at which the
// object was last known to hold what is applied (right after the operator applied it, or when
// a check confirmed it) and a hash of what is applied: an object still at that version
// holds exactly that. It is only a shortcut: an empty memory after a restart costs a
// comparison, and a dry run where the API server added defaults.
type applyMemo struct {
	mu    sync.Mutex
	byUID map[types.UID]map[string]memoEntry
}

type memoEntry struct{ resourceVersion, hash string }

func (a *applyMemo) record(uid types.UID, ref evav1.ObjectRef, resourceVersion, hash string) {
	if resourceVersion == "" || hash == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byUID == nil {
		a.byUID = map[types.UID]map[string]memoEntry{}
	}
	if a.byUID[uid] == nil {
		a.byUID[uid] = map[string]memoEntry{}
	}
	a.byUID[uid][identity(ref)] = memoEntry{resourceVersion, hash}
}

func (a *applyMemo) holds(uid types.UID, ref evav1.ObjectRef, resourceVersion, hash string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.byUID[uid][identity(ref)]
	return ok && resourceVersion != "" && v == memoEntry{resourceVersion, hash}
}

// known says whether the memo has an entry for the object, whatever its version.
func (a *applyMemo) known(uid types.UID, ref evav1.ObjectRef) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.byUID[uid][identity(ref)]
	return ok
}

func (a *applyMemo) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byUID, uid)
}
