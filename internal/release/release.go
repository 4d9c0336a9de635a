// Package release builds a versioned release of Eva in one step: evactl for every
// platform with an SBOM each, the operator image (pushed, its digest recorded in the
// release's images.txt), the operator chart pinned to that digest and the module
// charts (pushed as Helm OCI artifacts), a manifest of every artifact and its digest,
// and checksums of every file.
package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/imagebuild"
	"github.com/aidonow/eva/internal/registry"
)

// DefaultEvactlPlatforms are the platforms evactl is released for.
var DefaultEvactlPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"}, {OS: "darwin", Architecture: "arm64"},
}

// Files of a release folder besides the binaries, their SBOMs and the chart archives.
const (
	ManifestFile  = "release.json"
	ChecksumsFile = "checksums.txt"
	ImagesFile    = "images.txt"
)

// Options say what to release, from where, to where.
type Options struct {
	// Version is the release (0.2.0); Revision the commit; Source the repository URL;
	// Created the commit's time (every timestamp in the artifacts).
	Version, Revision, Source string
	Created                   time.Time
	// ModuleDir is the repository root; the paths below are relative to it.
	ModuleDir string
	// EvactlPackage and OperatorPackage are the main packages released.
	EvactlPackage, OperatorPackage string
	// ChartsDir holds the module charts, OperatorChartDir the operator's chart,
	// ImagesFile the image list the release's copy is made from.
	ChartsDir, OperatorChartDir, ImagesFile string
	// EvactlPlatforms (DefaultEvactlPlatforms when empty) and ImagePlatforms (the
	// image's default when empty) are what is built.
	EvactlPlatforms, ImagePlatforms []v1.Platform
	// OutDir receives the release's files; it must not exist or be empty.
	OutDir string
	// Registry is where the artifacts go (host/path): the image as
	// <Registry>/eva-operator:<Version>, the charts as oci://<Registry>/charts/<name>.
	Registry        string
	RegistryOptions registry.Options
}

// Manifest is release.json: every artifact of the release and its digest.
type Manifest struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	// Binaries are evactl's, each with its SBOM.
	Binaries []Binary `json:"binaries"`
	Image    Image    `json:"image"`
	// ChartSource is the oci:// URL the charts were pushed under.
	ChartSource string  `json:"chartSource"`
	Charts      []Chart `json:"charts"`
}

// Binary is one platform's evactl.
type Binary struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	SBOM   string `json:"sbom"`
}

// Image is the operator image as pushed.
type Image struct {
	// Ref is <repository>@<digest>; Tag the version tag it was pushed as.
	Ref    string `json:"ref"`
	Tag    string `json:"tag"`
	Digest string `json:"digest"`
	// SBOM is the file of the SBOM also attached to the image as a referrer.
	SBOM string `json:"sbom"`
}

// Chart is a chart as pushed: the operator's or a module's.
type Chart struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// File is the archive in the release folder.
	File string `json:"file"`
	chartrepo.Published
}

// Build makes the release: nothing is pushed before every binary is built, and the
// manifest and checksums are written last, so a release folder holding them is whole.
func Build(ctx context.Context, o Options) (*Manifest, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	m := &Manifest{Version: o.Version, Revision: o.Revision, ChartSource: "oci://" + o.Registry + "/charts"}
	var err error
	if m.Binaries, err = o.buildEvactl(ctx); err != nil {
		return nil, err
	}
	if m.Image, err = o.releaseImage(ctx); err != nil {
		return nil, err
	}
	operatorChart, err := o.operatorChart(m.Image)
	if err != nil {
		return nil, err
	}
	modules, err := o.moduleCharts()
	if err != nil {
		return nil, err
	}
	for _, a := range append([]*chartrepo.Archive{operatorChart}, modules...) {
		c, err := o.pushChart(ctx, m.ChartSource, a)
		if err != nil {
			return nil, err
		}
		m.Charts = append(m.Charts, c)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, ManifestFile), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	return m, writeChecksums(o.OutDir)
}

func (o *Options) check() error {
	if o.Version == "" || o.Revision == "" || o.Source == "" || o.Created.IsZero() || o.Registry == "" || o.OutDir == "" {
		return errors.New("version, revision, source, created, registry and output folder are all required")
	}
	o.Version = strings.TrimPrefix(o.Version, "v")
	if len(o.EvactlPlatforms) == 0 {
		o.EvactlPlatforms = DefaultEvactlPlatforms
	}
	entries, err := os.ReadDir(o.OutDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: a release folder holds one release", o.OutDir)
	}
	return os.MkdirAll(o.OutDir, 0o755)
}

