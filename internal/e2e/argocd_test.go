package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

var (
	applicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
	appProjectGVK  = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject"}
)

// inCluster is how Argo CD names its own cluster.
const inCluster = "https://kubernetes.default.svc"

// argo is Argo CD on the suite's cluster: started for the first scenario that needs it
// and stopped when the last one running ends. Its application controller watches every
// kind in the cluster, and once idle it cost the suite a tenth of a core for minutes.
var argo struct {
	sync.Mutex
	users int
	stop  func()
}

// startArgoCD starts Argo CD on the suite's cluster unless it runs, for the tests that
// need it, with what the platform adds for Argo CD (deploy/argocd/tenant_applier.yaml:
// the role its root Application binds the tenants' appliers with); it stops when the
// last test using it ends.
func startArgoCD(t *testing.T) {
	t.Helper()
	argo.Lock()
	defer argo.Unlock()
	if argo.users == 0 {
		stop, err := cluster.StartArgoCD(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fence, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "argocd", "tenant_applier.yaml"))
		if err == nil {
			err = applyYAML(context.Background(), string(fence))
		}
		if err != nil {
			stop()
			t.Fatal(err)
		}
		argo.stop = stop
	}
	argo.users++
	t.Cleanup(func() {
		argo.Lock()
		defer argo.Unlock()
		if argo.users--; argo.users == 0 {
			argo.stop()
		}
	})
}

