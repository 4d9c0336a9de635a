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
	"github.com/aidonow/eva/internal/testenv"
)

// operatorNamespace is where the operator runs and accepts EvaTenants (base/manager).
const operatorNamespace = "eva-system"

// startOperator runs the eva-operator binary (pure-cluster mode unless extraArgs say
// otherwise) as its deployed service account, so it works with exactly the RBAC and
// admission policy of base/.
func startOperator(t *testing.T, extraArgs ...string) *testenv.Process {
	t.Helper()
	kubeconfig, err := cluster.KubeConfigAs(testenv.OperatorServiceAccount,
		"system:serviceaccounts", "system:serviceaccounts:eva-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--overlays=overlays", "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, extraArgs...)
	return testenv.StartOperator(t, kubeconfig, []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=" + operatorNamespace}, args...)
}

func evaTenant(code, tier string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eva.aidonow.com/v1alpha1", "kind": "EvaTenant",
		"metadata": map[string]any{"namespace": operatorNamespace, "name": strings.ToLower(code)},
		"spec":     map[string]any{"capsuleCode": code, "tier": tier, "seedsVersion": "seeds-1"},
	}}
	return u
}

func conditionsOf(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, item := range raw {
		m, _ := item.(map[string]any)
		out[fmt.Sprint(m["type"])] = fmt.Sprint(m["status"]) + " " + fmt.Sprint(m["reason"])
	}
	return out
}

// TestOperatorPureClusterToActiveAndDecommission runs the operator binary on the real
// cluster: a Starter tenant reaches Active with its releases installed by the real
// helm-controller (impersonating the tenant's deployer account), its seed Job completed
// on a kwok node and its streams in JetStream; `kubectl wait --for=condition=Ready`
// succeeds; deleting it runs the saga and kube-controller-manager really deletes the
// namespace before the finalizer goes.
func TestOperatorPureClusterToActiveAndDecommission(t *testing.T) {
	ctx := context.Background()
	startOperator(t)
	tn := evaTenant("PURECL", "Starter")
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	wait := exec.Command("kubectl", "--kubeconfig", cluster.KubeConfig, "wait", "--for=condition=Ready",
		"evatenant/purecl", "-n", operatorNamespace, "--timeout=4m")
	out, err := wait.CombinedOutput()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tn.GroupVersionKind())
	_ = cluster.Client.Get(ctx, client.ObjectKeyFromObject(tn), got)
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %v\nhelm-controller: %s", err, out, conditionsOf(got), cluster.Logs("helm-controller", 2000))
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Active" {
		t.Fatalf("phase %q, conditions %v", phase, conditionsOf(got))
	}
	for _, ct := range []string{"NamespaceReady", "Provisioned", "SeedLoaded", "ModulesDeployed", "IngressReady", "Ready"} {
		if c := conditionsOf(got)[ct]; !strings.HasPrefix(c, "True") {
			t.Errorf("%s: %s", ct, c)
		}
	}
	for _, stream := range []string{tenant.EventsStream("PURECL"), tenant.CommandsStream("PURECL")} {
		if ok, err := jetstream.Exists(ctx, stream); err != nil || !ok {
			t.Errorf("stream %s in JetStream: %v %v", stream, ok, err)
		}
	}

	if err := cluster.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	poll(t, "tenant and namespace gone", 3*time.Minute, func() error {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tn), got.DeepCopy())
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("tenant still there (%v): %v", err, conditionsOf(got))
		}
		var ns corev1.Namespace
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: tenant.Namespace("PURECL")}, &ns); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there: %v (phase %s)", err, ns.Status.Phase)
		}
		return nil
	})
	for _, stream := range []string{tenant.EventsStream("PURECL"), tenant.CommandsStream("PURECL")} {
		if ok, _ := jetstream.Exists(ctx, stream); ok {
			t.Errorf("stream %s still in JetStream after decommission", stream)
		}
	}
}
