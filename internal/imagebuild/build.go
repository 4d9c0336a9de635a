// Package imagebuild builds the operator's container image from Go, without a container
// engine: a static binary compiled per platform, the module charts at ChartBasePath, CA
// roots and a non-root user, assembled into an OCI image index with
// go-containerregistry. Every input is pinned (the source tree, the Go toolchain, the CA
// bundle's module version) and every timestamp is the commit's, so the same source
// builds the same digest.
package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	// BinaryPath is the operator binary, the image's entrypoint.
	BinaryPath = "/eva-operator"
	// ChartBasePath is where the module charts are, also set as CHART_BASE_PATH.
	ChartBasePath = "/charts"
	// CABundlePath holds the CA roots in PEM, also set as SSL_CERT_FILE.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// NonRootUser is the user and group the operator runs as (base/manager's
	// runAsUser and runAsGroup).
	NonRootUser = 65532
)

// DefaultPlatforms are the platforms the image index holds.
var DefaultPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Options say what to build.
type Options struct {
	// ModuleDir is the repository root (where go.mod is).
	ModuleDir string
	// Package is the main package, relative to ModuleDir ("./cmd/eva-operator").
	Package string
	// ChartsDir is the folder of module charts copied to ChartBasePath.
	ChartsDir string
	// Platforms to build; DefaultPlatforms when empty.
	Platforms []v1.Platform
	// Version, Revision and Source become the OCI labels and annotations (version,
	// revision, source); Version is also stamped into the binary (main.version).
	Version, Revision, Source string
	// Created is every timestamp in the image: the commit's time, so a rebuild of the
	// same commit gives the same digest.
	Created time.Time
	// WorkDir holds the compiled binaries (a temporary folder when empty).
	WorkDir string
}

// Result is a built image.
type Result struct {
	Index v1.ImageIndex
	// Binaries are the compiled binaries by platform ("linux/amd64"), for the SBOM.
	Binaries map[string]string
}

// Build compiles the binary for every platform and assembles the image index.
func Build(ctx context.Context, opts Options) (*Result, error) {
	if opts.Version == "" || opts.Revision == "" || opts.Source == "" {
		return nil, fmt.Errorf("version, revision and source are required (they label the image)")
	}
	if opts.Created.IsZero() {
		return nil, fmt.Errorf("a creation time is required (the commit's, for a reproducible digest)")
	}
	platforms := opts.Platforms
	if len(platforms) == 0 {
		platforms = DefaultPlatforms
	}
	work := opts.WorkDir
	if work == "" {
		dir, err := os.MkdirTemp("", "eva-image-")
		if err != nil {
			return nil, err
		}
		work = dir
	}
	base, err := baseLayer(opts.Created)
	if err != nil {
		return nil, fmt.Errorf("CA roots and users layer: %w", err)
	}
	charts, err := chartsLayer(opts.ChartsDir, opts.Created)
	if err != nil {
		return nil, fmt.Errorf("charts layer from %s: %w", opts.ChartsDir, err)
	}
	res := &Result{Binaries: map[string]string{}}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		bin := filepath.Join(work, p.OS+"-"+p.Architecture, filepath.Base(BinaryPath))
		if err := Compile(ctx, opts, p, bin); err != nil {
			return nil, err
		}
		res.Binaries[platformKey(p)] = bin
		binLayer, err := binaryLayer(bin, opts.Created)
		if err != nil {
			return nil, fmt.Errorf("binary layer for %s/%s: %w", p.OS, p.Architecture, err)
		}
		img, err := assemble(opts, p, []namedLayer{
			{"CA roots and users", base},
			{"module charts at " + ChartBasePath, charts},
			{"operator binary at " + BinaryPath, binLayer},
		})
		if err != nil {
			return nil, fmt.Errorf("image for %s/%s: %w", p.OS, p.Architecture, err)
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	res.Index = mutate.Annotations(idx, labels(opts)).(v1.ImageIndex)
	return res, nil
}

// Compile builds opts.Package for p into out as a static, reproducible binary: no cgo,
// paths trimmed, no build ID, symbols stripped, the version stamped (main.version, and
// the release buildinfo reports).
func Compile(ctx context.Context, opts Options, p v1.Platform, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	// No VCS stamp (a dirty file anywhere, or a tarball without .git, would change the
	// binary: the revision is a label instead), and every setting that changes code
	// generation fixed, whatever the caller's environment says.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+opts.Version+" -X github.com/aidonow/eva/internal/buildinfo.version=v"+strings.TrimPrefix(opts.Version, "v"),
		"-o", out, opts.Package)
	cmd.Dir = opts.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=", "GOTOOLCHAIN=local",
		"GOWORK=off", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOFIPS140=off")
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w\n%s", opts.Package, p.OS, p.Architecture, err, output)
	}
	return nil
}

// assemble makes one platform's image: the layers, then a config that runs the binary
// as the non-root user with the chart and CA paths in its environment.
func assemble(opts Options, p v1.Platform, layers []namedLayer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: opts.Created.UTC()}
	var adds []mutate.Addendum
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l.layer, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: "eva-image: " + l.name, Comment: "built from Go, no container engine"}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = created
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Author = opts.Source
	cfg.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		User:       fmt.Sprintf("%d:%d", NonRootUser, NonRootUser),
		WorkingDir: "/",
		Env: []string{
			"PATH=/",
			"CHART_BASE_PATH=" + ChartBasePath,
			"SSL_CERT_FILE=" + CABundlePath,
			// The root filesystem is read-only: caches (the GitOps repository clone)
			// go to /tmp, an emptyDir in the deployment.
			"HOME=/tmp",
			"XDG_CACHE_HOME=/tmp/cache",
		},
		Labels: labels(opts),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(opts)).(v1.Image), nil
}

// namedLayer is a layer and what it holds, for the image history.
type namedLayer struct {
	name  string
	layer v1.Layer
}

// platformKey names a platform as Result.Binaries does.
func platformKey(p v1.Platform) string { return p.OS + "/" + p.Architecture }

// labels are the OCI labels of the image config and the annotations of its manifests.
func labels(opts Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "eva-operator",
		"org.opencontainers.image.description": "Eva's EvaTenant operator",
		"org.opencontainers.image.source":      opts.Source,
		"org.opencontainers.image.revision":    opts.Revision,
		"org.opencontainers.image.version":     opts.Version,
		"org.opencontainers.image.created":     opts.Created.UTC().Format(time.RFC3339),
	}
}
