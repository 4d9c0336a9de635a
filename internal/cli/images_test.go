package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func imagesArgs(file string) []string {
	return []string{"images", "verify", "--file", file, "--charts", filepath.Join(repoRoot, "charts"), "--overlays", filepath.Join(repoRoot, "overlays")}
}

func TestImagesVerify(t *testing.T) {
	// The repository's list still has placeholders: refused, line by line.
	code, out := runEvactl(t, imagesArgs(filepath.Join(repoRoot, "images.txt"))...)
	if code != ExitInvalid || !strings.Contains(out, "images.txt:6: ghcr.io/aidonow/eva-operator:0.1.0 has a PLACEHOLDER digest") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// Pinned, it passes; with the forge image left out, the chart is named.
	data, _ := os.ReadFile(filepath.Join(repoRoot, "images.txt"))
	pinned := strings.ReplaceAll(string(data), "sha256:PLACEHOLDER", "sha256:"+strings.Repeat("ab", 32))
	file := filepath.Join(t.TempDir(), "images.txt")
	if err := os.WriteFile(file, []byte(pinned), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runEvactl(t, imagesArgs(file)...); code != ExitOK {
		t.Fatalf("pinned list: exit %d\n%s", code, out)
	}
	var kept []string
	for _, l := range strings.Split(pinned, "\n") {
		if !strings.Contains(l, "eva-forge") {
			kept = append(kept, l)
		}
	}
	_ = os.WriteFile(file, []byte(strings.Join(kept, "\n")), 0o644)
	code, out = runEvactl(t, imagesArgs(file)...)
	if code != ExitInvalid || !strings.Contains(out, "chart eva-forge: image ghcr.io/aidonow/eva-forge:0.6.0 is not listed") {
		t.Fatalf("missing chart image: exit %d\n%s", code, out)
	}
}
