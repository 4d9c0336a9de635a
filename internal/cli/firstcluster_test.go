package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/testenv"
)

// TestFirstClusterAdmitsAFleetFromInit is a platform team's first cluster, made as the
// docs say, outside Eva's tree: a fleet from evactl init (its own dev environment, domain
// dev.example.com), the operator's chart installed with Helm on a real API server with
// the values evactl operator values prints (docs/install.md), and the CRDs of Flux (as
// published), NACK's Stream (defaulting as NACK's does) and the PrometheusRule. Each
// tenant's files, applied as Flux applies them (the root's objects as kustomize-controller,
// the foundation and the workloads as the tenant's own applier), are admitted, Streams
// and Ingress included; a tenant's applier may not apply another tenant's. Installed with
// the chart's shipped dev environment instead, the Ingress is refused, naming the digest
// it was rendered for and the one the cluster enforces.
func TestFirstClusterAdmitsAFleetFromInit(t *testing.T) {
	ctx := context.Background()
	crds := filepath.Join(repoRoot, "internal", "testenv", "crds")
	env, err := testenv.Start(filepath.Join(crds, "flux"), filepath.Join(crds, "addons"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	chart, err := filepath.Abs(filepath.Join(repoRoot, "deploy", "charts", "eva-operator"))
	if err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(t.TempDir(), "fleet")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if code, out := runEvactl(t, "init", fleet); code != 0 {
		t.Fatalf("evactl init: exit %d\n%s", code, out)
	}
	t.Chdir(fleet)
	other := strings.ReplaceAll(strings.ReplaceAll(readFile(t, "tenants/EXAMPL.yaml"), "EXAMPL", "OTHERS"), "exampl", "others")
	if err := os.WriteFile("tenants/OTHERS.yaml", []byte(strings.Replace(other, "tier: Starter", "tier: Enterprise", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Enterprise is the platform's to grant: it grants it to OTHERS in the fleet's
	// entitlements, as docs/fleet-repository.md says.
	replaceInFile(t, "overlays/dev/tenant/environment.yaml", "  grants: {}\n", "  grants:\n    OTHERS: {tiers: [Enterprise]}\n")
	code, valuesText := runEvactl(t, "operator", "values", "--env", "dev")
	if code != 0 {
		t.Fatalf("evactl operator values: exit %d\n%s", code, valuesText)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(valuesText), &values); err != nil {
		t.Fatalf("evactl operator values printed no values file: %v\n%s", err, valuesText)
	}
	if code, out := runEvactl(t, "render", "--out", "out", "--git=false", "--quiet"); code != 0 {
		t.Fatalf("evactl render: exit %d\n%s", code, out)
	}

	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}); err != nil {
		t.Fatal(err)
	}
	install := helmAction(t, env)
	if _, err := install(chart, values); err != nil {
		t.Fatalf("helm install with evactl operator values: %v", err)
	}
	for _, code := range []string{"EXAMPL", "OTHERS"} {
		applyAll(t, env.Client, objectsOf(t, readFile(t, filepath.Join("out", render.FluxDir, render.DirName(code)+".yaml"))))
	}
	// Admission policies take effect a moment after they are created: nothing is applied
	// before each fence the tenants' objects pass has refused something.
	exampl := asApplier(t, env, "EXAMPL")
	awaitFence(t, exampl, "eva-tenant-applier-fence", probe("networking.k8s.io/v1", "NetworkPolicy", "default",
		map[string]any{"podSelector": map[string]any{}}))
	awaitFence(t, exampl, "eva-tenant-workloads", probe("v1", "Namespace", "", nil))
	for _, code := range []string{"EXAMPL", "OTHERS"} {
		foundation := readFile(t, filepath.Join("out", render.TenantsDir, render.DirName(code), render.ManifestsFile))
		applyAll(t, asApplier(t, env, code), objectsOf(t, foundation)[0:1]) // its Namespace
	}
	awaitFence(t, exampl, "eva-tenant-streams", probe("jetstream.nats.io/v1beta2", "Stream", "eva-tenant-exampl",
		map[string]any{"name": "eva-EXAMPL-x", "subjects": []any{"capsule.EXAMPL.x"}, "servers": []any{"nats://elsewhere:4222"}}))
	awaitFence(t, exampl, "eva-tenant-ingresses", probe("networking.k8s.io/v1", "Ingress", "eva-tenant-exampl",
		map[string]any{"rules": []any{map[string]any{"host": "exampl.attacker.example"}}}))
	for _, code := range []string{"EXAMPL", "OTHERS"} {
		applier := asApplier(t, env, code)
		dir := filepath.Join("out", render.TenantsDir, render.DirName(code))
		applyAll(t, applier, objectsOf(t, readFile(t, filepath.Join(dir, render.ManifestsFile))))
		applyAll(t, applier, objectsOf(t, readFile(t, filepath.Join(dir, render.WorkloadsDir, render.ManifestsFile))))
	}
	// Another tenant's Ingress, as EXAMPL's applier: refused.
	othersIngress := objectOfKind(t, readFile(t, filepath.Join("out", render.TenantsDir, "others", render.WorkloadsDir, render.ManifestsFile)), "Ingress")
	othersIngress.SetName("taken")
	if err := asApplier(t, env, "EXAMPL").Create(ctx, othersIngress, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("EXAMPL's applier creating OTHERS' Ingress: %v, want Forbidden", err)
	}

	// The chart as installed before this fix: its own dev environment, not the fleet's.
	upgrade := action.NewUpgrade(helmConfig(t, env))
	upgrade.Namespace = "eva-system"
	chrt, err := loader.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upgrade.Run("eva-operator", chrt, map[string]any{"env": "dev"}); err != nil {
		t.Fatalf("helm upgrade to the shipped dev environment: %v", err)
	}
	ingress := objectOfKind(t, readFile(t, filepath.Join("out", render.TenantsDir, "exampl", render.WorkloadsDir, render.ManifestsFile)), "Ingress")
	ingress.SetName("again")
	fence := ingress.GetAnnotations()["eva.aidonow.com/fence"]
	var refused error
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		refused = asApplier(t, env, "EXAMPL").Create(ctx, ingress.DeepCopy(), client.DryRunAll)
		if refused != nil && strings.Contains(refused.Error(), "the cluster enforces") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if refused == nil || !strings.Contains(refused.Error(), "rendered for fence "+fence) || !strings.Contains(refused.Error(), "evactl operator values") {
		t.Fatalf("the fleet's Ingress under the chart's own dev environment: %v, want it refused naming both digests", refused)
	}
}

// helmAction returns an install of a chart folder into eva-system, as helm install does.
func helmAction(t *testing.T, env *testenv.Env) func(chart string, values map[string]any) (any, error) {
	t.Helper()
	cfg := helmConfig(t, env)
	return func(chart string, values map[string]any) (any, error) {
		chrt, err := loader.Load(chart)
		if err != nil {
			return nil, err
		}
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = "eva-operator", "eva-system", true
		return install.Run(chrt, values)
	}
}

func helmConfig(t *testing.T, env *testenv.Env) *action.Configuration {
	t.Helper()
	kubeconfig, err := env.KubeConfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ns := "eva-system"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// asApplier is a client acting as the tenant's Flux applier account.
func asApplier(t *testing.T, env *testenv.Env, code string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:flux-system:" + render.ApplierName(code)}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// applyAll creates objects with c, in order, failing with the object and the API
// server's answer for each one refused.
func applyAll(t *testing.T, c client.Client, objects []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objects {
		if err := c.Create(context.Background(), u.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}

// probe is an object named "probe" that the fence awaited refuses.
func probe(apiVersion, kind, namespace string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetName("probe")
	if kind == "Namespace" {
		u.SetName("eva-tenant-exampl")
	}
	u.SetNamespace(namespace)
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

// awaitFence waits (20s at most) until the admission policy named refuses obj for c.
func awaitFence(t *testing.T, c client.Client, policy string, obj *unstructured.Unstructured) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		err = c.Create(context.Background(), obj.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") {
			return
		}
	}
	t.Fatalf("admission policy %s not in effect after 20s: %s %s/%s answered %v", policy, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
}

func objectsOf(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(text, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func objectOfKind(t *testing.T, text, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objectsOf(t, text) {
		if u.GetKind() == kind {
			return u
		}
	}
	t.Fatalf("no %s in the manifest", kind)
	return nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
