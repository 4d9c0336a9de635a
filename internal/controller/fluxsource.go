package controller

import (
	"context"
	"fmt"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/overlay"
)

// requestedAtAnnotation is Flux's "reconcile now" request (what `flux reconcile` sets).
const requestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"

// RequestReconcile asks Flux's source-controller to fetch a source now instead of at its
// next interval, the way `flux reconcile source` does: the tenant Kustomizations reading
// it follow as soon as the new revision is there.
func RequestReconcile(ctx context.Context, c client.Client, src overlay.SourceRef, now time.Time) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(sourcev1.GroupVersion.WithKind(src.Kind))
	u.SetNamespace(src.Namespace)
	u.SetName(src.Name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, requestedAtAnnotation, now.Format(time.RFC3339Nano))
	if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("requesting a reconcile of %s %s/%s: %w", src.Kind, src.Namespace, src.Name, err)
	}
	return nil
}
