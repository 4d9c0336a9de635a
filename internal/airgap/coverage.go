package airgap

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/render"
)

// ChartImages renders every module chart with the values every tier gives it (through
// the real renderer, so catalog, tier and identity values all count) and returns each
// image found, with the chart that produced it.
func ChartImages(r *render.Renderer, charts *chartcheck.Checker) (map[string]string, error) {
	images := map[string]string{}
	for _, tier := range evav1.Tiers {
		if _, ok := r.Catalog.Tiers[tier]; !ok {
			continue
		}
		t := &evav1.EvaTenant{
			TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: "imgchk"},
			Spec:       evav1.EvaTenantSpec{CapsuleCode: "IMGCHK", Tier: tier, SeedsVersion: "images"},
		}
		b, err := r.Bundle(t)
		if err != nil {
			return nil, err
		}
		for _, rel := range chartcheck.ReleasesIn(b.Code, b.Objects()) {
			out, err := charts.Render(rel)
			if err != nil {
				return nil, fmt.Errorf("chart %s for tier %s: %w", rel.Chart, tier, err)
			}
			names := make([]string, 0, len(out))
			for n := range out {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				for _, img := range ImagesInManifests([]byte(out[n])) {
					images[img] = rel.Chart
				}
			}
		}
		manifest, err := b.Manifest()
		if err != nil {
			return nil, err
		}
		for _, img := range ImagesInManifests(manifest) {
			images[img] = "seed Job (environment " + r.Env.Name + ")"
		}
	}
	return images, nil
}