// path is a path of the options relative to the repository root.
func (o *Options) path(p string) string { return filepath.Join(o.ModuleDir, p) }

// buildEvactl compiles evactl for every platform, with an SBOM read from each binary.
func (o *Options) buildEvactl(ctx context.Context) ([]Binary, error) {
	var out []Binary
	build := imagebuild.Options{ModuleDir: o.ModuleDir, Package: o.EvactlPackage, Version: o.Version}
	for _, p := range o.EvactlPlatforms {
		name := fmt.Sprintf("evactl_%s_%s_%s", o.Version, p.OS, p.Architecture)
		file := filepath.Join(o.OutDir, name)
		if err := imagebuild.Compile(ctx, build, p, file); err != nil {
			return nil, err
		}
		sbom, err := imagebuild.BinarySBOM(file, o.Version, o.Source, o.Created)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(file+".cdx.json", sbom, 0o644); err != nil {
			return nil, err
		}
		sum, err := fileSHA256(file)
		if err != nil {
			return nil, err
		}
		out = append(out, Binary{OS: p.OS, Arch: p.Architecture, File: name, SHA256: sum, SBOM: name + ".cdx.json"})
	}
	return out, nil
}

// releaseImage builds and pushes the operator image, recording its digest in the
// release's copy of images.txt.
func (o *Options) releaseImage(ctx context.Context) (Image, error) {
	data, err := os.ReadFile(o.path(o.ImagesFile))
	if err != nil {
		return Image{}, err
	}
	images := filepath.Join(o.OutDir, ImagesFile)
	if err := os.WriteFile(images, data, 0o644); err != nil {
		return Image{}, err
	}
	sbom := "eva-operator_" + o.Version + ".cdx.json"
	res, err := imagebuild.Release(ctx, imagebuild.ReleaseOptions{
		Options: imagebuild.Options{
			ModuleDir: o.ModuleDir, Package: o.OperatorPackage, ChartsDir: o.path(o.ChartsDir), Platforms: o.ImagePlatforms,
			Version: o.Version, Revision: o.Revision, Source: o.Source, Created: o.Created,
		},
		Repository: o.Registry + "/eva-operator", Registry: o.RegistryOptions,
		ImagesFile: images, SBOMFile: filepath.Join(o.OutDir, sbom),
	})
	if err != nil {
		return Image{}, fmt.Errorf("operator image: %w", err)
	}
	return Image{Ref: res.Pushed.Index.String(), Tag: o.Version, Digest: res.Pushed.Index.DigestStr(), SBOM: sbom}, nil
}

// moduleCharts packages the module charts, each as charts/published.yaml records it:
// the digests the release's evactl and operator carry and pin are then those the
// registry holds once pushed (Push verifies it).
func (o *Options) moduleCharts() ([]*chartrepo.Archive, error) {
	dir := o.path(o.ChartsDir)
	lockPath := filepath.Join(dir, chartrepo.LockFile)
	lock, err := chartrepo.ReadLock(lockPath)
	if err != nil {
		return nil, fmt.Errorf("the module charts' published digests: %w (run make manifests)", err)
	}
	modules, err := chartrepo.PackageAll(dir)
	if err != nil {
		return nil, err
	}
	for _, a := range modules {
		p, err := chartrepo.PublishedOf(a)
		if err != nil {
			return nil, err
		}
		if recorded, ok := lock.Find(a.Name, a.Version); !ok || recorded != p {
			return nil, fmt.Errorf("%s: %s %s packages to %s (archive %s), which it does not record: run make manifests", lockPath, a.Name, a.Version, p.Digest, p.Archive)
		}
	}
	return modules, nil
}

// pushChart pushes a chart archive and keeps it in the release folder.
func (o *Options) pushChart(ctx context.Context, source string, a *chartrepo.Archive) (Chart, error) {
	if err := os.WriteFile(filepath.Join(o.OutDir, a.FileName()), a.Data, 0o644); err != nil {
		return Chart{}, err
	}
	p, err := chartrepo.Push(ctx, source, a, o.RegistryOptions)
	if err != nil {
		return Chart{}, err
	}
	return Chart{Name: a.Name, Version: a.Version, File: a.FileName(), Published: p}, nil
}

// fileSHA256 is a file's sha256 in hex.
func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// writeChecksums writes checksums.txt in sha256sum's format: `sha256sum -c` checks
// every other file of the folder.
func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == ChecksumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		lines = append(lines, sum+"  "+e.Name())
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
