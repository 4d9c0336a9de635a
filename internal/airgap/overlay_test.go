package airgap

import (
	"path/filepath"
	"strings"
	"testing"

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
