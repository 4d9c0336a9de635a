package render

import (
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/shard"
)

// TestFluxShardKeyOnFluxObjectsOnly: with fluxShards, every Flux object of a tenant (its
// HelmReleases, its own OCIRepository of each module chart, its two Kustomizations)
// carries the tenant's shard key, and nothing else does; without it, nothing carries
// one. (With a shared chart source, the HelmCharts helm-controller makes carry it too:
// TestSharedChartSourceShardsTheHelmCharts.)
func TestFluxShardKeyOnFluxObjectsOnly(t *testing.T) {
	fluxKinds := map[string]bool{"HelmRelease": true, "OCIRepository": true, "Kustomization": true}
	for _, tc := range []struct {
		name   string
		shards *overlay.FluxShards
		tenant *evav1.EvaTenant
		want   string
	}{
		{"pinned", &overlay.FluxShards{Shards: []string{"shard1"}, Assign: map[string]string{"ACMECO": "shard2"}}, tenantFor("ACMECO", withTier(evav1.TierEnterprise)), "shard2"},
		{"hashed", &overlay.FluxShards{Shards: []string{"shard1"}}, tenantFor("ACMECO"), "shard1"},
		{"operator shard", &overlay.FluxShards{Shards: []string{"shard1"}, FollowOperatorShard: true},
			func() *evav1.EvaTenant {
				tn := tenantFor("ACMECO")
				tn.Labels = map[string]string{shard.Label: "a"}
				return tn
			}(), "a"},
		{"no sharding", nil, tenantFor("ACMECO"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderer(t)
			env := *r.Env
			env.Settings.FluxShards = tc.shards
			env.Settings.ChartSource.URL, env.Settings.ChartSource.Namespace = "oci://registry.example.com/charts", ""
			r.Env = &env
			b, err := r.Bundle(tc.tenant)
			if err != nil {
				t.Fatal(err)
			}
			objects := b.Objects()
			for _, k := range r.FluxKustomizations(tc.tenant) {
				objects = append(objects, map[string]any{"kind": k.Kind, "metadata": map[string]any{"name": k.Name, "labels": toAny(k.Labels)}})
			}
			seen := map[string]int{}
			for _, o := range objects {
				kind := o["kind"].(string)
				meta, _ := o["metadata"].(map[string]any)
				labels, _ := meta["labels"].(map[string]any)
				got, _ := labels[overlay.FluxShardKey].(string)
				want := ""
				if fluxKinds[kind] {
					want = tc.want
					seen[kind]++
				}
				if got != want {
					t.Errorf("%s %v: shard key %q, want %q", kind, meta["name"], got, want)
				}
			}
			if seen["HelmRelease"] == 0 || seen["OCIRepository"] != seen["HelmRelease"] || seen["Kustomization"] != 2 {
				t.Errorf("Flux objects rendered: %v; want HelmReleases, an OCIRepository each, two Kustomizations", seen)
			}
		})
	}
}

// TestSharedChartSourceShardsTheHelmCharts: with the platform's shared chart source,
// each release's HelmChart (which helm-controller makes) carries the tenant's shard key,
// so that the shard's source-controller builds it.
func TestSharedChartSourceShardsTheHelmCharts(t *testing.T) {
	r := sharedChartsRenderer(t)
	env := *r.Env
	env.Settings.FluxShards = &overlay.FluxShards{Shards: []string{"shard1"}}
	r.Env = &env
	b, err := r.Bundle(tenantFor("ACMECO"))
	if err != nil {
		t.Fatal(err)
	}
	releases := 0
	for _, o := range b.Objects() {
		if o["kind"] != "HelmRelease" {
			continue
		}
		releases++
		chart, _ := o["spec"].(map[string]any)["chart"].(map[string]any)
		chartMeta, _ := chart["metadata"].(map[string]any)
		chartLabels, _ := chartMeta["labels"].(map[string]any)
		if got, _ := chartLabels[overlay.FluxShardKey].(string); got != "shard1" {
			t.Errorf("HelmRelease %v: its HelmChart's shard key %q, want shard1", o["metadata"].(map[string]any)["name"], got)
		}
	}
	if releases == 0 {
		t.Fatal("no HelmRelease rendered")
	}
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
