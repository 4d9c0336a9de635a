package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// ChartPull copies the chart registry's pull credentials (the environment's
// chartSource.pullSecret, a kubernetes.io/dockerconfigjson Secret of the operator's
// namespace) into every tenant namespace as tenant.ChartPullSecret, which the tenant's
// chart sources reference: under Flux's lockdown a source reads Secrets of its own
// namespace only, and the credentials never enter the published tree. It reconciles
// the tenant namespaces the manager caches (those with the capsule label, of its
// shard), whoever made them: the operator in pure-cluster mode, or Flux applying a tree
// evactl or the operator published. Each namespace is looked at again every resync
// interval, which is how soon rotated credentials reach it.
type ChartPull struct {
	client.Client
	// Reader reads the source Secret from the API server (Secrets are not cached).
	Reader client.Reader
	// Namespace and Name locate the source Secret.
	Namespace, Name string
	// Recorder receives an event on the namespace when the copy cannot be made.
	Recorder events.EventRecorder
	// Resync is how often each namespace is looked at again; zero is ResyncActive.
	Resync time.Duration
}

// SetupWithManager registers the copier for the cached tenant namespaces.
func (p *ChartPull) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("chartpull").For(&corev1.Namespace{}).Complete(p)
}

// Reconcile copies the pull secret into one tenant namespace. A missing or mistyped
// source is an event on the namespace and a retry.
func (p *ChartPull) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	resync := p.Resync
	if resync == 0 {
		resync = ResyncActive
	}
	var ns corev1.Namespace
	if err := p.Get(ctx, req.NamespacedName, &ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	code := ns.Labels[tenant.LabelCapsule]
	if code == "" || ns.Name != tenant.Namespace(code) || !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	data, err := p.credentials(ctx)
	if err != nil {
		p.Recorder.Eventf(&ns, nil, corev1.EventTypeWarning, status.EventChartPullSecret, "CopyPullSecret", "%v", err)
		return ctrl.Result{RequeueAfter: pullSecretRetry}, nil
	}
	copy := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: tenant.ChartPullSecret, Namespace: ns.Name,
			Labels: map[string]string{tenant.LabelCapsule: code}},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
	if err := p.Patch(ctx, copy, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		p.Recorder.Eventf(&ns, nil, corev1.EventTypeWarning, status.EventChartPullSecret, "CopyPullSecret", "writing %s/%s: %v", ns.Name, copy.Name, err)
		return ctrl.Result{}, fmt.Errorf("copying the chart pull secret into %s: %w", ns.Name, err)
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// pullSecretRetry is how soon a namespace whose copy could not be made is looked at
// again: a missing Secret waits for a person, so each retry's event is not noise.
const pullSecretRetry = time.Minute

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
