package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
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
