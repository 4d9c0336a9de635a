package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecondDocumentRefused: a second YAML document in a tenant overlay's
// kustomization.yaml or in environment.yaml is refused with the file, line and column
// where it starts; it used to be dropped without a word. A separator alone is not a
// document.
func TestSecondDocumentRefused(t *testing.T) {
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\npatches: []\n"
	for _, c := range []struct{ name, file, body, want string }{
		{"kustomization", KustomizationFile, kustomization + "---\ncommonLabels: {team: a}\n",
			KustomizationFile + ":5:1: a second YAML document"},
		{"settings", SettingsFile, minimalSettings + "---\ndomain: other.com\n", SettingsFile + ":6:1: a second YAML document"},
		{"trailing separator", KustomizationFile, "---\n" + kustomization + "---\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "dev", "tenant")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{SettingsFile: minimalSettings, KustomizationFile: kustomization}
			files[c.file] = c.body
			for name, body := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(root, "dev")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
