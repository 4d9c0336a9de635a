// Package chartrepo publishes the module charts: it packages each chart folder into a
// reproducible archive, pushes it to an OCI registry as a Helm chart artifact, pulls it
// back by digest, and keeps the list of published versions (charts/published.yaml)
// that tenant pins are checked against.
package chartrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// Archive is one packaged chart.
type Archive struct {
	Name, Version string
	// Dir is the chart folder it was packaged from ("" when pulled).
	Dir string
	// Data is the gzipped tar, Digest its sha256 ("sha256:<hex>").
	Data   []byte
	Digest string
	// Chart is the loaded chart.
	Chart *chart.Chart
}

// FileName is the conventional name of the archive: <name>-<version>.tgz.
func (a *Archive) FileName() string { return a.Name + "-" + a.Version + ".tgz" }

// epoch is the modification time of every archived file, so the same chart always
// packages to the same bytes (helm package stamps the current time instead).
var epoch = time.Unix(0, 0).UTC()

// Folder is a chart folder loaded with the Helm SDK, not packaged yet.
type Folder struct {
	Dir   string
	Chart *chart.Chart
}

// LoadFolder loads the chart in dir with the Helm SDK, which honours .helmignore and
// refuses a malformed chart.
func LoadFolder(dir string) (*Folder, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	if len(ch.Dependencies()) > 0 || len(ch.Metadata.Dependencies) > 0 {
		return nil, fmt.Errorf("chart %s: dependencies are not supported: module charts are self-contained", dir)
	}
	return &Folder{Dir: dir, Chart: ch}, nil
}

// LoadFolders loads every chart folder (one holding a Chart.yaml) directly under dir,
// sorted by chart name.
func LoadFolders(dir string) ([]*Folder, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading charts: %w", err)
	}
	var out []*Folder
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); !e.IsDir() || err != nil {
			continue
		}
		f, err := LoadFolder(path)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no charts found in %s", dir)
	}
	slices.SortFunc(out, func(a, b *Folder) int { return strings.Compare(a.Chart.Name(), b.Chart.Name()) })
	return out, nil
}

// Package packages the loaded chart reproducibly: files sorted by name under the
// chart's folder, fixed modes, owners and times, and a gzip header without name or
// time. Packaging the same folder twice gives the same digest.
func (f *Folder) Package() (*Archive, error) {
	ch := f.Chart
	files := slices.Clone(ch.Raw)
	slices.SortFunc(files, func(a, b *chart.File) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, file := range files {
		hdr := &tar.Header{
			Name: ch.Name() + "/" + filepath.ToSlash(file.Name), Mode: 0o644, Size: int64(len(file.Data)),
			ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("packaging %s: %w", f.Dir, err)
		}
		if _, err := tw.Write(file.Data); err != nil {
			return nil, fmt.Errorf("packaging %s: %w", f.Dir, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	a := &Archive{Name: ch.Name(), Version: ch.Metadata.Version, Dir: f.Dir, Data: buf.Bytes(), Chart: ch}
	a.Digest = Digest(a.Data)
	return a, nil
}

// Package loads the chart in dir (LoadFolder) and packages it (Folder.Package).
func Package(dir string) (*Archive, error) {
	f, err := LoadFolder(dir)
	if err != nil {
		return nil, err
	}
	return f.Package()
}

// PackageAll packages every chart folder directly under dir, sorted by chart name.
func PackageAll(dir string) ([]*Archive, error) {
	folders, err := LoadFolders(dir)
	if err != nil {
		return nil, err
	}
	out := make([]*Archive, 0, len(folders))
	for _, f := range folders {
		a, err := f.Package()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Load reads a chart archive (as pulled) and checks it holds the chart and version
// expected.
func Load(data []byte, name, version string) (*Archive, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("loading chart %s %s: %w", name, version, err)
	}
	if ch.Name() != name || NormalVersion(ch.Metadata.Version) != NormalVersion(version) {
		return nil, fmt.Errorf("archive of %s %s holds %s %s", name, version, ch.Name(), ch.Metadata.Version)
	}
	return &Archive{Name: name, Version: ch.Metadata.Version, Data: data, Digest: Digest(data), Chart: ch}, nil
}

// NormalVersion drops the optional leading "v" of a semantic version: a pin v1.4.0
// names the chart version 1.4.0, as Helm's version matching does.
func NormalVersion(v string) string { return strings.TrimPrefix(v, "v") }

// Digest is the sha256 digest of data as OCI writes it: "sha256:<hex>".
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