// serveChartRepository packages the suite's charts with the helm CLI into a classic
// Helm chart repository (index.yaml and archives, `helm package` and `helm repo index`)
// served over HTTP on loopback, and returns its URL.
func serveChartRepository(t *testing.T) string {
	t.Helper()
	bins, err := testcluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if out, err := exec.Command(bins.Helm, "package", filepath.Join(chartsDir, e.Name()), "-d", dir).CombinedOutput(); err != nil {
			t.Fatalf("helm package %s: %v\n%s", e.Name(), err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/charts"
	if out, err := exec.Command(bins.Helm, "repo", "index", dir, "--url", url).CombinedOutput(); err != nil {
		t.Fatalf("helm repo index: %v\n%s", err, out)
	}
	srv := &http.Server{Handler: http.StripPrefix("/charts", http.FileServer(http.Dir(dir))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return url
}

// argoEnvironment writes an environment rendering for Argo CD: the tree in repo, the
// charts from chartRepo, with the Ingress settings (domain, class, annotations) of the
// environment the cluster's operator chart was installed for (dev: the admission policy
// eva-tenant-ingresses holds every tenant Ingress to them, and to their digest).
func argoEnvironment(t *testing.T, repo, chartRepo string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "argocd", "tenant")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	// The Ingress settings are read from the suite's dev environment, not copied: the
	// fence holds them to its digest.
	dev, err := overlay.Load(overlays, "dev")
	if err != nil {
		t.Fatal(err)
	}
	ingress, err := yaml.Marshal(map[string]any{"domain": dev.Settings.Domain,
		"ingressClassName": dev.Settings.IngressClassName, "ingressAnnotations": dev.Settings.IngressAnnotations})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "environment.yaml"), string(ingress)+fmt.Sprintf(`ingressNamespace: ingress-nginx
messagingNamespace: nats
seedImage: ghcr.io/aidonow/eva-seeder:0.1.0
applier: argocd
argocd:
  namespace: %s
  repoURL: %s
  targetRevision: main
  chartRepository: %s
  destinationServer: %s
  # A failed sync is given up after two quick retries, so a tenant fails in seconds,
  # not the minutes of the default five retries.
  syncRetries: 2
  syncRetryBackoff: 2s
`, testcluster.ArgoCDNamespace, repo, chartRepo, inCluster))
	return root
}

// bootstrapArgoCD creates what a platform team creates once: the project the root
// Application syncs in (Applications and AppProjects in Argo CD's namespace and the
// tenants' applier ClusterRoleBindings only, as the account name, which may write
// nothing else: eva-tenant-applier-binder, fenced by eva-tenant-applier-bindings, lets
// it bind the applier role to tenant appliers alone) and the root Application, an app
// of apps on the tree's argocd/ folder with automated prune and without allowEmpty.
func bootstrapArgoCD(ctx context.Context, t *testing.T, name, repo string) {
	t.Helper()
	ns := testcluster.ArgoCDNamespace
	err := applyYAML(ctx, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[1]s, namespace: %[2]s}
rules:
- apiGroups: [argoproj.io]
  resources: [applications, appprojects]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: eva-tenant-applier-binder}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  sourceRepos: [%[3]q]
  destinations: [{server: %[4]q, namespace: %[2]s}]
  namespaceResourceWhitelist: [{group: argoproj.io, kind: Application}, {group: argoproj.io, kind: AppProject}]
  clusterResourceWhitelist: [{group: rbac.authorization.k8s.io, kind: ClusterRoleBinding}]
  destinationServiceAccounts: [{server: %[4]q, namespace: %[2]s, defaultServiceAccount: %[2]s:%[1]s}]
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  project: %[1]s
  source: {repoURL: %[3]q, path: argocd, targetRevision: main, directory: {}}
  destination: {server: %[4]q, namespace: %[2]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    retry: {limit: 10, backoff: {duration: 5s, factor: 2, maxDuration: 1m}}
`, name, ns, repo, inCluster))
	if err != nil {
		t.Fatal(err)
	}
}

// application reads an Argo CD Application's sync status, revision and health.
func application(ctx context.Context, name string) (sync, revision, health, message string, err error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(applicationGVK)
	if err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: testcluster.ArgoCDNamespace, Name: name}, u); err != nil {
		return "", "", "", "", err
	}
	sync, _, _ = unstructured.NestedString(u.Object, "status", "sync", "status")
	revision, _, _ = unstructured.NestedString(u.Object, "status", "sync", "revision")
	health, _, _ = unstructured.NestedString(u.Object, "status", "health", "status")
	message, _, _ = unstructured.NestedString(u.Object, "status", "operationState", "message")
	if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(conds) > 0 {
		message += fmt.Sprintf(" conditions: %v", conds)
	}
	return sync, revision, health, message, nil
}

// headOf returns the commit a bare repository's main branch points at.
func headOf(t *testing.T, repo string) string {
	t.Helper()
	r, err := git.PlainOpen(filepath.Join(gitRoot, repo))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference("refs/heads/main", true)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Hash().String()
}

// argoLogs is what Argo CD says, for a failure message: each Application's last
// operation (a root whose sync failed is why its children are missing), then what the
// components logged last.
func argoLogs() string {
	var ops strings.Builder
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(applicationGVK.GroupVersion().WithKind("ApplicationList"))
	if err := cluster.Client.List(context.Background(), list, client.InNamespace(testcluster.ArgoCDNamespace)); err != nil {
		fmt.Fprintf(&ops, "\nlisting Applications: %v", err)
	}
	for _, u := range list.Items {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
		message, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "message")
		if len(message) > 600 {
			message = message[:600] + "…"
		}
		fmt.Fprintf(&ops, "\nApplication %s: operation %s: %s", u.GetName(), phase, message)
	}
	return fmt.Sprintf("%s\nargocd-application-controller: %s\nargocd-repo-server: %s", ops.String(),
		cluster.Logs("argocd-application-controller", 4000), cluster.Logs("argocd-repo-server", 2000))
}

// waitApplications waits until each Application is synced at the commit and healthy.
func waitApplications(ctx context.Context, t *testing.T, commit string, names ...string) {
	t.Helper()
	poll(t, "Argo CD Applications synced at "+commit[:8]+" and healthy", 4*time.Minute, func() error {
		for _, name := range names {
			sync, revision, health, message, err := application(ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w%s", name, err, argoLogs())
			}
			if sync != "Synced" || health != "Healthy" {
				return fmt.Errorf("%s: sync %q health %q at %q: %s%s", name, sync, health, revision, message, argoLogs())
			}
			if !strings.HasPrefix(name, render.FoundationName("")) || strings.Contains(name, "-module-") {
				continue // a module's revision is its chart version
			}
			if revision != commit {
				return fmt.Errorf("%s: synced at %q, not the published %s (sync %s, health %s: %s)%s", name, revision, commit, sync, health, message, argoLogs())
			}
		}
		return nil
	})
}

// TestArgoCDDeliversTenantsPublishedByEvactl: the tenants `evactl publish git` renders
// for Argo CD reach the cluster through the real Argo CD (repo server and application
// controller, v3.2): the platform's root Application creates each tenant's project and
// Applications, the foundation syncs at the published commit, the modules install from
// a Helm chart repository as the tenant's fenced applier, and every Application is
// healthy. An empty render is refused before Argo CD sees it. A decommissioned tenant
// loses its workloads and modules through Argo CD's cascade, then, removed from the
// tree, its namespace.
func TestArgoCDDeliversTenantsPublishedByEvactl(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	startArgoCD(t)
	const repoName = "argocd-fleet.git"
	repo := newGitRepository(t, repoName)
	env := argoEnvironment(t, repo, serveChartRepository(t))
	tenants, _ := exampleTenants(t, map[string]string{"DEVUSR": "ARGDEV"})
	writeFile(t, filepath.Join(tenants, "ARGCUS.yaml"), `apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata: {name: argcus, namespace: eva-system}
spec:
  capsuleCode: ARGCUS
  tier: Customer
  seedsVersion: seeds-2026.11.0
  helmValues:
    crm: {replicaCount: 2}
`)
	publish := func(dir string, extra ...string) (string, error) {
		args := append([]string{"publish", "git", "--repo", repo, "--branch", "main", "--env", "argocd",
			"--overlays", env, "--charts", chartsDir, "--tenants", dir, "--cache-dir", t.TempDir()}, extra...)
		cmd := exec.Command(evactl, args...)
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := publish(tenants); err != nil {
		t.Fatalf("evactl publish git: %v\n%s", err, out)
	}
	commit := headOf(t, repoName)
	bootstrapArgoCD(ctx, t, "eva-tenants-argocd", repo)

	var apps []string
	for _, code := range []string{"ARGDEV", "ARGCUS"} {
		apps = append(apps, render.FoundationName(code), render.WorkloadsName(code))
		for _, m := range catalogModules(t, code, tenants) {
			apps = append(apps, render.ModuleApplicationName(code, m))
		}
	}
	waitApplications(ctx, t, commit, apps...)

	// What Argo CD applied: the namespaces with their confinement, the module
	// Deployments (tracked by their Application), the seed Job.
	for _, code := range []string{"ARGDEV", "ARGCUS"} {
		ns := render.FoundationName(code)
		var namespace corev1.Namespace
		if err := cluster.Client.Get(ctx, types.NamespacedName{Name: ns}, &namespace); err != nil {
			t.Fatal(err)
		}
		if namespace.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("%s: labels %v", ns, namespace.Labels)
		}
		var quotas corev1.ResourceQuotaList
		if err := cluster.Client.List(ctx, &quotas, client.InNamespace(ns)); err != nil || len(quotas.Items) != 1 {
			t.Errorf("%s: %d ResourceQuotas (%v)", ns, len(quotas.Items), err)
		}
		deployments := &unstructured.UnstructuredList{}
		deployments.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"})
		if err := cluster.Client.List(ctx, deployments, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		tracked := 0
		for _, d := range deployments.Items {
			if strings.HasPrefix(d.GetAnnotations()["argocd.argoproj.io/tracking-id"], ns+"-module-") {
				tracked++
			}
		}
		if want := len(catalogModules(t, code, tenants)); tracked < want {
			t.Errorf("%s: %d Deployments tracked by a module Application, want at least %d", ns, tracked, want)
		}
	}
	// The Customer's values override reached its release.
	assertReplicas(ctx, t, "eva-tenant-argcus", "crm", 2)

	// A shrunken render (ARGCUS, still Active, left out) and an empty one are refused
	// before Argo CD sees them: the branch and the Applications stay as they are.
	shrunk := t.TempDir()
	if err := os.CopyFS(shrunk, os.DirFS(tenants)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(shrunk, "ARGCUS.yaml")); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{shrunk: "refusing to remove tenant(s) ARGCUS", t.TempDir(): "no tenant files"} {
		if out, err := publish(dir); err == nil || !strings.Contains(out, want) {
			t.Errorf("publishing %s: %v, want a refusal saying %q:\n%s", dir, err, want, out)
		}
	}
	if head := headOf(t, repoName); head != commit {
		t.Fatalf("a refused publish moved main from %s to %s", commit, head)
	}
	waitApplications(ctx, t, commit, render.FoundationName("ARGCUS"), render.ModuleApplicationName("ARGCUS", "crm"))

	// Decommission through Argo CD's cascade: ARGCUS Decommissioned keeps only its
	// namespace; its workloads and module Applications are pruned by the root
	// Application and, through their finalizer, take their resources with them.
	text, err := os.ReadFile(filepath.Join(tenants, "ARGCUS.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tenants, "ARGCUS.yaml"), strings.Replace(string(text), "tier: Customer", "tier: Customer\n  lifecycle: Decommissioned", 1))
	if out, err := publish(tenants); err != nil {
		t.Fatalf("evactl publish git (ARGCUS decommissioned): %v\n%s", err, out)
	}
	commit = headOf(t, repoName)
	waitApplications(ctx, t, commit, render.FoundationName("ARGCUS"), render.FoundationName("ARGDEV"))
	poll(t, "ARGCUS's workloads and modules gone through Argo CD's cascade", 3*time.Minute, func() error {
		for _, name := range []string{render.WorkloadsName("ARGCUS"), render.ModuleApplicationName("ARGCUS", "crm")} {
			if _, _, _, _, err := application(ctx, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Application %s still there (%v)%s", name, err, argoLogs())
			}
		}
		deployments := &unstructured.UnstructuredList{}
		deployments.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"})
		if err := cluster.Client.List(ctx, deployments, client.InNamespace("eva-tenant-argcus")); err != nil {
			return err
		}
		if n := len(deployments.Items); n > 0 {
			return fmt.Errorf("%d Deployments left in eva-tenant-argcus", n)
		}
		return nil
	})
	// Removed from the tree: the root prunes its project and foundation, and the
	// foundation's finalizer deletes the namespace.
	if err := os.Remove(filepath.Join(tenants, "ARGCUS.yaml")); err != nil {
		t.Fatal(err)
	}
	if out, err := publish(tenants); err != nil {
		t.Fatalf("evactl publish git (ARGCUS removed): %v\n%s", err, out)
	}
	poll(t, "ARGCUS's namespace, Applications and project gone", 3*time.Minute, func() error {
		var namespace corev1.Namespace
		if err := cluster.Client.Get(ctx, types.NamespacedName{Name: "eva-tenant-argcus"}, &namespace); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace eva-tenant-argcus still there (phase %s, %v)%s", namespace.Status.Phase, err, argoLogs())
		}
		project := &unstructured.Unstructured{}
		project.SetGroupVersionKind(appProjectGVK)
		err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: testcluster.ArgoCDNamespace, Name: render.ProjectName("ARGCUS")}, project)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("AppProject still there (%v)", err)
		}
		return nil
	})
	// ARGDEV is untouched.
	waitApplications(ctx, t, headOf(t, repoName), render.FoundationName("ARGDEV"), render.WorkloadsName("ARGDEV"))
}

// catalogModules lists the modules of a tenant file's tier, in catalog order.
func catalogModules(t *testing.T, code, tenants string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tenants, code+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tier := range []string{"Starter", "Customer", "Enterprise", "Platform"} {
		if strings.Contains(string(data), "tier: "+tier+"\n") {
			return tenant.DefaultCatalog().ModulesOf(evav1.Tier(tier))
		}
	}
	t.Fatalf("%s: no tier", code)
	return nil
}

// assertReplicas checks a Deployment's replicas (the release's values at work).
func assertReplicas(ctx context.Context, t *testing.T, ns, nameContains string, want int64) {
	t.Helper()
	deployments := &unstructured.UnstructuredList{}
	deployments.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"})
	if err := cluster.Client.List(ctx, deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		if !strings.Contains(d.GetName(), nameContains) {
			continue
		}
		if got, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); got != want {
			t.Errorf("%s/%s: %d replicas, want %d", ns, d.GetName(), got, want)
		}
		return
	}
	t.Errorf("no Deployment %s* in %s", nameContains, ns)
}

// TestArgoCDOperatorGitOpsMode: the operator publishes an EvaTenant for Argo CD and
// reads Argo CD back: the tenant becomes Active with its five conditions from the
// Applications (foundation synced at the published commit, modules healthy); a module
// that degrades (a Deployment past its progress deadline) fails its tenant with what
// Argo CD says of the Deployment, and a module Argo CD cannot sync fails the tenant with
// Argo CD's message once its retries are spent; each fix brings its tenant back;
// deleting the tenant takes it apart through Argo CD's cascade, namespace included.
func TestArgoCDOperatorGitOpsMode(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	startArgoCD(t)
	repo := newGitRepository(t, "argocd-operator.git")
	env := argoEnvironment(t, repo, serveChartRepository(t))
	bootstrapArgoCD(ctx, t, "eva-operator-argocd", repo)
	ns := tenantNamespace(t, "e2e-argocd")
	startOperator(t, ns, "--overlays="+env, "--env=argocd", "--publish=git", "--git-url="+repo, "--git-branch=main",
		"--git-cache="+t.TempDir())
	const code, keepCode = "ARGOPS", "ARGKEP"
	tn := evaTenant(ns, code, evav1.TierStarter)
	// A second tenant stays: the root Application, without allowEmpty, would not prune
	// the last tenant of its tree (Argo CD's own guard against an emptied source). Its
	// crm degrades: four pods of 700m against the Starter quota's 2 CPUs, so the
	// Deployment makes no progress and, past its deadline, is Degraded in Argo CD.
	keep := evaTenant(ns, keepCode, evav1.TierStarter)
	degrading := map[string]any{"crm": map[string]any{"replicaCount": int64(4), "progressDeadlineSeconds": int64(20),
		"resources": map[string]any{"requests": map[string]any{"cpu": "700m"}, "limits": map[string]any{"cpu": "700m"}}}}
	if err := unstructured.SetNestedField(keep.Object, degrading, "spec", "helmValues"); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []*unstructured.Unstructured{tn, keep} {
		if err := cluster.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	kubectlWaitReady(t, 5*time.Minute, tn)
	t.Logf("%s Active through Argo CD after %s", code, time.Since(began).Round(time.Second))
	got, err := current(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	conds := conditionsOf(got)
	for _, ct := range []string{"NamespaceReady", "Provisioned", "SeedLoaded", "ModulesDeployed", "IngressReady", "Ready"} {
		if !strings.HasPrefix(conds[ct], "True") {
			t.Errorf("%s: %s", ct, conds[ct])
		}
	}
	revision, _, _ := unstructured.NestedString(got.Object, "status", "revision")
	if _, at, _, _, err := application(ctx, render.FoundationName(code)); err != nil || at != revision {
		t.Errorf("Active, but the foundation Application is synced at %q (%v), the tenant's published revision is %q", at, err, revision)
	}

	// The degraded module fails its tenant with what Argo CD says of the Deployment, and
	// the fix (one replica fits the quota) brings it back.
	degraded := waitFailed(t, keep, 5*time.Minute)
	modules := conditionOf(degraded, evav1.ConditionModulesDeployed)
	if modules.Status != "False" || !strings.Contains(modules.Message, render.ModuleApplicationName(keepCode, "crm")+": Degraded") ||
		!strings.Contains(modules.Message, "Deployment "+tenant.Namespace(keepCode)+"/crm: ") ||
		!strings.Contains(modules.Message, "exceeded its progress deadline") {
		t.Errorf("ModulesDeployed %+v does not carry Argo CD's Degraded crm and why", modules)
	}
	setSpec(t, keep, map[string]any{"crm": map[string]any{"replicaCount": int64(1), "progressDeadlineSeconds": int64(20)}}, "helmValues")
	kubectlWaitReady(t, 5*time.Minute, keep)
	t.Logf("%s degraded, failed and recovered after %s", keepCode, time.Since(began).Round(time.Second))

	// A value the API server refuses: Argo CD's sync fails, is retried, and the tenant
	// fails with what Argo CD says once the retries are spent.
	// (Requests above limits: each is a valid quantity within the tier's bounds, so Eva
	// renders it; the API server refuses the Deployment.)
	bad := map[string]any{"crm": map[string]any{"resources": map[string]any{
		"requests": map[string]any{"cpu": "500m"}, "limits": map[string]any{"cpu": "200m"}}}}
	setSpec(t, tn, bad, "helmValues")
	failed := waitFailed(t, tn, 6*time.Minute)
	modules = conditionOf(failed, evav1.ConditionModulesDeployed)
	if modules.Status != "False" || !strings.Contains(modules.Message, render.ModuleApplicationName(code, "crm")) ||
		!strings.Contains(modules.Message, "SyncFailed") {
		t.Errorf("ModulesDeployed %+v does not carry Argo CD's failed sync of crm", modules)
	}
	// The fix.
	setSpec(t, tn, map[string]any{"crm": map[string]any{"replicaCount": int64(1)}}, "helmValues")
	kubectlWaitReady(t, 5*time.Minute, tn)
	t.Logf("%s failed to sync and recovered after %s", code, time.Since(began).Round(time.Second))

	// Deleted: the saga publishes each step and waits on Argo CD's cascade.
	if err := cluster.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	poll(t, "tenant, Applications, project and namespace gone", 5*time.Minute, func() error {
		if got, err := current(ctx, tn); !apierrors.IsNotFound(err) {
			step, _, _ := unstructured.NestedString(got.Object, "status", "decommissionStep")
			return fmt.Errorf("tenant still there at step %q: %+v%s", step, conditionOf(got, "Ready"), argoLogs())
		}
		var namespace corev1.Namespace
		if err := cluster.Client.Get(ctx, types.NamespacedName{Name: tenant.Namespace(code)}, &namespace); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there (%v)", err)
		}
		apps := &unstructured.UnstructuredList{}
		apps.SetGroupVersionKind(applicationGVK)
		if err := cluster.Client.List(ctx, apps, client.InNamespace(testcluster.ArgoCDNamespace),
			client.MatchingLabels{tenant.LabelCapsule: code}); err != nil || len(apps.Items) > 0 {
			return fmt.Errorf("%d Applications left (%v)", len(apps.Items), err)
		}
		return nil
	})
	t.Logf("%s decommissioned after %s", code, time.Since(began).Round(time.Second))
}
