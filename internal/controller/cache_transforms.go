package controller

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/tenant"
)

// The operator's memory grows with the objects its informers hold, one set per tenant.
// These transforms drop, before an object is cached, the parts of it nothing reads
// (managed fields are dropped from every kind, see CacheOptions).

// slimJob keeps of a Job what the operator reads: its metadata and status (SeedLoaded,
// and whether it exists). A Job's template is immutable, so applyObjects never applies
// an existing Job again and the drift check does not compare one (driftOf): the pod
// template, most of a Job, is not kept.
func slimJob() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		if job, ok := obj.(*batchv1.Job); ok {
			job.Spec = batchv1.JobSpec{}
		}
		return strip(obj)
	}
}

// slimResourceQuota keeps of a ResourceQuota its spec (the drift check compares it) and
// the limits the quota controller enforces (status.hard, which wakes the tenant when it
// changes); status.used, rewritten at every change in the namespace, is never read from
// the cache (quotaEnforced reads the API server).
func slimResourceQuota() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		if rq, ok := obj.(*corev1.ResourceQuota); ok {
			rq.Status.Used = nil
		}
		return strip(obj)
	}
}

// versionOnlyKinds are the kinds of a tenant's objects that only the drift check reads
// and, but for edits by hand, only Eva writes (a write by another, such as
// prometheus-operator's optional status of a PrometheusRule, costs one read at the next
// check): no watch maps them to a tenant, and nothing reads their status.
// They are cached as metadata (metav1.PartialObjectMetadata), and of that only what
// names the object and its resourceVersion (versionOnly): the drift check asks the cache
// whether an object is still at the version its memo holds, and reads the object from
// the API server only when it is not (an edit, or the first check after a restart).
// Their specs, most of what a typed cache would hold, are not kept.
var versionOnlyKinds = map[schema.GroupVersionKind]bool{
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"):      true,
	corev1.SchemeGroupVersion.WithKind("LimitRange"):          true,
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):         true,
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"): true,
	monitoringv1.GroupVersion.WithKind("PrometheusRule"):      true,
}

// metadataKey is the cache's key for the metadata of objects of kind gvk.
func metadataKey(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// versionOnly keeps of an object's metadata its name, namespace, UID, resourceVersion
// and deletion timestamp: labels, annotations and owner references are read, when they
// are, from the API server. A typed copy of such a kind (which a typed read would cache
// beside the metadata, with this transform) loses its managed fields, as every kind's.
func versionOnly() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
				ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}
			return m, nil
		}
		return strip(obj)
	}
}

// statusKinds are the kinds of a tenant's objects whose status the operator reads from
// the cache (the tenant's readiness) and whose spec only the drift check reads. Their
// cache copy is cut to what is read (statusOnly); the drift check reads one from the API
// server when its driftVersion is not the one its memo holds. Other controllers write
// their status (helm-controller, NACK, the ingress controller) again and again; their
// driftVersion leaves those writes out, so they cost no read.
var statusKinds = map[schema.GroupVersionKind]bool{
	helmv2.GroupVersion.WithKind("HelmRelease"):         true,
	nackv1beta2.GroupVersion.WithKind("Stream"):         true,
	networkingv1.SchemeGroupVersion.WithKind("Ingress"): true,
}

// cachedWhole says whether the cache's copy of an object of kind gvk holds all that Eva
// applies to it, so that the drift check can compare it; otherwise the check reads the
// object from the API server.
func cachedWhole(gvk schema.GroupVersionKind) bool {
	return !versionOnlyKinds[gvk] && !statusKinds[gvk]
}

// statusOnly keeps of the statusKinds what the operator reads from the cache: their
// status (of a HelmRelease's, neither the inventory of the release's objects nor its
// history before the latest release and that release's test hooks), and of their
// metadata what identifies them and what is read (keepReadMetadata); of a HelmRelease
// also its install and upgrade settings, which its remediation status is judged against,
// and the annotations that say whose it is and which spec it holds.
func statusOnly() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *helmv2.HelmRelease:
			o.Spec = helmv2.HelmReleaseSpec{Install: o.Spec.Install, Upgrade: o.Spec.Upgrade}
			if latest := o.Status.History.Latest(); latest != nil {
				latest.TestHooks = nil
				o.Status.History = helmv2.Snapshots{latest}
			}
			o.Status.Inventory = nil // the release's objects, one reference each
			keepReadMetadata(&o.ObjectMeta, tenant.AnnotationOwnerUID, tenant.AnnotationSpecDigest)
		case *nackv1beta2.Stream:
			o.Spec = nackv1beta2.StreamSpec{}
			keepReadMetadata(&o.ObjectMeta)
		case *networkingv1.Ingress:
			o.Spec = networkingv1.IngressSpec{}
			keepReadMetadata(&o.ObjectMeta)
		}
		return strip(obj)
	}
}

