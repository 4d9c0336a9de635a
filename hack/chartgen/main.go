// Command chartgen keeps the operator's Helm chart in step with base/: it copies the
// CRDs into the chart's crds/, every other base resource but the Namespace and the
// Deployment into templates/ (the namespace eva-system becoming the release's), and each
// environment's tenant overlay into files/environments/. `make manifests` runs it after
// controller-gen, so the chart's RBAC is exactly what controller-gen generated; the
// Deployment is the chart's own template, its flags from values. It also records the
// module charts' digests, as pushing them publishes them, in charts/published.yaml: the
// one list evactl and the operator of a release both carry (embedded) and pin.
//
//	go run ./hack/chartgen -base base -overlays overlays -charts charts -chart deploy/charts/eva-operator
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/chartrepo"
	tenantpkg "github.com/aidonow/eva/internal/tenant"
)

// baseNamespace is the namespace base/ installs into.
const baseNamespace = "eva-system"

// handWritten are the base resources the chart renders from its own templates.
var handWritten = []string{"manager/namespace.yaml", "manager/deployment.yaml"}

func main() {
	base := flag.String("base", "base", "the operator's kustomize base")
	overlays := flag.String("overlays", "overlays", "the environment overlays")
	charts := flag.String("charts", "charts", "the module charts")
	chart := flag.String("chart", "deploy/charts/eva-operator", "the operator's chart")
	flag.Parse()
	if err := generate(*base, *overlays, *chart); err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
	if err := publishedCharts(*charts); err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}

// publishedCharts adds each module chart's version, with the digests pushing it
// publishes, to the charts' published.yaml, refusing a published version whose content
// changed.
func publishedCharts(charts string) error {
	lockPath := filepath.Join(charts, chartrepo.LockFile)
	lock, err := chartrepo.ReadLockIfPresent(lockPath)
	if err != nil {
		return err
	}
	if lock == nil {
		lock = &chartrepo.Lock{}
	}
	archives, err := chartrepo.PackageAll(charts)
	if err != nil {
		return err
	}
	for _, a := range archives {
		if err := lock.Conflict(a); err != nil {
			return err
		}
		p, err := chartrepo.PublishedOf(a)
		if err != nil {
			return err
		}
		lock.Add(a.Name, p)
	}
	return lock.Write(lockPath)
}

func generate(base, overlays, chart string) error {
	data, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		return err
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s/kustomization.yaml: %w", base, err)
	}
	for _, dir := range []string{"crds", "templates/generated", "files/environments"} {
		if err := os.RemoveAll(filepath.Join(chart, dir)); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(chart, dir), 0o755); err != nil {
			return err
		}
	}
	for _, res := range k.Resources {
		if slices.Contains(handWritten, res) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(base, res))
		if err != nil {
			return err
		}
		if strings.HasPrefix(res, "crd/") {
			if err := os.WriteFile(filepath.Join(chart, "crds", filepath.Base(res)), src, 0o644); err != nil {
				return err
			}
			continue
		}
		if bytes.Contains(src, []byte("{{")) {
			return fmt.Errorf("%s/%s holds {{, which Helm would read as a template", base, res)
		}
		out := "# Generated from base/" + res + " by hack/chartgen (make manifests): edit base/, not this file.\n" +
			serviceAccountAnnotations(strings.ReplaceAll(string(src), baseNamespace, "{{ .Release.Namespace }}"))
		name := strings.ReplaceAll(res, "/", "_")
		if err := os.WriteFile(filepath.Join(chart, "templates/generated", name), []byte(out), 0o644); err != nil {
			return err
		}
	}
	// The built-in reserved codes, which the chart's eva-tenant-ingress joins with the
	// environment's (templates/tenant-ingress.yaml), as overlay.FenceParams does.
	reserved := "# Generated from tenant.ReservedCodes by hack/chartgen (make manifests).\n" + strings.Join(tenantpkg.ReservedCodes, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(chart, "files", "reserved-codes"), []byte(reserved), 0o644); err != nil {
		return err
	}
	envs, err := os.ReadDir(overlays)
	if err != nil {
		return err
	}
	for _, env := range envs {
		tenant := filepath.Join(overlays, env.Name(), "tenant")
		files, err := os.ReadDir(tenant)
		if err != nil {
			continue // not an environment
		}
		dst := filepath.Join(chart, "files/environments", env.Name())
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(tenant, f.Name()))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dst, f.Name()), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// saAnnotations are the chart's serviceAccount.annotations, templated into the
// operator's ServiceAccount.
const saAnnotations = `
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}`

// serviceAccountAnnotations gives the ServiceAccount documents of a manifest (kind
// ServiceAccount, their metadata's namespace line) the chart's annotations.
func serviceAccountAnnotations(manifest string) string {
	docs := strings.Split(manifest, "\n---\n")
	for i, doc := range docs {
		if !strings.Contains(doc, "\nkind: ServiceAccount\n") && !strings.HasPrefix(doc, "kind: ServiceAccount\n") {
			continue
		}
		line := "\n  namespace: {{ .Release.Namespace }}"
		if n := strings.Index(doc, line); n >= 0 {
			docs[i] = doc[:n+len(line)] + saAnnotations + doc[n+len(line):]
		}
	}
	return strings.Join(docs, "\n---\n")
}
