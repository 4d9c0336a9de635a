package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	git "github.com/go-git/go-git/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/testcluster"
)

// environment copies the suite's dev environment (its charts from the suite's
// registry) with some settings changed (another Flux source, a shorter release timeout)
// and returns the folder to pass as --overlays; the environment keeps the name dev.
func environment(t *testing.T, settings map[string]any) string {
	t.Helper()
	root := t.TempDir()
	dst := filepath.Join(root, "dev", "tenant")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(overlays, "dev", "tenant"))); err != nil {
		t.Fatal(err)
	}
	if err := setSettings(filepath.Join(dst, overlay.SettingsFile), settings); err != nil {
		t.Fatal(err)
	}
	return root
}

// setSettings replaces top-level settings of an environment.yaml.
func setSettings(file string, settings map[string]any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return err
	}
	for k, v := range settings {
		m[k] = v
	}
	if data, err = yaml.Marshal(m); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// gitOpsSource names the Flux source an environment's tenant Kustomizations read.
func gitOpsSource(kind, name string) map[string]any {
	return map[string]any{"gitopsSource": map[string]any{"kind": kind, "name": name, "namespace": testcluster.FluxNamespace}}
}

// newGitRepository creates an empty bare repository on the git server and returns its
// URL.
func newGitRepository(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(gitRoot, name)
	if _, err := git.PlainInit(dir, true); err != nil {
		t.Fatal(err)
	}
	return gitSrv.URL + "/" + name
}

// bootstrapSource creates what a platform team creates once per environment: the Flux
// source of the published tree (a GitRepository on branch main, or an OCIRepository of
// tag ref on the plain-HTTP registry), fetched every interval, and the root
// Kustomization applying it, both named name in flux-system.
func bootstrapSource(ctx context.Context, kind, name, url, ref, interval string) error {
	return bootstrapSourceOn(ctx, cluster.Client, kind, name, url, ref, interval, "./")
}

// bootstrapSourceOn is bootstrapSource on cluster c, the root Kustomization applying
// the folder dir of the tree (a cell's).
func bootstrapSourceOn(ctx context.Context, c client.Client, kind, name, url, ref, interval, dir string) error {
	var source string
	switch kind {
	case "GitRepository":
		source = fmt.Sprintf("  url: %s\n  ref:\n    branch: %s\n", url, ref)
	case "OCIRepository":
		source = fmt.Sprintf("  url: %s\n  ref:\n    tag: %s\n  insecure: true\n", url, ref)
	default:
		return fmt.Errorf("source kind %s", kind)
	}
	return applyYAMLOn(ctx, c, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: %[1]s
metadata:
  name: %[2]s
  namespace: %[3]s
spec:
  interval: %[5]s
%[4]s---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %[2]s
  namespace: %[3]s
spec:
  interval: 30s
  path: %[6]s
  prune: true
  sourceRef:
    kind: %[1]s
    name: %[2]s
`, kind, name, testcluster.FluxNamespace, source, interval, dir))
}

// tenantNamespace creates the namespace one test's EvaTenants live in. Each test runs
// its own operator process accepting tenants only from there (--tenant-namespaces), so
// tests run in parallel, and a SIGKILL in one never touches another.
func tenantNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cluster.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}
