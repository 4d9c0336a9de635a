//go:build unix

package overlay

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testSettings is a minimal valid environment.yaml.
const testSettings = "domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\n"

// secretText stands for a credential a patch path must never reach nor echo.
const secretText = "https://x-access-token:ghs_SECRET@github.com"

// writeOverlay makes an overlay folder <tmp>/overlays/dev/tenant holding
// environment.yaml and a kustomization with one patch read from patchPath, and a
// credentials file beside the overlays folder. It returns the overlays folder and
// the credentials file.
func writeOverlay(t *testing.T, patchPath string) (overlays, secret string) {
	t.Helper()
	tmp := t.TempDir()
	overlays = filepath.Join(tmp, "overlays")
	dir := filepath.Join(overlays, "dev", "tenant")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(tmp, "config.json")
	mustWrite(t, secret, secretText)
	mustWrite(t, filepath.Join(dir, SettingsFile), testSettings)
	kust := "patches:\n- path: " + strings.ReplaceAll(patchPath, "SECRET", secret) +
		"\n  target: {kind: Ingress}\n"
	mustWrite(t, filepath.Join(dir, KustomizationFile), kust)
	return overlays, secret
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPatchPathConfinedToOverlay: a patch path may only name a regular file inside the
// overlay folder, of bounded size, holding a YAML mapping or list. Anything else is
// refused at load with the kustomization file, the patches[i].path field and the
// reason, never with the file's content, and without blocking on a FIFO.
func TestPatchPathConfinedToOverlay(t *testing.T) {
	for name, tc := range map[string]struct {
		path  string
		setup func(t *testing.T, dir, secret string)
		want  string
	}{
		"parent escape": {path: "../../../config.json", want: "outside the overlay folder"},
		"absolute":      {path: "SECRET", want: "outside the overlay folder"},
		"symlink out": {path: "p.yaml", want: "outside the overlay folder", setup: func(t *testing.T, dir, secret string) {
			if err := os.Symlink(secret, filepath.Join(dir, "p.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		"relative symlink out": {path: "p.yaml", want: "outside the overlay folder", setup: func(t *testing.T, dir, _ string) {
			if err := os.Symlink("../../../config.json", filepath.Join(dir, "p.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		"symlinked folder out": {path: "sub/config.json", want: "outside the overlay folder", setup: func(t *testing.T, dir, secret string) {
			if err := os.Symlink(filepath.Dir(secret), filepath.Join(dir, "sub")); err != nil {
				t.Fatal(err)
			}
		}},
		"hard link out": {path: "p.yaml", want: "is a hard link (2 links)", setup: func(t *testing.T, dir, secret string) {
			if err := os.Link(secret, filepath.Join(dir, "p.yaml")); err != nil {
				t.Skip(err)
			}
		}},
		"scalar file": {path: "p.yaml", want: "is not a YAML mapping", setup: func(t *testing.T, dir, _ string) {
			mustWrite(t, filepath.Join(dir, "p.yaml"), secretText+"\n")
		}},
		"fifo": {path: "p.yaml", want: "not a regular file", setup: func(t *testing.T, dir, _ string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "p.yaml"), 0o644); err != nil {
				t.Skip(err)
			}
		}},
		"device": {path: "../../../../../../../../../dev/null", want: "outside the overlay folder"},
		"folder": {path: "sub", want: "not a regular file", setup: func(t *testing.T, dir, _ string) {
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		"too large": {path: "p.yaml", want: "larger than", setup: func(t *testing.T, dir, _ string) {
			mustWrite(t, filepath.Join(dir, "p.yaml"), "a: "+strings.Repeat("x", maxOverlayFile)+"\n")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			overlays, secret := writeOverlay(t, tc.path)
			if tc.setup != nil {
				tc.setup(t, filepath.Join(overlays, "dev", "tenant"), secret)
			}
			err := loadWithin(t, overlays)
			if err == nil {
				t.Fatalf("Load succeeded, want an error %q", tc.want)
			}
			msg := err.Error()
			for _, want := range []string{KustomizationFile, "patches[0].path", tc.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if strings.Contains(msg, "ghs_SECRET") {
				t.Errorf("error quotes the file's content: %q", msg)
			}
		})
	}
}

// loadWithin loads environment dev from overlays, failing the test if it blocks.
func loadWithin(t *testing.T, overlays string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		e, err := Load(overlays, "dev")
		if err == nil && len(e.Patches) > 0 {
			// Loaded: applying the patch must not echo what it read either.
			if _, aerr := Apply(e.Patches, []map[string]any{ingress()}); aerr != nil && strings.Contains(aerr.Error(), "ghs_SECRET") {
				t.Errorf("applying echoes the patch file: %v", aerr)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Load blocked")
		return nil
	}
}

// TestLoadDirConfigMapMount: the operator reads its environment from a ConfigMap
// volume, whose files are symlinks into a timestamped folder inside the mount; those
// stay inside the folder and load.
func TestLoadDirConfigMapMount(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2024_01_01_00_00_00.1")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(data, SettingsFile), testSettings)
	mustWrite(t, filepath.Join(data, KustomizationFile), "patches:\n- path: p.yaml\n  target: {kind: Ingress}\n")
	mustWrite(t, filepath.Join(data, "p.yaml"), "metadata: {annotations: {a: b}}\n")
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{SettingsFile, KustomizationFile, "p.yaml"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	e, err := LoadDir(dir, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Patches) != 1 || e.Settings.Domain != "a.com" {
		t.Fatalf("loaded %d patches, domain %q", len(e.Patches), e.Settings.Domain)
	}
}

// TestOperatorEnvironmentConfined: the operator's --environment-dir is confined the
// same way: a patch path cannot reach the service-account token beside the mount.
func TestOperatorEnvironmentConfined(t *testing.T) {
	overlays, _ := writeOverlay(t, "../../../config.json")
	_, err := LoadDir(filepath.Join(overlays, "dev", "tenant"), "dev")
	if err == nil || !strings.Contains(err.Error(), "outside the overlay folder") {
		t.Fatalf("LoadDir: %v, want a patch outside the overlay folder refused", err)
	}
}

// TestSettingsFileConfined: environment.yaml and kustomization.yaml are read through
// the same confinement: a symlink out of the folder is refused.
func TestSettingsFileConfined(t *testing.T) {
	for _, f := range []string{SettingsFile, KustomizationFile} {
		t.Run(f, func(t *testing.T) {
			overlays, secret := writeOverlay(t, "p.yaml")
			dir := filepath.Join(overlays, "dev", "tenant")
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(secret, filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
			_, err := Load(overlays, "dev")
			if err == nil || !strings.Contains(err.Error(), "outside the overlay folder") || strings.Contains(err.Error(), "ghs_SECRET") {
				t.Fatalf("Load: %v, want %s outside the overlay folder refused", err, f)
			}
		})
	}
}

// TestEnvironmentFolderConfined: overlays/<env> is read inside the overlays folder: an
// environment folder that is a symlink to elsewhere is refused.
func TestEnvironmentFolderConfined(t *testing.T) {
	overlays, _ := writeOverlay(t, "p.yaml")
	elsewhere := filepath.Join(filepath.Dir(overlays), "elsewhere")
	if err := os.Rename(filepath.Join(overlays, "dev"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(overlays, "dev")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(overlays, "dev")
	if err == nil || !strings.Contains(err.Error(), "outside the overlay folder") {
		t.Fatalf("Load: %v, want the environment folder outside the overlays folder refused", err)
	}
}
