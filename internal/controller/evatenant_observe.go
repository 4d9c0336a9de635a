package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/observe"
	"github.com/aidonow/eva/internal/tenant"
)

// observe reads the tenant's namespace, streams, releases, seed Job and Ingress (from
// the cache the watches fill) into the scope.
func (r *EvaTenantReconciler) observe(ctx context.Context, s *scope) error {
	t := s.tenant
	o := &s.observed
	o.Now, o.BlockedGrace = r.now(), r.BlockedGrace
	o.Generation = t.Generation
	o.SeedsVersion = t.Spec.SeedsVersion
	o.SeedAnnotation = t.Annotations[tenant.AnnotationSeedLoaded]
	if r.Fence != nil {
		o.FenceMismatch = r.Fence.Mismatch()
	}
	// Direct mode: ensureStreams observed JetStream itself.
	if err := observe.Objects(ctx, r, t.Spec.CapsuleCode, t.Spec.SeedsVersion, r.directMessaging(), o); err != nil {
		return err
	}
	// What each release must carry to be the tenant's current spec.
	rendered := map[string]string{}
	if s.bundle != nil {
		rendered = s.bundle.ReleaseSpecDigests()
	}
	return r.applier().observeModules(ctx, s, rendered)
}

// get reads an object; not found is (false, nil).
func (r *EvaTenantReconciler) get(ctx context.Context, key types.NamespacedName, obj client.Object) (bool, error) {
	return observe.Get(ctx, r, key, obj)
}
