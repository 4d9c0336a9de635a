package controller

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// TestChartPullSecretReachesTheTenantNamespace: with chartSource.pullSecret, the
// operator copies the registry's credentials from its own namespace into the tenant's
// namespace as eva-chart-pull, which each of the tenant's chart sources references, and
// copies them again when they rotate. As the operator's account, the fence admits that copy
// and refuses any other registry credential it might write.
func TestChartPullSecretReachesTheTenantNamespace(t *testing.T) {
	ctx := context.Background()
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: claimsNamespace, Name: "registry-pull"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"r.example.com":{"auth":"dTpw"}}}`)}}
	if err := k8s.Create(ctx, source); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), source) })
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		env := *r.Renderer.Env
		env.Settings.ChartSource.URL, env.Settings.ChartSource.Namespace = "oci://r.example.com/eva/charts", ""
		env.Settings.ChartSource.Kind, env.Settings.ChartSource.PullSecret = "OCIRepository", source.Name
		r.Renderer.Env = &env
		pull := &ChartPull{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: claimsNamespace, Name: source.Name,
			Recorder: mgr.GetEventRecorder("eva-operator"), Resync: 2 * time.Second}
		if err := pull.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	})
	tn := newTenant(newTestNamespace(t), "PULLSC", evav1.TierStarter)
	createTenant(t, tn)
	ns := tenant.Namespace(tn.Spec.CapsuleCode)
	copied := func(want []byte) func() error {
		return func() error {
			var got corev1.Secret
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: tenant.ChartPullSecret}, &got); err != nil {
				return err
			}
			if got.Type != corev1.SecretTypeDockerConfigJson || !bytes.Equal(got.Data[corev1.DockerConfigJsonKey], want) {
				return fmt.Errorf("the copy holds %s %q", got.Type, got.Data[corev1.DockerConfigJsonKey])
			}
			return nil
		}
	}
	eventually(t, waitFor, "the pull secret copied", copied(source.Data[corev1.DockerConfigJsonKey]))
	eventually(t, waitFor, "the chart sources reference it", func() error {
		var sources sourcev1.OCIRepositoryList
		if err := k8s.List(ctx, &sources, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(sources.Items) == 0 {
			return fmt.Errorf("no OCIRepository in %s", ns)
		}
		for _, s := range sources.Items {
			if s.Spec.SecretRef == nil || s.Spec.SecretRef.Name != tenant.ChartPullSecret {
				return fmt.Errorf("%s references %v", s.Name, s.Spec.SecretRef)
			}
		}
		return nil
	})

	rotated := []byte(`{"auths":{"r.example.com":{"auth":"dTpx"}}}`)
	source.Data[corev1.DockerConfigJsonKey] = rotated
	if err := k8s.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	// The namespace's next look (every resync interval) copies the new credentials.
	eventually(t, waitFor, "the rotated pull secret copied", copied(rotated))

	op := asOperator(t)
	again := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.ChartPullSecret},
		Type:       corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: rotated}}
	if err := op.Patch(ctx, again, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
		t.Fatalf("the operator's copy, as the operator: %v", err)
	}
	other := &corev1.Secret{TypeMeta: again.TypeMeta, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-registry"},
		Type: again.Type, Data: again.Data}
	err := op.Patch(ctx, other, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "eva-chart-pull") {
		t.Fatalf("another registry credential, as the operator: %v", err)
	}
}
