package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/aidonow/eva/internal/airgap"
	"github.com/aidonow/eva/internal/registry"
	"github.com/aidonow/eva/internal/testenv"
)

// repoRoot is the repository this package is built in.
const repoRoot = "../.."

// releaseOptions builds testdata/smallbinary, not the operator: what the image test
// checks (layers, labels, user, SBOM, reproducibility, the release into images.txt)
// does not depend on which main package is built, and the operator costs about 40 CPU
// seconds per run to compile and compress for two platforms.
func releaseOptions(t *testing.T) Options {
	t.Helper()
	return Options{
		ModuleDir: repoRoot, Package: "./internal/imagebuild/testdata/smallbinary", ChartsDir: filepath.Join(repoRoot, "charts"),
		Version: "0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", Source: "https://github.com/aidonow/eva",
		Created: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), WorkDir: t.TempDir(),
	}
}

// TestReleaseIsReproducibleComplete builds the operator image from the source, as `make
// image` does, then its linux/amd64 image again, and pushes it to a loopback registry:
// both builds give one digest; each platform's image runs the right static binary as the non-root user
// with the module charts, CA roots and OCI labels; the SBOM is attached as a referrer and
// lists what the binary links; images.txt and the air-gap overlay get the pushed digest,
// after which the release checks find nothing to refuse once the other images are pinned.
func TestReleaseIsReproducibleComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the operator for two platforms")
	}
	ctx := context.Background()
	first, err := Build(ctx, releaseOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	// The second build compiles, links and assembles amd64 again from scratch (the
	// index is a pure function of its platform images and labels, so one platform
	// rebuilt shows whether the build is reproducible; both would double the cost).
	again := releaseOptions(t)
	again.Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	second, err := Build(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := first.Index.Digest()
	amd64First, amd64Second := platformDigest(t, first.Index, "amd64"), platformDigest(t, second.Index, "amd64")
	if amd64First != amd64Second {
		t.Fatalf("same source, two linux/amd64 images: %s and %s", amd64First, amd64Second)
	}
	t.Logf("index %s; linux/amd64 %s, built twice", d1, amd64First)
	checkIndex(t, first.Index)

	// Release into a copy of the files make image edits, against a loopback registry
	// that already holds every other image of images.txt.
	host := testenv.Registry(t)
	reg := registry.Options{Insecure: true}
	dir := t.TempDir()
	imagesFile := filepath.Join(dir, "images.txt")
	overlay := filepath.Join(dir, "kustomization.yaml")
	copyFile(t, filepath.Join(repoRoot, "images.txt"), imagesFile)
	copyFile(t, filepath.Join(repoRoot, "overlays/airgap/kustomization.yaml"), overlay)
	opts := ReleaseOptions{Options: releaseOptions(t), Repository: host + "/aidonow/eva-operator", Registry: reg,
		ImagesFile: imagesFile, AirgapOverlays: []string{overlay}, SBOMFile: filepath.Join(dir, "sbom.cdx.json")}
	released, err := Release(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if released.Pushed.Index.DigestStr() != d1.String() {
		t.Fatalf("pushed %s, built %s", released.Pushed.Index, d1)
	}
	checkSBOM(t, released.Pushed.Index, reg, first)

	text, _ := os.ReadFile(imagesFile)
	entries, problems := airgap.Parse(bytes.NewReader(text))
	var operator *airgap.Entry
	for i, e := range entries {
		if e.Repository == "ghcr.io/aidonow/eva-operator" {
			operator = &entries[i]
		}
	}
	if operator == nil || operator.Digest != d1.String() || operator.Tag != "0.1.0" {
		t.Fatalf("images.txt does not pin the pushed operator image %s:\n%s", d1, text)
	}
	for _, p := range problems {
		if strings.Contains(p.Message, "eva-operator") {
			t.Errorf("images.txt still has a problem with the operator: %s", p)
		}
	}
	overlayText, _ := os.ReadFile(overlay)
	if !strings.Contains(string(overlayText), "digest: "+d1.String()) || released.Synced != 1 {
		t.Fatalf("the air-gap overlay did not get the digest (%d set):\n%s", released.Synced, overlayText)
	}

	// What make release-check refuses: pin the rest against the loopback registry, as
	// `evactl images pin` does, then nothing may be left.
	mirrored := strings.ReplaceAll(string(text), "ghcr.io/", host+"/")
	for _, e := range entries {
		if e.Repository == "ghcr.io/aidonow/eva-operator" {
			continue
		}
		img, _ := random.Image(256, 1)
		ref, _ := name.NewTag(strings.Replace(e.Repository, "ghcr.io", host, 1)+":"+e.Tag, name.Insecure)
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(imagesFile, []byte(mirrored), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := airgap.Pin(ctx, imagesFile, reg); err != nil {
		t.Fatal(err)
	}
	pinned, _ := os.ReadFile(imagesFile)
	if _, problems := airgap.Parse(bytes.NewReader(pinned)); len(problems) > 0 {
		t.Fatalf("images.txt after the release and pin: %v", problems)
	}
	if !strings.Contains(string(pinned), host+"/aidonow/eva-operator:0.1.0@"+d1.String()) {
		t.Fatalf("pinning changed the operator's recorded digest:\n%s", pinned)
	}
}

// platformDigest is the digest of one platform's image in an index.
func platformDigest(t *testing.T, idx v1.ImageIndex, arch string) v1.Hash {
	t.Helper()
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range manifest.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			return d.Digest
		}
	}
	t.Fatalf("no %s image in the index", arch)
	return v1.Hash{}
}

// checkIndex opens every platform's image and checks what it holds.
func checkIndex(t *testing.T, idx v1.ImageIndex) {
	t.Helper()
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range manifest.Manifests {
		platforms = append(platforms, desc.Platform.OS+"/"+desc.Platform.Architecture)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, desc.Platform.Architecture)
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("platforms %v", platforms)
	}
	if manifest.Annotations["org.opencontainers.image.revision"] == "" {
		t.Errorf("the index has no revision annotation: %v", manifest.Annotations)
	}
}

func checkImage(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{BinaryPath}) || cfg.Architecture != arch {
		t.Errorf("%s: user %q, entrypoint %v, architecture %s", arch, cfg.Config.User, cfg.Config.Entrypoint, cfg.Architecture)
	}
	for _, label := range []string{"source", "revision", "version"} {
		if cfg.Config.Labels["org.opencontainers.image."+label] == "" {
			t.Errorf("%s: no %s label in %v", arch, label, cfg.Config.Labels)
		}
	}
	if !slices.Contains(cfg.Config.Env, "CHART_BASE_PATH="+ChartBasePath) {
		t.Errorf("%s: env %v", arch, cfg.Config.Env)
	}
	files := map[string][]byte{}
	modes := map[string]int64{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, _ := io.ReadAll(tr)
			files["/"+h.Name] = data
			modes["/"+h.Name] = h.Mode
		}
	}
	for _, want := range []string{BinaryPath, CABundlePath, "/etc/passwd", ChartBasePath + "/eva-crm/Chart.yaml", ChartBasePath + "/eva-gateway/values.schema.json"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s: no %s in the image", arch, want)
		}
	}
	if modes[BinaryPath]&0o111 == 0 {
		t.Errorf("%s: the binary is not executable (mode %o)", arch, modes[BinaryPath])
	}
	bin, err := elf.NewFile(bytes.NewReader(files[BinaryPath]))
	if err != nil {
		t.Fatalf("%s: the binary is not ELF: %v", arch, err)
	}
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if bin.Machine != wantMachine {
		t.Errorf("%s: the binary is for %s", arch, bin.Machine)
	}
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: the binary is dynamically linked (it has an interpreter)", arch)
		}
	}
	roots := 0
	for rest := files[CABundlePath]; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("%s: CA bundle: %v", arch, err)
		}
		roots++
	}
	if roots < 100 {
		t.Errorf("%s: only %d CA roots", arch, roots)
	}
	if !strings.Contains(string(files["/etc/passwd"]), ":65532:65532:") {
		t.Errorf("%s: no non-root user in /etc/passwd", arch)
	}
}

