// Command eva-image builds the operator's container image from Go, without a container
// engine (internal/imagebuild), pushes it with its SBOM attached, and records the pushed
// digest in images.txt and the air-gap overlay. `make image` runs it.
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

	"github.com/aidonow/eva/internal/imagebuild"
	"github.com/aidonow/eva/internal/registry"
)

func main() {
	var opts imagebuild.ReleaseOptions
	var created, platforms, overlays string
	flag.StringVar(&opts.Repository, "repo", "", "repository the image is pushed to, tagged --version (required)")
	flag.BoolVar(&opts.Registry.Insecure, "insecure", false, "allow a plain-HTTP registry")
	flag.StringVar(&opts.Version, "version", "", "the image's version: its tag, the version label, stamped into the binary (required)")
	flag.StringVar(&opts.Revision, "revision", "", "the source revision (git commit) for the revision label (required)")
	flag.StringVar(&opts.Source, "source", "https://github.com/aidonow/eva", "the source repository URL for the source label")
	flag.StringVar(&created, "created", "", "creation time as Unix seconds: the commit's (git log -1 --format=%ct), so the same commit builds the same digest (required)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "platforms of the image index")
	flag.StringVar(&opts.ModuleDir, "module", ".", "the repository root")
	flag.StringVar(&opts.Package, "package", "./cmd/eva-operator", "the operator's main package")
	flag.StringVar(&opts.ChartsDir, "charts", "charts", "module charts copied to "+imagebuild.ChartBasePath)
	flag.StringVar(&opts.ImagesFile, "images-file", "images.txt", "image list whose line for --repo's path gets the pushed digest (empty: none)")
	flag.StringVar(&overlays, "airgap-overlays", "overlays/airgap/kustomization.yaml", "comma-separated kustomizations whose digests follow images.txt")
	flag.StringVar(&opts.SBOMFile, "sbom-out", "", "also write the CycloneDX SBOM to this file")
	flag.Parse()

	if opts.Repository == "" || opts.Version == "" || opts.Revision == "" || created == "" {
		fmt.Fprintln(os.Stderr, "eva-image: --repo, --version, --revision and --created are required")
		flag.Usage()
		os.Exit(2)
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		fail(fmt.Errorf("--created %q: want Unix seconds: %w", created, err))
	}
	opts.Created = time.Unix(secs, 0).UTC()
	for _, p := range strings.Split(platforms, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			fail(fmt.Errorf("--platforms: %q is not os/arch", p))
		}
		opts.Platforms = append(opts.Platforms, v1.Platform{OS: os, Architecture: arch})
	}
	if overlays != "" {
		opts.AirgapOverlays = strings.Split(overlays, ",")
	}
	opts.Registry = registry.Options{Insecure: opts.Registry.Insecure}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := imagebuild.Release(ctx, opts)
	if err != nil {
		fail(err)
	}
	fmt.Println(res.Pushed.Index.String())
	fmt.Fprintf(os.Stderr, "pushed %s (%s), SBOM attached as %s\n", opts.Repository+":"+opts.Version, platforms, res.Pushed.SBOM.DigestStr())
	if opts.ImagesFile != "" {
		fmt.Fprintf(os.Stderr, "recorded %s in %s:%d, %d digest(s) set in %s\n", res.Recorded.Ref, opts.ImagesFile, res.Recorded.Line, res.Synced, overlays)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "eva-image:", err)
	os.Exit(1)
}
