package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// observe reads the tenant's namespace, streams, releases, seed Job and Ingress (from
// the cache the watches fill) into the scope.
func (r *EvaTenantReconciler) observe(ctx context.Context, s *scope) error {
	t := s.tenant
	code := t.Spec.CapsuleCode
	ns := tenant.Namespace(code)
	o := &s.observed
	o.Now, o.BlockedGrace = r.now(), r.BlockedGrace
	o.Generation = t.Generation
	o.SeedsVersion = t.Spec.SeedsVersion
	o.SeedAnnotation = t.Annotations[tenant.AnnotationSeedLoaded]

	var namespace corev1.Namespace
	found, err := r.get(ctx, types.NamespacedName{Name: ns}, &namespace)
	if err != nil {
		return err
	}
	if found {
		o.Namespace = &status.NamespaceState{Name: ns, Phase: string(namespace.Status.Phase)}
		if namespace.DeletionTimestamp != nil {
			o.Namespace.Phase = string(corev1.NamespaceTerminating)
		}
	} else {
		o.Applied.Missing = append(o.Applied.Missing, "Namespace/"+ns)
	}

	for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if r.Streams != nil {
			break // direct mode: ensureStreams observed JetStream itself
		}
		name := tenant.StreamObjectName(stream)
		var st nackv1beta2.Stream
		found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &st)
		if err != nil {
			return err
		}
		o.Streams = append(o.Streams, status.StreamState{Name: ns + "/" + name, Found: found,
			Ready: apimeta.FindStatusCondition(st.Status.Conditions, "Ready")})
	}

	// What each release must carry to be the tenant's current spec.
	rendered := map[string]string{}
	if s.bundle != nil {
		rendered = s.bundle.ReleaseSpecDigests()
	}
	if err := r.applier().observeModules(ctx, s, rendered); err != nil {
		return err
	}

	if t.Spec.SeedsVersion != "" {
		name := render.SeedJobName(t.Spec.SeedsVersion)
		var job batchv1.Job
		found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &job)
		if err != nil {
			return err
		}
		if found {
			js := &status.JobState{Name: ns + "/" + name}
			for _, c := range job.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					continue
				}
				switch c.Type {
				case batchv1.JobComplete:
					js.Complete = true
				case batchv1.JobFailed:
					js.Failed, js.Message = true, fmt.Sprintf("%s: %s", c.Reason, c.Message)
				}
			}
			o.SeedJob = js
		}
	}

	var ing networkingv1.Ingress
	name := tenant.IngressName(code)
	if found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ing); err != nil {
		return err
	} else if found {
		o.Ingress = &status.IngressState{Name: ns + "/" + name, Addresses: len(ing.Status.LoadBalancer.Ingress)}
	}
	return nil
}

// get reads an object; not found is (false, nil).
func (r *EvaTenantReconciler) get(ctx context.Context, key types.NamespacedName, obj client.Object) (bool, error) {
	err := r.Get(ctx, key, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
}
