package cli

import (
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
	code, out = runEvactl(t, append(imagesArgs(file), "-o", "yaml")...)
	if code != ExitInvalid || !strings.Contains(out, "valid: false") || !strings.Contains(out, "chart: eva-forge") {
		t.Fatalf("images verify -o yaml: exit %d\n%s", code, out)
	}
}

func TestImagesPinAndMirrorCommands(t *testing.T) {
	src := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer src.Close()
	dst := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer dst.Close()
	host := strings.TrimPrefix(src.URL, "http://")
	ref, _ := name.ParseReference(host+"/eva/crm:1.0.0", name.Insecure)
	img, _ := random.Image(256, 1)
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "images.txt")
	_ = os.WriteFile(file, []byte(host+"/eva/crm:1.0.0@sha256:PLACEHOLDER\n"), 0o644)
	if code, out := runEvactl(t, "images", "pin", "--file", file, "--insecure"); code != ExitOK {
		t.Fatalf("pin: exit %d\n%s", code, out)
	}
	to := strings.TrimPrefix(dst.URL, "http://") + "/mirror"
	if code, out := runEvactl(t, "images", "mirror", "--file", file, "--to", to, "--insecure"); code != ExitOK || !strings.Contains(out, "[1/1]") {
		t.Fatalf("mirror: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(file)
	_ = os.WriteFile(file, append(data, []byte("\n"+host+"/eva/gone:1.0.0@sha256:"+strings.Repeat("1", 64)+"\n")...), 0o644)
	code, out := runEvactl(t, "images", "mirror", "--file", file, "--to", to, "--insecure")
	if code != ExitInvalid || !strings.Contains(out, "1 of 2 copies failed") || !strings.Contains(out, "eva/gone") {
		t.Fatalf("mirror with a missing image: exit %d\n%s", code, out)
	}
	// -o json says the same of each image, the failure included, on standard output alone.
	code, stdout, all := runEvactlStdout(t, "images", "mirror", "--file", file, "--to", to, "--insecure", "-o", "json")
	var rep artifactReport
	if code != ExitInvalid || json.Unmarshal(stdout, &rep) != nil || len(rep.Items) != 2 {
		t.Fatalf("mirror -o json with a missing image: exit %d\n%s", code, all)
	}
	for _, it := range rep.Items {
		if gone := strings.Contains(it.From, "eva/gone"); gone == (it.Error == "") || !strings.HasPrefix(it.Ref, to+"/eva/") {
			t.Errorf("mirror -o json: %+v", it)
		}
	}
}
