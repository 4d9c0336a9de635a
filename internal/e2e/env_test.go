package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/docsection"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
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
	objects, err := fluxWiring(kind, name, url, ref, interval, dir)
	if err != nil {
		return err
	}
	var text []string
	for _, obj := range objects {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		text = append(text, string(data))
	}
	return applyYAMLOn(ctx, c, strings.Join(text, "---\n"))
}

// fluxWiringPage is the page whose YAML blocks the suite applies as a user does.
var fluxWiringPage = filepath.Join(testenv.RepoRoot(), "docs", "flux-wiring.md")

// fluxWiring is the source of the published tree (a GitRepository or an OCIRepository)
// and the root Kustomization exactly as docs/flux-wiring.md gives them, with only what
// names this suite's servers in place of the page's examples: the source's name, URL,
// ref and interval (the page's secretRef dropped: the suite's git server and registry
// take no credentials; its registry is plain HTTP), and the root's name, path, interval
// and source. Everything else is the page's: change a block there and the suite applies
// the change.
func fluxWiring(kind, name, url, ref, interval, dir string) ([]map[string]any, error) {
	heading := map[string]string{"GitRepository": "The source of the published tree", "OCIRepository": "An OCI artifact instead of a branch"}[kind]
	if heading == "" {
		return nil, fmt.Errorf("source kind %s", kind)
	}
	source, err := docsection.YAMLObject(fluxWiringPage, heading, kind)
	if err != nil {
		return nil, err
	}
	root, err := docsection.YAMLObject(fluxWiringPage, "The root Kustomization", "Kustomization")
	if err != nil {
		return nil, err
	}
	for _, obj := range []map[string]any{source, root} {
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil || obj["spec"] == nil {
			return nil, fmt.Errorf("%s: the %s block has no metadata or spec", fluxWiringPage, obj["kind"])
		}
		meta["name"], meta["namespace"] = name, testcluster.FluxNamespace
	}
	spec := source["spec"].(map[string]any)
	spec["url"], spec["interval"] = url, interval
	delete(spec, "secretRef")
	if kind == "GitRepository" {
		spec["ref"] = map[string]any{"branch": ref}
	} else {
		spec["ref"], spec["insecure"] = map[string]any{"tag": ref}, true
	}
	rootSpec := root["spec"].(map[string]any)
	rootSpec["path"], rootSpec["interval"] = dir, "30s"
	rootSpec["sourceRef"] = map[string]any{"kind": kind, "name": name}
	return []map[string]any{source, root}, nil
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