// keepReadMetadata cuts a tenant's object's metadata, in place, to what the operator
// reads from the cache: its identity, versions and deletion, the capsule label (which
// maps the object's changes to its tenant), the annotations named, and the digest of
// the labels and annotations it had (annotationMetadataDigest, see driftVersion).
func keepReadMetadata(m *metav1.ObjectMeta, annotations ...string) {
	digest, done := m.Annotations[annotationMetadataDigest]
	if !done {
		digest = metadataDigest(m.Labels, m.Annotations)
	}
	defer func() {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[annotationMetadataDigest] = digest
	}()
	*m = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp, Labels: m.Labels, Annotations: m.Annotations}
	maps.DeleteFunc(m.Labels, func(key, _ string) bool { return key != tenant.LabelCapsule })
	maps.DeleteFunc(m.Annotations, func(key, _ string) bool { return !slices.Contains(annotations, key) })
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
}

// annotationMetadataDigest is an annotation of the cache's copies of the statusKinds
// alone, set by statusOnly and never written to the API server: the digest of the
// labels and annotations the object had before they were cut (metadataDigest). Its key
// ends in a token drawn at random when the process starts, which no object in the
// cluster can carry, so a copy with it has been through the transform already: client-go
// transforms the objects of a streamed initial list twice (the reflector's watchList
// store, then the queue's Replace), and the second pass must keep the first's digest,
// not take one of the labels it cut (TestStatusKindsReadOnceAfterRestart).
var annotationMetadataDigest = "eva.aidonow.com/cached-metadata-digest-" + strings.ToLower(rand.Text())

// metadataDigest is a digest of an object's labels and annotations. Each key and value
// goes in with its length before it: an annotation's value may hold any byte, so no
// separator could tell one set of annotations from another that spells the same bytes.
func metadataDigest(labels, annotations map[string]string) string {
	h := sha256.New()
	field := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	for _, m := range []map[string]string{labels, annotations} {
		h.Write(binary.AppendUvarint(nil, uint64(len(m))))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			field(k)
			field(m[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// driftVersion is what the memo holds of an object, and the drift check asks of the
// cache's copy: its resourceVersion, which changes with every write. For the
// statusKinds, whose status other controllers write again and again, a version that
// changes only when what Eva applies can have changed: the object's UID (deleted and
// created again), its generation (the spec: their status is a subresource, so the
// status writes leave it), its labels and annotations, and whether it is being deleted.
// The cache's copy (cached true) carries the digest of its labels and annotations
// (keepReadMetadata); an object read or applied whole has them all.
func driftVersion(gvk schema.GroupVersionKind, obj metav1.Object, cached bool) string {
	if !statusKinds[gvk] {
		return obj.GetResourceVersion()
	}
	digest := metadataDigest(obj.GetLabels(), obj.GetAnnotations())
	if cached {
		digest = obj.GetAnnotations()[annotationMetadataDigest]
	}
	if digest == "" || obj.GetUID() == "" {
		return ""
	}
	return fmt.Sprintf("%s/%d/%t/%s", obj.GetUID(), obj.GetGeneration(), obj.GetDeletionTimestamp() != nil, digest)
}

// unservedTenant keeps of an EvaTenant in a namespace the operator does not serve what
// it reads of one: whether it is this operator version's and holds Eva's finalizer
// (ignoreOutsideNamespaces warns only about a tenant nobody took up), its code, tier and
// phase (the tenant metrics), and the platform's labels. Its spec (values up to the
// API server's object size), status and every other label and annotation are dropped:
// a requester in a namespace this operator does not serve must not grow its memory.
func unservedTenant() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		t, ok := obj.(*evav1.EvaTenant)
		if !ok {
			return strip(obj)
		}
		slim := &evav1.EvaTenant{TypeMeta: t.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Name: t.Name, Namespace: t.Namespace, UID: t.UID, ResourceVersion: t.ResourceVersion,
			Generation: t.Generation, CreationTimestamp: t.CreationTimestamp, DeletionTimestamp: t.DeletionTimestamp,
		}}
		for k, v := range t.Labels {
			if tenant.PlatformKey(k) {
				if slim.Labels == nil {
					slim.Labels = map[string]string{}
				}
				slim.Labels[k] = v
			}
		}
		if v, ok := t.Annotations[tenant.AnnotationOperatorVersion]; ok && len(v) <= 64 {
			slim.Annotations = map[string]string{tenant.AnnotationOperatorVersion: v}
		}
		if slices.Contains(t.Finalizers, tenant.Finalizer) {
			slim.Finalizers = []string{tenant.Finalizer}
		}
		slim.Spec.CapsuleCode, slim.Spec.Tier, slim.Spec.OperatorVersion = t.Spec.CapsuleCode, t.Spec.Tier, t.Spec.OperatorVersion
		slim.Status.Phase = t.Status.Phase
		return slim, nil
	}
}
