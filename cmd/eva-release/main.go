// Command eva-release builds a versioned release of Eva in one step (internal/release):
// evactl for linux and darwin on amd64 and arm64 with an SBOM each and checksums, the
// operator image, and the operator and module charts as Helm OCI artifacts, with
// release.json listing every artifact's digest. `make release` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/aidonow/eva/internal/registry"
	"github.com/aidonow/eva/internal/release"
)

func main() {
	o := release.Options{ModuleDir: "."}
	var created, platforms, imagePlatforms string
	flag.StringVar(&o.Version, "version", "", "the release version, 0.2.0 (required)")
	flag.StringVar(&o.Revision, "revision", "", "the commit released, git rev-parse HEAD (required)")
	flag.StringVar(&created, "created", "", "the commit's time as Unix seconds, git log -1 --format=%ct (required): every timestamp, for reproducible digests")
	flag.StringVar(&o.Source, "source", "https://github.com/aidonow/eva", "the source repository URL")
	flag.StringVar(&o.Registry, "registry", "", "registry and path the image and charts are pushed under, ghcr.io/aidonow (required)")
	flag.BoolVar(&o.RegistryOptions.Insecure, "insecure", false, "allow a plain-HTTP registry")
	flag.StringVar(&o.OutDir, "out", "", "folder for the release's files (default dist/<version>); must be empty")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "evactl's platforms")
	flag.StringVar(&imagePlatforms, "image-platforms", "linux/amd64,linux/arm64", "the operator image's platforms")
	flag.StringVar(&o.EvactlPackage, "evactl-package", "./cmd/evactl", "evactl's main package")
	flag.StringVar(&o.OperatorPackage, "operator-package", "./cmd/eva-operator", "the operator's main package")
	flag.StringVar(&o.ChartsDir, "charts", "charts", "module charts")
	flag.StringVar(&o.OperatorChartDir, "operator-chart", "deploy/charts/eva-operator", "the operator's chart")
	flag.StringVar(&o.ImagesFile, "images-file", "images.txt", "image list copied into the release with the operator's digest")
	flag.Parse()
	if o.Version == "" || o.Revision == "" || created == "" || o.Registry == "" {
		fmt.Fprintln(os.Stderr, "eva-release: --version, --revision, --created and --registry are required")
		flag.Usage()
		os.Exit(2)
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		fail(fmt.Errorf("--created %q: want Unix seconds: %w", created, err))
	}
	o.Created = time.Unix(secs, 0).UTC()
	if o.OutDir == "" {
		o.OutDir = "dist/" + strings.TrimPrefix(o.Version, "v")
	}
	if o.EvactlPlatforms, err = parsePlatforms(platforms); err != nil {
		fail(fmt.Errorf("--platforms: %w", err))
	}
	if o.ImagePlatforms, err = parsePlatforms(imagePlatforms); err != nil {
		fail(fmt.Errorf("--image-platforms: %w", err))
	}
	o.RegistryOptions = registry.Options{Insecure: o.RegistryOptions.Insecure}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := release.Build(ctx, o)
	if err != nil {
		fail(err)
	}
	for _, b := range m.Binaries {
		fmt.Printf("evactl %s/%s  %s/%s\n", b.OS, b.Arch, o.OutDir, b.File)
	}
	fmt.Printf("image         %s\n", m.Image.Ref)
	for _, c := range m.Charts {
		fmt.Printf("chart         %s/%s:%s@%s\n", m.ChartSource, c.Name, c.Version, c.Digest)
	}
	fmt.Printf("manifest      %s/%s, checksums %s/%s\n", o.OutDir, release.ManifestFile, o.OutDir, release.ChecksumsFile)
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || arch == "" {
			return nil, fmt.Errorf("%q is not os/arch", p)
		}
		out = append(out, v1.Platform{OS: goos, Architecture: arch})
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "eva-release:", err)
	os.Exit(1)
}
