package imagebuild

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
)

// BinarySBOM describes one released binary as a CycloneDX 1.6 document: the file (by
// its sha256) and the Go modules its build information lists, read from the binary
// itself, so exactly what was linked.
func BinarySBOM(path, version, source string, created time.Time) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	name := filepath.Base(path)
	props := []cdx.Property{{Name: "go:toolchain", Value: info.GoVersion}}
	for _, s := range info.Settings {
		props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(source+"@sha256:"+digest)).String()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &cdx.Component{
			BOMRef: "binary:" + name, Type: cdx.ComponentTypeApplication, Name: info.Path, Version: version,
			Description: name, Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest}},
			ExternalReferences: &[]cdx.ExternalReference{{Type: cdx.ERTypeVCS, URL: source}}, Properties: &props,
		},
	}
	stdlib := "pkg:golang/stdlib@" + strings.TrimPrefix(info.GoVersion, "go")
	components := []cdx.Component{{BOMRef: stdlib, Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: info.GoVersion, PackageURL: stdlib}}
	refs := []string{stdlib}
	for _, m := range info.Deps {
		c := moduleComponent(m)
		components = append(components, c)
		refs = append(refs, c.BOMRef)
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: "binary:" + name, Dependencies: &refs}}
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("encoding the SBOM of %s: %w", name, err)
	}
	return buf.Bytes(), nil
}