// checkSBOM finds the SBOM through the referrers of the pushed index and checks that it
// lists the modules the binary links, at the versions go.mod resolves.
func checkSBOM(t *testing.T, index name.Digest, reg registry.Options, built *Result) {
	t.Helper()
	ctx := context.Background()
	refs, err := remote.Referrers(index, reg.RemoteOpts(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	refManifest, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var sbomDesc *v1.Descriptor
	for i, d := range refManifest.Manifests {
		if d.ArtifactType == SBOMMediaType {
			sbomDesc = &refManifest.Manifests[i]
		}
	}
	if sbomDesc == nil {
		t.Fatalf("no %s referrer of %s: %+v", SBOMMediaType, index, refManifest.Manifests)
	}
	artifact, err := remote.Image(index.Context().Digest(sbomDesc.Digest.String()), reg.RemoteOpts(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := artifact.Layers()
	if len(layers) != 1 {
		t.Fatalf("SBOM artifact with %d layers", len(layers))
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var bom cdx.BOM
	if err := json.NewDecoder(rc).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.Metadata == nil || bom.Metadata.Component == nil || !strings.Contains(bom.Metadata.Component.PackageURL, index.DigestStr()[len("sha256:"):]) {
		t.Fatalf("the SBOM does not name the image %s: %+v", index, bom.Metadata)
	}
	components := map[string]string{}
	for _, c := range *bom.Components {
		components[c.Name] = c.Version
	}
	if components["eva-crm"] == "" || components[CABundlePath] == "" || components["stdlib"] == "" {
		t.Errorf("SBOM lacks the charts, the CA bundle or the Go toolchain: %v", components)
	}
	info, err := buildinfo.ReadFile(built.Binaries["linux/arm64"])
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Deps) == 0 {
		t.Fatal("the binary links no module: the SBOM check would check nothing")
	}
	// Every module the binary links, at the version go.mod resolves (one go list for all).
	args := []string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}
	for _, dep := range info.Deps {
		args = append(args, dep.Path)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	resolved := strings.Fields(string(out))
	if len(resolved) != 2*len(info.Deps) {
		t.Fatalf("go list -m of %d modules printed %q", len(info.Deps), out)
	}
	for i := 0; i < len(resolved); i += 2 {
		if path, version := resolved[i], resolved[i+1]; components[path] != version {
			t.Errorf("SBOM lists %s at %q, go.mod resolves %s", path, components[path], version)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
