package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// operatorNamespace is where the operator runs (base/manager) and holds the capsule
// code claims.
const operatorNamespace = "eva-system"

// startOperator runs the eva-operator binary (pure-cluster mode unless extraArgs say
// otherwise) as its deployed service account, so it works with exactly the RBAC and
// admission policy of base/, accepting EvaTenants from tenantNS only.
func startOperator(t *testing.T, tenantNS string, extraArgs ...string) *testenv.Process {
	t.Helper()
	kubeconfig, err := cluster.KubeConfigAs(testenv.OperatorServiceAccount,
		"system:serviceaccounts", "system:serviceaccounts:eva-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--overlays=" + overlays, "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--tenant-namespaces=" + tenantNS, "--published-charts=" + filepath.Join(chartsDir, chartrepo.LockFile)}, extraArgs...)
	return testenv.StartOperator(t, kubeconfig, []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=" + operatorNamespace}, args...)
}

// evaTenant is a tenant as a user writes it: code, tier, seed data.
func evaTenant(ns, code string, tier evav1.Tier) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eva.aidonow.com/v1alpha1", "kind": "EvaTenant",
		"metadata": map[string]any{"namespace": ns, "name": strings.ToLower(code)},
		"spec":     map[string]any{"capsuleCode": code, "tier": string(tier), "seedsVersion": "seeds-1"},
	}}
}

// provisionEveryTier creates one tenant per tier (everyTier) as a user does, each
// changed by edits first, waits with `kubectl wait --for=condition=Ready` and checks each
// is Active (assertActive).
func provisionEveryTier(t *testing.T, ns, prefix string, timeout time.Duration, edits ...func(*unstructured.Unstructured)) []*unstructured.Unstructured {
	t.Helper()
	tenants := everyTier(ns, prefix)
	for _, tn := range tenants {
		for _, edit := range edits {
			edit(tn)
		}
		if err := cluster.Client.Create(context.Background(), tn); err != nil {
			t.Fatal(err)
		}
	}
	kubectlWaitReady(t, timeout, tenants...)
	for _, tn := range tenants {
		assertActive(t, tn)
	}
	return tenants
}

// everyTier is one tenant per tier, codes prefix+the tier's first three letters.
func everyTier(ns, prefix string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, tier := range evav1.Tiers {
		out = append(out, evaTenant(ns, prefix+strings.ToUpper(string(tier)[:3]), tier))
	}
	return out
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

func codeOf(u *unstructured.Unstructured) string {
	code, _, _ := unstructured.NestedString(u.Object, "spec", "capsuleCode")
	return code
}

func tierOf(u *unstructured.Unstructured) evav1.Tier {
	tier, _, _ := unstructured.NestedString(u.Object, "spec", "tier")
	return evav1.Tier(tier)
}

// current reads a tenant from the API server.
func current(ctx context.Context, tn *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tn.GroupVersionKind())
	err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tn), got)
	return got, err
}

// kubectlWaitReady is what a user runs after `kubectl apply`: it must succeed for every
// tenant within timeout.
func kubectlWaitReady(t *testing.T, timeout time.Duration, tenants ...*unstructured.Unstructured) {
	t.Helper()
	timeout = within(t, timeout)
	args := []string{"--kubeconfig", cluster.KubeConfig, "wait", "--for=condition=Ready", "-n", tenants[0].GetNamespace(),
		"--timeout=" + timeout.String()}
	for _, tn := range tenants {
		args = append(args, "evatenant/"+tn.GetName())
	}
	out, err := exec.Command("kubectl", args...).CombinedOutput()
	if err == nil {
		return
	}
	// The tenants that are not Ready, on the first line: the run report keeps it.
	var states []string
	for _, tn := range tenants {
		got, gerr := current(context.Background(), tn)
		switch {
		case gerr != nil:
			states = append(states, fmt.Sprintf("%s: %v", tn.GetName(), gerr))
		case !strings.HasPrefix(conditionsOf(got)["Ready"], "True"):
			states = append(states, fmt.Sprintf("%s: %v", tn.GetName(), conditionsOf(got)))
		}
	}
	fatalf(t, "kubectl wait: %v: %d of %d tenant(s) not Ready: %s\n%s\nhelm-controller: %s\nkustomize-controller: %s",
		err, len(states), len(tenants), strings.Join(states, "; "), out,
		cluster.Logs("helm-controller", 2000), cluster.Logs("kustomize-controller", 2000))
}

