package airgap

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"strings"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func buildOverlay(t *testing.T, env string) string {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "overlays", env))
	if err != nil {
		t.Fatalf("kustomize build overlays/%s: %v", env, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestAirgapOverlayUsesTheMirrorByDigest builds overlays/airgap as `kubectl kustomize`
// would: every image must come from the mirror and be pinned by digest.
func TestAirgapOverlayUsesTheMirrorByDigest(t *testing.T) {
	out := buildOverlay(t, "airgap")
	images := ImagesInManifests([]byte(out))
	if len(images) == 0 {
		t.Fatal("no images in the airgap overlay")
	}
	for _, img := range images {
		if !strings.HasPrefix(img, "registry.eva.internal/") || !strings.Contains(img, "@sha256:") {
			t.Errorf("image %q is not a digest reference to the mirror", img)
		}
	}
	for _, want := range []string{"--env=airgap", "name: eva-environment", "medium: Memory", "metadata.annotations['eva.aidonow.com/operator-version']"} {
		if !strings.Contains(out, want) {
			t.Errorf("airgap overlay lacks %q", want)
		}
	}
}

func TestOverlaysBuild(t *testing.T) {
	for _, env := range []string{"dev", "prod"} {
		out := buildOverlay(t, env)
		if !strings.Contains(out, "--env="+env) || !strings.Contains(out, "kind: CustomResourceDefinition") {
			t.Errorf("overlays/%s: environment or CRD missing", env)
		}
	}
}

// TestAirgapTenantBundlesUseTheMirror renders a tenant for the air-gap environment: its
// module releases take their images from the mirror by digest, and their charts from
// the mirror's chart source.
func TestAirgapTenantBundlesUseTheMirror(t *testing.T) {
	env, err := overlay.Load(filepath.Join("..", "..", "overlays"), "airgap")
	if err != nil {
		t.Fatal(err)
	}
	// The air-gap environment installs only charts pinned by digest: those of the
	// charts' published.yaml (one made up here per catalog version).
	catalog := tenant.DefaultCatalog()
	published := &chartrepo.Lock{}
	for _, m := range catalog.Modules {
		sum := sha256.Sum256([]byte(m.Chart + "@" + m.Version))
		digest := "sha256:" + hex.EncodeToString(sum[:])
		published.Add(m.Chart, chartrepo.Published{Version: m.Version, Digest: digest, Archive: digest})
	}
	if _, err := (&render.Renderer{Catalog: catalog, Env: env}).Bundle(&evav1.EvaTenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "airgap"},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: "AIRGAP", Tier: evav1.TierEnterprise, SeedsVersion: "seeds-1"},
	}); err == nil || !strings.Contains(err.Error(), "has no digest") {
		t.Errorf("a render without published digests: %v, want refused", err)
	}
	r := &render.Renderer{Catalog: catalog, Env: env, Charts: published}
	tn := &evav1.EvaTenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "airgap"},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: "AIRGAP", Tier: evav1.TierEnterprise, SeedsVersion: "seeds-1"},
	}
	b, err := r.Bundle(tn)
	if err != nil {
		t.Fatal(err)
	}
	manifest, _ := b.Manifest()
	for _, img := range ImagesInManifests(manifest) {
		if !strings.HasPrefix(img, "registry.eva.internal/") || !strings.Contains(img, "@sha256:") {
			t.Errorf("bundle image %q is not the mirror by digest", img)
		}
	}
	// The charts come from the mirror too, through the tenant's own chart sources, each
	// pinned to its published digest.
	if url := env.Settings.ChartSource.URL; !strings.HasPrefix(url, "oci://registry.eva.internal/") {
		t.Errorf("chart source %q is not the mirror", url)
	}
	sources := 0
	for _, o := range b.ObjectsOfKind("OCIRepository") {
		sources++
		spec := o["spec"].(map[string]any)
		ref, _ := spec["ref"].(map[string]any)
		if digest, _ := ref["digest"].(string); !strings.HasPrefix(spec["url"].(string), "oci://registry.eva.internal/") || !strings.HasPrefix(digest, "sha256:") {
			t.Errorf("chart source %v: not the mirror by digest", spec)
		}
	}
	if sources != len(catalog.ModulesOf(evav1.TierEnterprise)) {
		t.Errorf("%d chart sources for the Enterprise tier's modules", sources)
	}
	if !strings.Contains(string(manifest), "url: "+env.Settings.ChartSource.URL) {
		t.Error("the bundle holds no chart source pointing at the mirror")
	}
	for _, rel := range chartcheck.ReleasesIn(b.Code, b.Objects()) {
		img, _ := rel.Values["image"].(map[string]any)
		repo, _ := img["repository"].(string)
		if !strings.HasPrefix(repo, "registry.eva.internal/aidonow/eva-"+rel.Module) || img["digest"] == nil {
			t.Errorf("release %s: image %v is not the mirror by digest", rel.Module, img)
		}
	}
}
