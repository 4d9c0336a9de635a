package imagebuild

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
	"sigs.k8s.io/yaml"
)

// SBOMMediaType is the media type of the SBOM blob and the artifact type of the
// referrer that attaches it to the image index.
const SBOMMediaType = "application/vnd.cyclonedx+json"

// caBundleModule is the module the image's CA roots come from.
const caBundleModule = "golang.org/x/crypto/x509roots/fallback"

// SBOM describes the image as a CycloneDX 1.6 document: the image itself (by index
// digest), one application component per platform binary with the Go modules its build
// information lists (read from the binary with debug/buildinfo, so exactly what was
// linked), the module charts, and the CA bundle with the module version it came from.
func SBOM(opts Options, res *Result) ([]byte, error) {
	digest, err := res.Index.Digest()
	if err != nil {
		return nil, err
	}
	imageRef := "image:" + digest.String()
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(opts.Source+"@"+digest.String())).String()
	bom.Metadata = &cdx.Metadata{
		Timestamp: opts.Created.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "eva-image", Version: opts.Version,
			Description: "Eva's image builder (internal/imagebuild): module list read from each binary's Go build information",
		}}},
		Component: &cdx.Component{
			BOMRef: imageRef, Type: cdx.ComponentTypeContainer, Name: "eva-operator", Version: opts.Version,
			PackageURL:         "pkg:oci/eva-operator@" + url.QueryEscape(digest.String()),
			Hashes:             &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest.Hex}},
			ExternalReferences: &[]cdx.ExternalReference{{Type: cdx.ERTypeVCS, URL: opts.Source}},
			Properties:         &[]cdx.Property{{Name: "org.opencontainers.image.revision", Value: opts.Revision}},
		},
	}
	var components []cdx.Component
	var deps []cdx.Dependency
	imageDeps := []string{}
	seenModule := map[string]bool{}
	platforms := make([]string, 0, len(res.Binaries))
	for p := range res.Binaries {
		platforms = append(platforms, p)
	}
	slices.Sort(platforms)
	for _, p := range platforms {
		info, err := buildinfo.ReadFile(res.Binaries[p])
		if err != nil {
			return nil, fmt.Errorf("reading the build information of the %s binary: %w", p, err)
		}
		binRef := "binary:" + p
		imageDeps = append(imageDeps, binRef)
		props := []cdx.Property{{Name: "platform", Value: p}, {Name: "go:toolchain", Value: info.GoVersion}}
		for _, s := range info.Settings {
			props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
		components = append(components, cdx.Component{
			BOMRef: binRef, Type: cdx.ComponentTypeApplication, Name: info.Path, Version: opts.Version,
			Description: "the operator binary at " + BinaryPath + " for " + p, Properties: &props,
		})
		var binDeps []string
		stdlib := "pkg:golang/stdlib@" + strings.TrimPrefix(info.GoVersion, "go")
		binDeps = append(binDeps, stdlib)
		if !seenModule[stdlib] {
			seenModule[stdlib] = true
			components = append(components, cdx.Component{BOMRef: stdlib, Type: cdx.ComponentTypeLibrary, Name: "stdlib",
				Version: info.GoVersion, PackageURL: stdlib})
		}
		for _, m := range info.Deps {
			c := moduleComponent(m)
			binDeps = append(binDeps, c.BOMRef)
			if !seenModule[c.BOMRef] {
				seenModule[c.BOMRef] = true
				components = append(components, c)
			}
		}
		deps = append(deps, cdx.Dependency{Ref: binRef, Dependencies: &binDeps})
	}
	charts, err := chartComponents(opts.ChartsDir)
	if err != nil {
		return nil, err
	}
	for _, c := range charts {
		imageDeps = append(imageDeps, c.BOMRef)
	}
	components = append(components, charts...)
	ca := caBundleComponent()
	imageDeps = append(imageDeps, ca.BOMRef)
	components = append(components, ca)
	deps = append([]cdx.Dependency{{Ref: imageRef, Dependencies: &imageDeps}}, deps...)
	bom.Components = &components
	bom.Dependencies = &deps

	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("encoding the SBOM: %w", err)
	}
	return buf.Bytes(), nil
}

// moduleComponent is a Go module as linked: its replacement when it is replaced.
func moduleComponent(m *debug.Module) cdx.Component {
	mod := m
	if m.Replace != nil {
		mod = m.Replace
	}
	purl := goPURL(mod.Path, mod.Version)
	c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: mod.Path, Version: mod.Version, PackageURL: purl}
	var props []cdx.Property
	if mod.Sum != "" {
		props = append(props, cdx.Property{Name: "go:module:sum", Value: mod.Sum})
	}
	if m.Replace != nil {
		props = append(props, cdx.Property{Name: "go:module:replaces", Value: m.Path + "@" + m.Version})
	}
	if len(props) > 0 {
		c.Properties = &props
	}
	return c
}

// goPURL is a Go module's package URL: pkg:golang/<escaped path>@<version>.
func goPURL(path, version string) string {
	segments := strings.Split(path, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return "pkg:golang/" + strings.Join(segments, "/") + "@" + url.PathEscape(version)
}

// chartComponents lists the charts of the charts folder, name and version from each
// Chart.yaml.
func chartComponents(dir string) ([]cdx.Component, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	var out []cdx.Component
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var meta struct{ Name, Version, AppVersion string }
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if meta.Name == "" || meta.Version == "" {
			return nil, fmt.Errorf("%s: a chart needs a name and a version", p)
		}
		purl := "pkg:helm/" + url.PathEscape(meta.Name) + "@" + url.PathEscape(meta.Version)
		out = append(out, cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeApplication, Name: meta.Name, Version: meta.Version,
			PackageURL: purl, Description: "module chart at " + ChartBasePath + "/" + filepath.Base(filepath.Dir(p)),
			Properties: &[]cdx.Property{{Name: "helm:appVersion", Value: meta.AppVersion}}})
	}
	return out, nil
}

// caBundleComponent is the CA bundle file, versioned by the module it is generated from
// (read from this program's own build information).
func caBundleComponent() cdx.Component {
	version := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == caBundleModule {
				version = m.Version
			}
		}
	}
	return cdx.Component{BOMRef: "file:" + CABundlePath, Type: cdx.ComponentTypeData, Name: CABundlePath, Version: version,
		Description: "Mozilla NSS CA roots in PEM, from " + caBundleModule + " " + version,
		PackageURL:  goPURL(caBundleModule, version)}
}
