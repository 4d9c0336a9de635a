package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartValuesLoadAsTheSameEnvironment: the files ChartValues hands the operator's
// chart, mounted as the chart mounts them (one folder) and loaded as the operator loads
// them (LoadDir), are the same environment evactl loaded: the same digest, so the same
// render. An environment whose patch lives in a subfolder, which one ConfigMap cannot
// mount, is refused with the file's name.
func TestChartValuesLoadAsTheSameEnvironment(t *testing.T) {
	for _, name := range []string{"dev", "prod", "airgap"} {
		t.Run(name, func(t *testing.T) {
			env, err := Load(filepath.Join("..", "..", "overlays"), name)
			if err != nil {
				t.Fatal(err)
			}
			values, err := env.ChartValues()
			if err != nil {
				t.Fatal(err)
			}
			if values["env"] != name {
				t.Fatalf("env: %v", values["env"])
			}
			mount := t.TempDir()
			for file, content := range values["environmentFiles"].(map[string]any) {
				mustWrite(t, filepath.Join(mount, file), content.(string))
			}
			mounted, err := LoadDir(mount, name)
			if err != nil {
				t.Fatal(err)
			}
			if mounted.Digest != env.Digest {
				t.Fatalf("the mounted environment has digest %s, evactl's %s", mounted.Digest, env.Digest)
			}
		})
	}
	overlays := t.TempDir()
	dir := filepath.Join(overlays, "dev", "tenant")
	if err := os.MkdirAll(filepath.Join(dir, "patches"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, SettingsFile), testSettings)
	mustWrite(t, filepath.Join(dir, KustomizationFile), "patches:\n- path: patches/p.yaml\n  target: {kind: Ingress}\n")
	mustWrite(t, filepath.Join(dir, "patches", "p.yaml"), "metadata: {annotations: {a: b}}\n")
	env, err := Load(overlays, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.ChartValues(); err == nil || !strings.Contains(err.Error(), "patches/p.yaml") {
		t.Fatalf("a patch in a subfolder: %v", err)
	}
}
