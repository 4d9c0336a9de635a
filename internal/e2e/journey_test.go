package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/docsection"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// journeyE2E turns on the first-cluster journey (make e2e-journey): a control plane of
// its own, whose operator chart carries a fleet's environment that no other scenario
// shares, costs more than make test's budget allows.
const journeyE2E = "EVA_E2E_JOURNEY"

// TestJourneyFirstCluster is a platform team's first cluster, made as the docs say and
// nothing else, on a cluster of its own with the real Flux controllers in lockdown:
// `evactl init` in a fresh folder outside Eva's tree (its own dev environment, domain
// dev.example.com, charts from a per-tenant source), the module charts pushed with
// `evactl charts push` to a private registry that answers nothing without credentials,
// its pull secret created in eva-system, the operator's chart installed with the real
// helm CLI and the values `evactl operator values` prints (docs/install.md), the
// source and root Kustomization read out of docs/flux-wiring.md, the example tenant's
// decryption key created as init says. Then: a tenant of every tier published with
// `evactl publish git`, each one's Kustomizations and releases Ready (its charts pulled
// by digest, with the credentials the operator copied into its namespace), its Deployments
// Available and its Ingress admitted and served; a change reviewed with `evactl diff`;
// the Starter tenant removed as docs/tenants.md says, every release uninstalled by
// helm-controller, the namespace gone, and of the tenant nothing left but what
// docs/uninstall.md lists (its applier account and ClusterRoleBinding).
func TestJourneyFirstCluster(t *testing.T) {
	if os.Getenv(journeyE2E) == "" {
		t.Skip("the first-cluster journey runs with make e2e-journey (" + journeyE2E + "=1)")
	}
	parallel(t)
	ctx := context.Background()
	root := testenv.RepoRoot()
	first, err := testcluster.Start(ctx, testcluster.Options{
		CRDDirs:       []string{filepath.Join(root, "internal", "testenv", "crds", "addons")},
		PodStartDelay: podStartDelay,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	if err := first.StartFlux(ctx); err != nil {
		t.Fatal(err)
	}
	_, stopMessaging, err := first.StartMessaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopMessaging)

	// A private chart registry: nothing is pulled from it without credentials.
	charts, err := testcluster.PrivateOCIRegistry("eva", "journey-pull")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(charts.Close)
	chartsURL := "oci://" + charts.Host() + "/eva/charts"
	if res, err := http.Get(charts.URL + "/v2/"); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the private registry answers an anonymous client: %v %v", res, err)
	}
	fleet := filepath.Join(t.TempDir(), "fleet")
	runIn(t, "", "evactl", evactl, "init", fleet, "--charts-url", chartsURL)
	// A plain-HTTP registry is the one setting the docs leave to the user; the pull
	// secret is the one docs/install.md creates. The tenants below take tiers and the
	// first wave that init's entitlements give no tenant: the platform grants them
	// (docs/fleet-repository.md#entitlements), and DEVUSR, hack/quickstart.sh's.
	firstWave := map[string]any{"waves": []any{1}}
	if err := setSettings(filepath.Join(fleet, "overlays", "dev", "tenant", "environment.yaml"), map[string]any{
		"chartSource": map[string]any{"kind": "OCIRepository", "name": "eva-charts", "url": chartsURL, "insecure": true,
			"pullSecret": "eva-chart-registry"},
		"entitlements": map[string]any{"tiers": []any{"Starter", "Customer"}, "waves": []any{2, 3}, "grants": map[string]any{
			"EXAMPL": firstWave, "DEVUSR": firstWave, "JRNCUS": firstWave,
			"JRNENT": map[string]any{"tiers": []any{"Enterprise"}, "waves": []any{1}},
			"JRNPLA": map[string]any{"tiers": []any{"Platform"}, "waves": []any{1}}}},
	}); err != nil {
		t.Fatal(err)
	}
	// The module charts, pushed by the platform with its credentials (evactl charts
	// push), which records their digests in charts/published.yaml.
	if err := os.CopyFS(filepath.Join(fleet, "charts"), os.DirFS(filepath.Join(root, "charts"))); err != nil {
		t.Fatal(err)
	}
	docker := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("eva:journey-pull"))
	if err := os.WriteFile(filepath.Join(docker, "config.json"), []byte(`{"auths":{"`+charts.Host()+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	push := exec.Command(evactl, "charts", "push", "--to", chartsURL, "--insecure")
	push.Dir, push.Env = fleet, append(os.Environ(), "DOCKER_CONFIG="+docker)
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("evactl charts push: %v\n%s", err, out)
	}
	example := readText(t, filepath.Join(fleet, "tenants", "EXAMPL.yaml"))
	for code, tier := range map[string]string{"JRNCUS": "Customer", "JRNENT": "Enterprise", "JRNPLA": "Platform"} {
		text := strings.ReplaceAll(strings.ReplaceAll(example, "EXAMPL", code), "exampl", strings.ToLower(code))
		text = strings.Replace(text, "tier: Starter", "tier: "+tier, 1)
		if err := os.WriteFile(filepath.Join(fleet, "tenants", code+".yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The operator's cluster objects, as docs/install.md installs them; no replica: its
	// image does not run here (its binary does, below).
	if err := first.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eva-system", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}); err != nil {
		t.Fatal(err)
	}
	values := runIn(t, fleet, "evactl", evactl, "operator", "values", "--env", "dev")
	valuesFile := filepath.Join(t.TempDir(), "eva-operator-env.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	bins, err := testcluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, fleet, "helm", bins.Helm, "install", "eva-operator", filepath.Join(root, "deploy", "charts", "eva-operator"),
		"--kubeconfig", first.KubeConfig, "-n", "eva-system", "-f", valuesFile, "--set", "replicas=0")
	runIn(t, fleet, "kubectl", "kubectl", "--kubeconfig", first.KubeConfig, "-n", "eva-system", "create", "secret", "docker-registry",
		"eva-chart-registry", "--docker-server="+charts.Host(), "--docker-username=eva", "--docker-password=journey-pull")
	// The operator copies the pull secret into each tenant namespace; its image does not
	// run here, so its binary runs beside the cluster, as the chart's account, with the
	// fleet's environment and charts.
	operatorConfig, err := first.KubeConfigAs(testenv.OperatorServiceAccount,
		"system:serviceaccounts", "system:serviceaccounts:eva-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartOperator(t, operatorConfig, []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=eva-system"},
		"--overlays="+filepath.Join(fleet, "overlays"), "--env=dev", "--published-charts="+filepath.Join(fleet, "charts", "published.yaml"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0")

	// Flux's objects from docs/flux-wiring.md, and the decryption key as init says.
	repo := newGitRepository(t, "journey.git")
	if err := bootstrapSourceOn(ctx, first.Client, "GitRepository", "eva-tenants", repo, "main", "10s", "./"); err != nil {
		t.Fatal(err)
	}
	runIn(t, fleet, "kubectl", "kubectl", "--kubeconfig", first.KubeConfig, "-n", "flux-system", "create", "secret", "generic",
		"sops-age-exampl", "--from-file=identity.agekey=keys/EXAMPL.agekey")

	publish := func(what string) {
		runIn(t, fleet, "evactl publish git ("+what+")", evactl, "publish", "git", "--repo", repo, "--branch", "main", "--quiet")
		requestReconcileOn(t, first.Client, "GitRepository", "eva-tenants")
	}
	publish("every tier")
	codes := []string{"EXAMPL", "JRNCUS", "JRNENT", "JRNPLA"}
	assertTenantsDelivered(t, first.Client, codes, 2+4+6+6)

	// A change reviewed as a pull request would be: evactl diff names it, and publishing
	// it delivers it.
	starter := filepath.Join(fleet, "tenants", "EXAMPL.yaml")
	if err := os.WriteFile(starter, []byte(strings.Replace(readText(t, starter), "replicaCount: 1", "replicaCount: 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	diff := exec.Command(evactl, "diff", "--repo", repo, "--branch", "main")
	diff.Dir = fleet
	out, _ := diff.CombinedOutput()
	if !strings.Contains(string(out), "HelmRelease") || !strings.Contains(string(out), "replicaCount") {
		t.Fatalf("evactl diff of the replica change:\n%s", out)
	}
	publish("the replica change")
	poll(t, "EXAMPL's crm with two replicas", 3*time.Minute, func() error {
		var d appsv1.Deployment
		if err := first.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace("EXAMPL"), Name: "crm"}, &d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			return fmt.Errorf("crm has %v replicas", d.Spec.Replicas)
		}
		return nil
	})

	assertKubectlPathAsDocumented(t, first, root)

	assertDecommissionUninstalls(t, first.Client, filepath.Join(fleet, "tenants"), "EXAMPL", publish)
	assertOnlyListedLeft(t, first.Client, "EXAMPL")
}

// assertTenantsDelivered waits until each tenant's two Kustomizations and its releases
// (releases in all) are Ready, its Deployments Available and its Ingress has an address.
func assertTenantsDelivered(t *testing.T, c client.Client, codes []string, releases int) {
	t.Helper()
	ctx := context.Background()
	poll(t, "every tenant Kustomization Ready", 6*time.Minute, func() error {
		return allReadyOn(ctx, c, kustomizationGVK, 2*len(codes), client.InNamespace(testcluster.FluxNamespace), client.HasLabels{tenant.LabelCapsule})
	})
	poll(t, "every HelmRelease Ready", 6*time.Minute, func() error {
		return allReadyOn(ctx, c, helmReleaseGVK, releases, client.HasLabels{tenant.LabelCapsule})
	})
	for _, code := range codes {
		poll(t, code+"'s Deployments Available and its Ingress served", 3*time.Minute, func() error {
			var deployments appsv1.DeploymentList
			if err := c.List(ctx, &deployments, client.InNamespace(tenant.Namespace(code))); err != nil {
				return err
			}
			for _, d := range deployments.Items {
				if d.Status.AvailableReplicas < 1 {
					return fmt.Errorf("Deployment %s: %d available", d.Name, d.Status.AvailableReplicas)
				}
			}
			ingress := &unstructured.Unstructured{}
			ingress.SetAPIVersion("networking.k8s.io/v1")
			ingress.SetKind("Ingress")
			if err := c.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace(code), Name: tenant.IngressName(code)}, ingress); err != nil {
				return err
			}
			if lb, _, _ := unstructured.NestedSlice(ingress.Object, "status", "loadBalancer", "ingress"); len(lb) == 0 {
				return fmt.Errorf("Ingress %s has no address yet", ingress.GetName())
			}
			return nil
		})
	}
}

// assertOnlyListedLeft: of a removed tenant, only what docs/uninstall.md says is kept
// remains, its applier account and ClusterRoleBinding (kept on prune so that Flux can
// garbage-collect the tenant as that account).
func assertOnlyListedLeft(t *testing.T, c client.Client, code string) {
	t.Helper()
	ctx := context.Background()
	labelled := client.MatchingLabels{tenant.LabelCapsule: code}
	var left []string
	var accounts corev1.ServiceAccountList
	if err := c.List(ctx, &accounts, labelled); err != nil {
		t.Fatal(err)
	}
	for _, a := range accounts.Items {
		if a.Namespace != testcluster.FluxNamespace {
			left = append(left, "ServiceAccount "+a.Namespace+"/"+a.Name)
		}
	}
	var bindings rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &bindings, labelled); err != nil {
		t.Fatal(err)
	}
	if len(accounts.Items) != 1 || len(bindings.Items) != 1 {
		t.Errorf("%d applier accounts and %d ClusterRoleBindings of %s left, want the one of each docs/uninstall.md lists", len(accounts.Items), len(bindings.Items), code)
	}
	for _, gvk := range []string{"HelmRelease.helm.toolkit.fluxcd.io/v2", "Kustomization.kustomize.toolkit.fluxcd.io/v1",
		"Stream.jetstream.nats.io/v1beta2", "PrometheusRule.monitoring.coreos.com/v1", "HelmRepository.source.toolkit.fluxcd.io/v1",
		"OCIRepository.source.toolkit.fluxcd.io/v1"} {
		kind, apiVersion, _ := strings.Cut(gvk, ".")
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(apiVersion)
		list.SetKind(kind + "List")
		if err := c.List(ctx, list, labelled); err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			left = append(left, kind+" "+u.GetNamespace()+"/"+u.GetName())
		}
	}
	if len(left) > 0 {
		t.Errorf("left of %s, which docs/uninstall.md does not list: %s", code, strings.Join(left, ", "))
	}
}

