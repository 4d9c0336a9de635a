package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/tenant"
)

// TestOperatorGitOpsModeThroughRealFlux runs the operator binary in GitOps mode: it
// commits the tenant to the fleet repository, the real Flux controllers fetch, apply and
// install it, and the operator reads Flux's Kustomization back: the tenant reaches
// Active and `kubectl wait --for=condition=Ready` succeeds. Deleting it publishes the
// decommissioned bundle, then removes the tenant from the tree, and Flux prunes the
// namespace before the finalizer goes.
func TestOperatorGitOpsModeThroughRealFlux(t *testing.T) {
	ctx := context.Background()
	startOperator(t, "--publish=git", "--git-url="+gitSrv.URL+"/"+fleetRepo, "--git-branch=main", "--git-cache="+t.TempDir())

	tn := evaTenant("GITOPS", "Customer")
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tn.GroupVersionKind())
	wait := exec.Command("kubectl", "--kubeconfig", cluster.KubeConfig, "wait", "--for=condition=Ready",
		"evatenant/gitops", "-n", operatorNamespace, "--timeout=5m")
	out, err := wait.CombinedOutput()
	_ = cluster.Client.Get(ctx, client.ObjectKeyFromObject(tn), got)
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %v\nkustomize-controller: %s", err, out, conditionsOf(got),
			cluster.Logs("kustomize-controller", 3000))
	}
	revision, _, _ := unstructured.NestedString(got.Object, "status", "revision")
	if !strings.HasPrefix(revision, "main@sha1:") && len(revision) < 40 {
		t.Errorf("status.revision %q is not a published commit", revision)
	}

	if err := cluster.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	poll(t, "tenant and namespace gone", 4*time.Minute, func() error {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tn), got)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("tenant still there (%v): %v", err, conditionsOf(got))
		}
		var ns corev1.Namespace
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: tenant.Namespace("GITOPS")}, &ns); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there: %v (phase %s)", err, ns.Status.Phase)
		}
		return nil
	})
}
