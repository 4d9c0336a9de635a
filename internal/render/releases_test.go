package render

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
)

// TestTenantChangeRetriesGivenUpReleases: every release carries a reconcile and reset
// request naming the tenant's spec, the same for every render of an unchanged tenant
// (no write, no reconcile) and new for any change to it, even one that changes another
// module only: a release that failed because of another (a quota filled by crm's pods
// while itsm installed) is retried when its owner fixes crm.
func TestTenantChangeRetriesGivenUpReleases(t *testing.T) {
	r := renderer(t)
	requests := func(tn *evav1.EvaTenant) map[string][2]string {
		b, err := r.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]string{}
		for _, o := range b.Objects() {
			if o["kind"] != "HelmRelease" {
				continue
			}
			meta := o["metadata"].(map[string]any)
			a := meta["annotations"].(map[string]any)
			out[meta["name"].(string)] = [2]string{fmt.Sprint(a["reconcile.fluxcd.io/requestedAt"]), fmt.Sprint(a["reconcile.fluxcd.io/resetAt"])}
		}
		return out
	}
	before := requests(tenantFor("ACMECO"))
	if again := requests(tenantFor("ACMECO")); !maps.Equal(before, again) {
		t.Fatalf("an unchanged tenant asks again: %v then %v", before, again)
	}
	changed := tenantFor("ACMECO")
	changed.Spec.HelmValues = map[string]apiextensionsv1.JSON{"crm": {Raw: []byte(`{"replicaCount":1}`)}}
	after := requests(changed)
	if len(before) < 2 {
		t.Fatalf("want several releases, got %v", before)
	}
	for name, req := range after {
		if req[0] == "<nil>" || req[0] != req[1] {
			t.Errorf("%s: requestedAt %q, resetAt %q: want one token in both", name, req[0], req[1])
		}
		if req == before[name] {
			t.Errorf("%s: the request did not change with the tenant (%q): a release given up on would stay so", name, req[0])
		}
	}
}

// TestShippedEnvironmentsPinChartsInTheTenantNamespace holds docs/flux-wiring.md's
// claim: every shipped environment takes the module charts from a source Eva renders in
// each tenant's namespace (no reference leaves it, as Flux's lockdown requires), an
// OCIRepository per module chart pinned to the digest charts/published.yaml records.
func TestShippedEnvironmentsPinChartsInTheTenantNamespace(t *testing.T) {
	published, err := chartrepo.ReadLock(filepath.Join("..", "..", "charts", "published.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	catalog := tenant.DefaultCatalog()
	for _, env := range []string{"dev", "prod", "airgap"} {
		t.Run(env, func(t *testing.T) {
			e, err := overlay.Load(filepath.Join("..", "..", "overlays"), env)
			if err != nil {
				t.Fatal(err)
			}
			r := &Renderer{Catalog: catalog, Env: e, Charts: published}
			for _, tn := range syntheticTenants(4) {
				b, err := r.Bundle(tn)
				if err != nil {
					t.Fatal(err)
				}
				ns := "eva-tenant-" + strings.ToLower(tn.Spec.CapsuleCode)
				sources := map[string]map[string]any{}
				for _, o := range b.ObjectsOfKind("OCIRepository") {
					meta := o["metadata"].(map[string]any)
					sources[fmt.Sprint(meta["namespace"], "/", meta["name"])] = o
				}
				releases := b.ObjectsOfKind("HelmRelease")
				if len(releases) == 0 {
					t.Fatalf("%s renders no HelmRelease", tn.Spec.CapsuleCode)
				}
				for _, hr := range releases {
					checkPinnedChart(t, hr, ns, sources, published)
				}
			}
		})
	}
}

// checkPinnedChart fails unless the release takes its chart from an OCIRepository of
// its own namespace that pins the published digest of the chart's tag.
func checkPinnedChart(t *testing.T, hr map[string]any, ns string, sources map[string]map[string]any, published *chartrepo.Lock) {
	t.Helper()
	meta := hr["metadata"].(map[string]any)
	spec := hr["spec"].(map[string]any)
	ref, ok := spec["chartRef"].(map[string]any)
	if !ok {
		t.Errorf("%s/%s takes its chart by spec.chart, not from a source Eva renders: %v", ns, meta["name"], spec["chart"])
		return
	}
	if ref["kind"] != "OCIRepository" || (ref["namespace"] != nil && ref["namespace"] != ns) {
		t.Errorf("%s/%s: chartRef %v leaves the tenant namespace or is no OCIRepository", ns, meta["name"], ref)
		return
	}
	src, ok := sources[ns+"/"+fmt.Sprint(ref["name"])]
	if !ok {
		t.Errorf("%s/%s: chartRef names %v, which the bundle does not render", ns, meta["name"], ref["name"])
		return
	}
	srcSpec := src["spec"].(map[string]any)
	pin := srcSpec["ref"].(map[string]any)
	chart := path.Base(fmt.Sprint(srcSpec["url"]))
	want, ok := published.Digest(chart, strings.ReplaceAll(fmt.Sprint(pin["tag"]), "_", "+"))
	if !ok || pin["digest"] != want {
		t.Errorf("%s/%s: source %v pins digest %v, want published.yaml's %q for %s %v", ns, meta["name"], ref["name"], pin["digest"], want, chart, pin["tag"])
	}
}
