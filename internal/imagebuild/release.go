package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aidonow/eva/internal/airgap"
	"github.com/aidonow/eva/internal/registry"
)

// ReleaseOptions say where a built image goes and which files learn its digest.
type ReleaseOptions struct {
	Options
	// Repository is where the index is pushed, tagged Version.
	Repository string
	Registry   registry.Options
	// ImagesFile is images.txt: its line for Repository's path gets the pushed digest.
	ImagesFile string
	// AirgapOverlays are kustomization files whose image digests follow images.txt
	// (overlays/airgap/kustomization.yaml).
	AirgapOverlays []string
	// SBOMFile, when set, also receives the SBOM.
	SBOMFile string
}

// Released is what Release did.
type Released struct {
	Pushed *Pushed
	// Recorded is the images.txt entry written.
	Recorded airgap.Entry
	// Synced counts the digests set in the air-gap overlays.
	Synced int
}

// Release builds the image, pushes it with its SBOM attached, and records the pushed
// digest in images.txt and the air-gap overlays in the same step, so no digest is ever
// copied by hand. Nothing is written to the files unless the push was verified.
func Release(ctx context.Context, opts ReleaseOptions) (*Released, error) {
	if opts.ImagesFile != "" {
		// Fail before the build when the digest would have nowhere to go.
		if _, err := os.Stat(opts.ImagesFile); err != nil {
			return nil, err
		}
	}
	if opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "eva-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		opts.WorkDir = dir
	}
	built, err := Build(ctx, opts.Options)
	if err != nil {
		return nil, err
	}
	sbom, err := SBOM(opts.Options, built)
	if err != nil {
		return nil, err
	}
	if opts.SBOMFile != "" {
		if err := os.MkdirAll(filepath.Dir(opts.SBOMFile), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(opts.SBOMFile, sbom, 0o644); err != nil {
			return nil, err
		}
	}
	pushed, err := Push(ctx, opts.Registry, opts.Repository+":"+opts.Version, built.Index, sbom)
	if err != nil {
		return nil, err
	}
	out := &Released{Pushed: pushed}
	if opts.ImagesFile == "" {
		return out, nil
	}
	out.Recorded, err = airgap.Record(opts.ImagesFile, pushed.Index, opts.Version)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(opts.ImagesFile)
	if err != nil {
		return nil, err
	}
	entries, _ := airgap.Parse(bytes.NewReader(data))
	for _, path := range opts.AirgapOverlays {
		n, err := airgap.SyncOverlay(path, entries)
		if err != nil {
			return nil, fmt.Errorf("recording the digest in %s: %w", path, err)
		}
		out.Synced += n
	}
	return out, nil
}