// runIn runs a command (what names it in messages) in dir, as a user at a shell does, and
// returns its standard output; it fails the test with everything it printed.
func runIn(t *testing.T, dir, what, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", what, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// assertKubectlPathAsDocumented takes the kubectl path on the cluster as a newcomer
// does: hack/quickstart.sh (docs/install.md) keeps the operator the chart installed and
// brings its tenant, DEVUSR, to Active; then every command of docs/concepts.md's "Where
// to read it", as written (the page is the fixture), works against it. The one that
// waits for Stalled, which "returns once it is Failed", times out on an Active tenant.
func assertKubectlPathAsDocumented(t *testing.T, c *testcluster.Cluster, root string) {
	t.Helper()
	quick := exec.Command("bash", filepath.Join(root, "hack", "quickstart.sh"), "--kubeconfig", c.KubeConfig, "--timeout", "300")
	out, err := quick.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "keeping it") || !strings.Contains(string(out), "tenant DEVUSR is Active") {
		t.Fatalf("hack/quickstart.sh: %v\n%s", err, out)
	}
	blocks, err := docsection.Blocks(filepath.Join(root, "docs", "concepts.md"), "Where to read it", "sh")
	if err != nil || len(blocks) == 0 {
		t.Fatalf("docs/concepts.md's commands: %v (%d blocks)", err, len(blocks))
	}
	ran := 0
	for _, b := range blocks {
		for line := range strings.SplitSeq(b.Text, "\n") {
			if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			cmd := exec.Command("bash", "-c", line)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeConfig)
			out, err := cmd.CombinedOutput()
			ran++
			if strings.Contains(line, "condition=Stalled") {
				if err == nil || !strings.Contains(string(out), "timed out") {
					t.Errorf("docs/concepts.md: %s: on an Active tenant, want it to time out: %v\n%s", line, err, out)
				}
				continue
			}
			if err != nil || !strings.Contains(strings.ToLower(string(out)), "devusr") {
				t.Errorf("docs/concepts.md: %s: %v\n%s", line, err, out)
			}
		}
	}
	if ran < 5 {
		t.Errorf("ran %d of docs/concepts.md's commands, want its five", ran)
	}
}