// assertActive checks what an Active tenant means on the real cluster: every condition
// True, exactly one namespace, both streams in JetStream, one Ready HelmRelease per
// module of its tier, and each module's Deployment Available on a kwok node.
func assertActive(t *testing.T, tn *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	got, err := current(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	code, tier := codeOf(got), tierOf(got)
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Active" {
		t.Errorf("%s: phase %q, conditions %v", code, phase, conditionsOf(got))
	}
	for _, ct := range []string{"NamespaceReady", "Provisioned", "SeedLoaded", "ModulesDeployed", "IngressReady", "Ready"} {
		if c := conditionsOf(got)[ct]; !strings.HasPrefix(c, "True") {
			t.Errorf("%s: %s: %s", code, ct, c)
		}
	}
	var namespaces corev1.NamespaceList
	if err := cluster.Client.List(ctx, &namespaces, client.MatchingLabels{tenant.LabelCapsule: code}); err != nil {
		t.Fatal(err)
	}
	if len(namespaces.Items) != 1 || namespaces.Items[0].Name != tenant.Namespace(code) {
		t.Errorf("%s: %d namespaces with its label, want exactly %s", code, len(namespaces.Items), tenant.Namespace(code))
	}
	for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if ok, err := jetstream.Exists(ctx, stream); err != nil || !ok {
			t.Errorf("%s: stream %s in JetStream: %v %v", code, stream, ok, err)
		}
	}
	modules := tenant.DefaultCatalog().ModulesOf(tier)
	if err := allReady(ctx, helmReleaseGVK, len(modules), client.InNamespace(tenant.Namespace(code))); err != nil {
		t.Errorf("%s (%s): %v", code, tier, err)
	}
	var deployments appsv1.DeploymentList
	if err := cluster.Client.List(ctx, &deployments, client.InNamespace(tenant.Namespace(code))); err != nil {
		t.Fatal(err)
	}
	available := 0
	for _, d := range deployments.Items {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				available++
			}
		}
	}
	if available != len(modules) {
		t.Errorf("%s: %d of %d Deployments Available, want one per module (%d)", code, available, len(deployments.Items), len(modules))
	}
}

// deleteAndWaitGone deletes tenants as a user does and waits until each tenant object
// and its namespace are really gone (kube-controller-manager emptied and removed it) and
// its streams left JetStream.
func deleteAndWaitGone(t *testing.T, timeout time.Duration, tenants ...*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, tn := range tenants {
		if err := cluster.Client.Delete(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, timeout, tenants...)
}

// waitGone waits until each tenant object and its namespace are really gone and its
// streams left JetStream.
func waitGone(t *testing.T, timeout time.Duration, tenants ...*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, tn := range tenants {
		code := codeOf(tn)
		poll(t, code+": tenant, namespace and streams gone", timeout, func() error {
			var ns corev1.Namespace
			nsErr := cluster.Client.Get(ctx, client.ObjectKey{Name: tenant.Namespace(code)}, &ns)
			var why []string // the namespace controller says what holds it
			for _, c := range ns.Status.Conditions {
				if c.Status == corev1.ConditionTrue {
					why = append(why, c.Message)
				}
			}
			if got, err := current(ctx, tn); !apierrors.IsNotFound(err) {
				step, _, _ := unstructured.NestedString(got.Object, "status", "decommissionStep")
				return fmt.Errorf("tenant still there (%v): %v, step %q, Ready: %s; namespace: %v %s %s", err, conditionsOf(got), step,
					conditionOf(got, "Ready").Message, nsErr, ns.Status.Phase, strings.Join(why, "; "))
			}
			if !apierrors.IsNotFound(nsErr) {
				return fmt.Errorf("namespace still there: %v (phase %s: %s)", nsErr, ns.Status.Phase, strings.Join(why, "; "))
			}
			for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
				if ok, err := jetstream.Exists(ctx, stream); err != nil || ok {
					return fmt.Errorf("stream %s still in JetStream (%v)", stream, err)
				}
			}
			return nil
		})
	}
}

// TestOperatorPureClusterEveryTier runs the operator binary in pure-cluster mode on the
// real cluster: one tenant of each tier reaches Active with its releases installed by the
// real helm-controller (impersonating the tenant's deployer account), its seed Job
// completed on a kwok node and its streams in JetStream; `kubectl wait
// --for=condition=Ready` succeeds; deleting them runs the saga and
// kube-controller-manager really deletes each namespace before the finalizer goes.
//
// The Customer tenant's database password comes encrypted with sops in its
// spec.secrets: the operator decrypts it in memory with the age key of its own
// namespace, applies the Secret, and the release's values hold the password, which no
// log, event or status shows.
func TestOperatorPureClusterEveryTier(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-pure")
	op := startOperator(t, ns)
	password := hostileSecret()
	tenants := provisionEveryTier(t, ns, "PUR", 6*time.Minute, withDatabasePassword(t, password))
	// Each tier within its SLA budget (make sla measures more tenants at once).
	var list evav1.EvaTenantList
	if err := typedClient(t).List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	checkSLA(t, list.Items, len(tenants), 1, filepath.Join(t.TempDir(), "sla.json"))
	assertSecretMounted(ctx, t, "PURCUS", "crm", "crm-database", map[string]string{"password": password}, "")
	for _, tn := range tenants {
		got, err := current(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		if status, _ := json.Marshal(got.Object["status"]); strings.Contains(string(status), password) {
			t.Errorf("%s: the password is in plaintext in the tenant's status", tn.GetName())
		}
	}
	assertNoPlaintext(t, map[string]string{"operator output": op.Output()}, password)
	var codes []string
	for _, tn := range tenants {
		codes = append(codes, codeOf(tn))
	}
	order := watchSagaOrder(false, codes...)
	deleteAndWaitGone(t, 4*time.Minute, tenants...)
	order.check(t)
}
