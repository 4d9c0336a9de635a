package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverlayRefusesWhatItDoesNotApply: every kustomize field but patches (and their
// path, patch and target) is refused with the file, line, column and field, where it
// used to be accepted and do nothing.
func TestOverlayRefusesWhatItDoesNotApply(t *testing.T) {
	head := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
	cases := []struct{ name, body, want string }{
		{"commonLabels", "commonLabels: {team: a}\n", ":3:1: commonLabels: not applied by Eva"},
		{"labels", "labels:\n- pairs: {team: a}\n", ":3:1: labels: not applied by Eva"},
		{"commonAnnotations", "commonAnnotations: {a: b}\n", ":3:1: commonAnnotations: not applied"},
		{"replicas", "replicas:\n- name: crm\n  count: 3\n", ":3:1: replicas: not applied"},
		{"replacements", "replacements: []\n", ":3:1: replacements: not applied"},
		{"transformers", "transformers: [missing.yaml]\n", ":3:1: transformers: not applied"},
		{"resources", "resources: [x.yaml]\n", "may only hold `patches`"},
		{"a merge key", "<<: {namespace: other}\n", ":3:1: <<: not applied"},
		{"patch options", "patches:\n- patch: '{kind: Ingress, metadata: {name: x}}'\n  options: {allowNameChange: true}\n",
			":5:3: patches[0].options: not applied by Eva; a patch has path, patch, target"},
		{"kind", "patches: []\n", ":2:7: kind: \"Component\": a tenant overlay is a Kustomization (kind: Kustomization)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			doc := head + c.body
			if c.name == "kind" {
				doc = strings.Replace(doc, "kind: Kustomization", "kind: Component", 1)
			}
			if err := os.WriteFile(filepath.Join(dir, KustomizationFile), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := openOverlayDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer o.close()
			_, err = loadPatches(o, func([]byte) {})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), KustomizationFile+":") {
				t.Fatalf("got %v, want an error naming %s and %q", err, KustomizationFile, c.want)
			}
		})
	}
}

// TestOverlayFieldsAcceptTheShippedOverlays: the environments' own overlays hold only
// what Eva applies.
func TestOverlayFieldsAcceptTheShippedOverlays(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "overlays", "*", "tenant", KustomizationFile))
	more, _ := filepath.Glob(filepath.Join("..", "cli", "testdata", "overlays", "*", "tenant", KustomizationFile))
	paths = append(paths, more...)
	if len(paths) < 4 {
		t.Fatalf("found %d overlays: %v", len(paths), paths)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkFields(p, data); err != nil {
			t.Errorf("%v", err)
		}
	}
}
