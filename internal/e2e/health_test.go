package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/testcluster"
)

// gitRepositoryGVK is Flux's GitRepository.
var gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}

// healthCheckTimeout is the Kustomization's timeout in TestFluxHealthCheckFailsFast: the
// failure must be reported well before it.
const healthCheckTimeout = 4 * time.Minute

// evaTenantHealthCheck is how a Flux Kustomization health-checks EvaTenants (README):
// kstatus alone reads a tenant the operator has not looked at yet (no status) as Current,
// so a health check racing the operator passes; these expressions wait for the
// operator's verdict on the tenant's current generation.
const evaTenantHealthCheck = `  healthCheckExprs:
  - apiVersion: eva.aidonow.com/v1alpha1
    kind: EvaTenant
    failed: has(status.conditions) && status.conditions.exists(c, c.type == 'Stalled' && c.status == 'True')
    current: has(status.observedGeneration) && status.observedGeneration == metadata.generation && has(status.conditions) && status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')
`

// TestFluxHealthCheckFailsFast is the `kubectl apply` way in, through Flux: a platform
// team keeps EvaTenants in git and applies them with a Flux Kustomization that waits for
// them (wait: true, with the health check expressions the README gives). One of them
// pins a module its tier does not have, which the operator judges invalid: the tenant is
// Stalled, kstatus computes Failed, and the real kustomize-controller fails the health
// check naming the tenant well before its timeout, instead of waiting it out.
func TestFluxHealthCheckFailsFast(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-health")

	const name = "invalid"
	url := newGitRepository(t, "health.git")
	commitFiles(t, filepath.Join(gitRoot, "health.git"), map[string]string{
		"tenants/" + name + ".yaml": fmt.Sprintf(`apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: %s
  namespace: %s
spec:
  capsuleCode: HLTHIN
  tier: Starter
  versions:
    gateway: 1.0.0
`, name, ns),
	})
	if err := applyYAML(ctx, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: eva-health
  namespace: %[1]s
spec:
  interval: 10s
  url: %[2]s
  ref:
    branch: main
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: eva-health
  namespace: %[1]s
spec:
  interval: 10m
  path: ./tenants
  prune: true
  wait: true
  timeout: %[3]s
  sourceRef:
    kind: GitRepository
    name: eva-health
%[4]s`, testcluster.FluxNamespace, url, healthCheckTimeout, evaTenantHealthCheck)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, gvk := range []schema.GroupVersionKind{kustomizationGVK, gitRepositoryGVK} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			u.SetNamespace(testcluster.FluxNamespace)
			u.SetName("eva-health")
			_ = cluster.Client.Delete(context.Background(), u) // the suite's cluster goes anyway
		}
	})
	start := time.Now()
	// The operator starts only once Flux applied the tenant: until it judged it, the
	// tenant has no status, and the health check must not pass on that.
	tn := &unstructured.Unstructured{}
	tn.SetAPIVersion("eva.aidonow.com/v1alpha1")
	tn.SetKind("EvaTenant")
	tn.SetNamespace(ns)
	tn.SetName(name)
	poll(t, "Flux applied the tenant", time.Minute, func() error {
		_, err := current(ctx, tn)
		return err
	})
	time.Sleep(5 * time.Second) // long enough for a kstatus-only health check to pass
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: testcluster.FluxNamespace, Name: "eva-health"}, ks); err != nil {
		t.Fatal(err)
	}
	if ready := conditionOf(ks, "Ready"); ready.Status == "True" {
		t.Fatalf("the health check passed on a tenant nobody judged yet: %+v", ready)
	}
	startOperator(t, ns)
	var failedAfter time.Duration
	poll(t, "the health check fails", healthCheckTimeout, func() error {
		ks := &unstructured.Unstructured{}
		ks.SetGroupVersionKind(kustomizationGVK)
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: testcluster.FluxNamespace, Name: "eva-health"}, ks); err != nil {
			return err
		}
		ready := conditionOf(ks, "Ready")
		if ready.Status != "False" || ready.Reason != "HealthCheckFailed" {
			return fmt.Errorf("Kustomization Ready %+v", ready)
		}
		if !strings.Contains(ready.Message, "EvaTenant/"+ns+"/"+name) {
			t.Errorf("the health check failed without naming the tenant: %s", ready.Message)
		}
		failedAfter = time.Since(start)
		return nil
	})
	t.Logf("Flux failed the health check %s after the Kustomization was created (timeout %s)", failedAfter.Round(time.Second), healthCheckTimeout)
	if failedAfter > healthCheckTimeout/2 {
		t.Errorf("the health check failed after %s: not before its timeout (%s) by much", failedAfter, healthCheckTimeout)
	}
	got, err := current(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := kstatus.Compute(got); err != nil || res.Status != kstatus.FailedStatus {
		t.Errorf("kstatus of the invalid tenant: %v (%v), want Failed", res, err)
	}
	if stalled := conditionOf(got, "Stalled"); stalled.Status != "True" || stalled.Reason != status.ReasonInvalidSpec ||
		!strings.Contains(stalled.Message, "spec.versions[gateway]") {
		t.Errorf("Stalled %+v, want True InvalidSpec naming spec.versions[gateway]", stalled)
	}
}

// commitFiles makes the first commit of branch main of an empty bare repository on the
// git server, holding files (path → content), as a person pushing to it does.
func commitFiles(t *testing.T, bare string, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "e2e", Email: "e2e@example.com", When: time.Now()}
	if _, err := wt.Commit("tenants", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{bare}}); err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(&git.PushOptions{RefSpecs: []config.RefSpec{config.RefSpec(head.Name().String() + ":refs/heads/main")}}); err != nil {
		t.Fatal(err)
	}
}
