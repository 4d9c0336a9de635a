package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

// helmReleaseStorage is the type of the Secrets Helm keeps each release in.
const helmReleaseStorage = "helm.sh/release.v1"

// assertDecommissionUninstalls takes the published tenant of code (its file in tenants,
// delivered to the cluster c reaches) through the removal docs/tenants.md describes,
// with publish publishing the folder: spec.lifecycle Decommissioned published, then
// helm-controller has uninstalled every release (no HelmRelease, Deployment or Helm
// release storage left in the namespace) while the namespace and its deployer account
// stay; then the file deleted and published, and the namespace and the tenant's Flux
// Kustomizations are gone.
func assertDecommissionUninstalls(t *testing.T, c client.Client, tenants, code string, publish func(what string)) {
	t.Helper()
	ctx := context.Background()
	ns := tenant.Namespace(code)
	file := filepath.Join(tenants, code+".yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	decommissioned := strings.Replace(string(data), "lifecycle: Active", "lifecycle: Decommissioned", 1)
	if decommissioned == string(data) {
		t.Fatalf("%s: no lifecycle: Active to change", file)
	}
	if err := os.WriteFile(file, []byte(decommissioned), 0o644); err != nil {
		t.Fatal(err)
	}
	publish(code + " decommissioned")
	poll(t, code+"'s releases uninstalled by helm-controller", 4*time.Minute, func() error {
		return leftOfReleases(ctx, c, code)
	})
	var account corev1.ServiceAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: render.DeployerName}, &account); err != nil {
		t.Fatalf("the deployer account of a decommissioned tenant: %v", err)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	publish(code + " removed")
	poll(t, code+"'s namespace and Flux objects gone", 4*time.Minute, func() error {
		var namespace corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &namespace); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %s, %v", ns, namespace.Status.Phase, err)
		}
		for _, name := range []string{render.FoundationName(code), render.WorkloadsName(code)} {
			ks := &unstructured.Unstructured{}
			ks.SetGroupVersionKind(kustomizationGVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: name}, ks); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Kustomization flux-system/%s still there (%v)", name, err)
			}
		}
		return nil
	})
}

// leftOfReleases names what of code's module releases is still in the cluster c reaches: its
// HelmReleases, the Deployments they installed, and Helm's release storage.
func leftOfReleases(ctx context.Context, c client.Client, code string) error {
	ns := tenant.Namespace(code)
	releases := &unstructured.UnstructuredList{}
	releases.SetGroupVersionKind(helmReleaseGVK)
	if err := c.List(ctx, releases, client.MatchingLabels{tenant.LabelCapsule: code}); err != nil {
		return err
	}
	var left []string
	for _, r := range releases.Items {
		left = append(left, "HelmRelease "+r.GetNamespace()+"/"+r.GetName())
	}
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, d := range deployments.Items {
		left = append(left, "Deployment "+d.Name)
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, s := range secrets.Items {
		if s.Type == helmReleaseStorage {
			left = append(left, "Helm release storage "+s.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left in the cluster: %s", strings.Join(left, ", "))
	}
	return nil
}
