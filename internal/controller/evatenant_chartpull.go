package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// ChartPull copies the chart registry's pull credentials (the environment's
// chartSource.pullSecret, a kubernetes.io/dockerconfigjson Secret of the operator's
// namespace) into each Active tenant's namespace as tenant.ChartPullSecret, which the
// tenant's chart sources reference: under Flux's lockdown a source reads Secrets of its
// own namespace only, and the credentials never enter the published tree. The copy is
// written again when the credentials change (looked at on every reconcile) or a
// resync interval has passed; the namespace's deletion removes it.
type ChartPull struct {
	// Reader reads the source Secret from the API server (Secrets are not cached).
	Reader client.Reader
	// Namespace and Name locate the source Secret.
	Namespace, Name string

	copied sync.Map // types.UID → copiedPullSecret
}

// copiedPullSecret is what was last copied into a tenant's namespace, and when.
type copiedPullSecret struct {
	digest string
	at     time.Time
}

// chartPullPhase copies the pull secret into the tenant's namespace. A namespace not
// there yet (Flux has not applied the foundation) is left for the reconcile its creation
// starts; a missing or mistyped source is an event on the tenant and a retry.
func (r *EvaTenantReconciler) chartPullPhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	p := r.ChartPull
	if p == nil || s.tenant.Spec.LifecycleOrDefault() != evav1.LifecycleActive {
		return ctrl.Result{}, nil
	}
	data, err := p.credentials(ctx)
	if err != nil {
		s.event(corev1.EventTypeWarning, status.EventChartPullSecret, "%v", err)
		return ctrl.Result{RequeueAfter: QuotaRetry}, nil
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if prev, ok := p.copied.Load(s.tenant.UID); ok {
		if c := prev.(copiedPullSecret); c.digest == digest && r.now().Sub(c.at) < r.resyncActive() {
			return ctrl.Result{}, nil
		}
	}
	code := s.tenant.Spec.CapsuleCode
	copy := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: tenant.ChartPullSecret, Namespace: tenant.Namespace(code),
			Labels: map[string]string{tenant.LabelCapsule: code}},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
	if err := r.Patch(ctx, copy, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		s.event(corev1.EventTypeWarning, status.EventChartPullSecret, "writing %s/%s: %v", copy.Namespace, copy.Name, err)
		return ctrl.Result{}, fmt.Errorf("copying the chart pull secret into %s: %w", copy.Namespace, err)
	}
	p.copied.Store(s.tenant.UID, copiedPullSecret{digest: digest, at: r.now()})
	return ctrl.Result{}, nil
}

// credentials reads the source Secret's .dockerconfigjson.
func (p *ChartPull) credentials(ctx context.Context) ([]byte, error) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	var src corev1.Secret
	if err := p.Reader.Get(ctx, key, &src); err != nil {
		return nil, fmt.Errorf("reading the chart registry's pull secret %s (chartSource.pullSecret): %w", key, err)
	}
	data, ok := src.Data[corev1.DockerConfigJsonKey]
	if src.Type != corev1.SecretTypeDockerConfigJson || !ok {
		return nil, fmt.Errorf("the chart registry's pull secret %s (chartSource.pullSecret) is of type %q: want %s with a %s key",
			key, src.Type, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey)
	}
	return data, nil
}
