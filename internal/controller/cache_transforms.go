package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
