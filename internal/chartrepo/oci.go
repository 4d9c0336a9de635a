package chartrepo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/aidonow/eva/internal/registry"
)

// The media types of a Helm chart stored in an OCI registry, as Helm and Flux's
// source-controller write and read them.
const (
	ConfigMediaType types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	ChartMediaType  types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Repository is where one chart lives under an OCI chart source: the source's URL
// (oci://host/path) with the chart's name appended, without the scheme.
func Repository(source, chart string) (string, error) {
	base, ok := strings.CutPrefix(source, "oci://")
	if !ok || base == "" {
		return "", fmt.Errorf("chart source %q: must be an oci:// URL", source)
	}
	return strings.TrimSuffix(base, "/") + "/" + chart, nil
}

// Tag is the OCI tag of a chart version: Helm replaces '+', which tags cannot hold, by '_'.
func Tag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// helmManifest builds the OCI manifest of a chart archive the way Helm pushes it: the
// chart's metadata as the config, the archive as the one layer. It holds no time, so
// the same archive gives the same manifest digest.
func helmManifest(a *Archive) (manifest, config []byte, err error) {
	config, err = json.Marshal(a.Chart.Metadata)
	if err != nil {
		return nil, nil, err
	}
	cfgHash, _, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, nil, err
	}
	layerHash, err := v1.NewHash(a.Digest)
	if err != nil {
		return nil, nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(config)), Digest: cfgHash},
		Layers:        []v1.Descriptor{{MediaType: ChartMediaType, Size: int64(len(a.Data)), Digest: layerHash}},
		Annotations: map[string]string{
			"org.opencontainers.image.title":       a.Name,
			"org.opencontainers.image.version":     a.Version,
			"org.opencontainers.image.description": a.Chart.Metadata.Description,
		},
	}
	manifest, err = json.Marshal(m)
	return manifest, config, err
}

// rawManifest is a manifest pushed as given.
type rawManifest struct{ data []byte }

func (r rawManifest) RawManifest() ([]byte, error)        { return r.data, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Push pushes an archive to <source>/<chart>:<version> and returns what was published.
// A tag that already holds other content is refused, not overwritten: a published
// version never changes.
func Push(ctx context.Context, source string, a *Archive, reg registry.Options) (Published, error) {
	repoName, err := Repository(source, a.Name)
	if err != nil {
		return Published{}, err
	}
	tag, err := name.NewTag(repoName+":"+Tag(a.Version), reg.NameOpts()...)
	if err != nil {
		return Published{}, err
	}
	manifest, config, published, err := publication(a)
	if err != nil {
		return Published{}, err
	}
	digest, err := v1.NewHash(published.Digest)
	if err != nil {
		return Published{}, err
	}
	opts := reg.RemoteOpts(ctx)
	existing, err := remote.Head(tag, opts...)
	switch {
	case err == nil && existing.Digest != digest:
		return Published{}, fmt.Errorf("%s already holds %s, not this archive's %s: published versions are immutable, raise the version in %s/Chart.yaml",
			tag, existing.Digest, digest, a.Dir)
	case err != nil && !isNotFound(err):
		return Published{}, fmt.Errorf("reading %s: %w", tag, err)
	}
	repo := tag.Context()
	for _, blob := range []v1.Layer{static.NewLayer(config, ConfigMediaType), static.NewLayer(a.Data, ChartMediaType)} {
		if err := remote.WriteLayer(repo, blob, opts...); err != nil {
			return Published{}, fmt.Errorf("pushing %s: %w", tag, err)
		}
	}
	if err := remote.Put(tag, rawManifest{manifest}, opts...); err != nil {
		return Published{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	got, err := remote.Head(tag, opts...)
	if err != nil {
		return Published{}, fmt.Errorf("verifying %s: %w", tag, err)
	}
	if got.Digest != digest {
		return Published{}, fmt.Errorf("verifying %s: the registry holds %s, pushed %s", tag, got.Digest, digest)
	}
	return published, nil
}

// PublishedOf is what Push publishes for an archive, known before any push: the
// manifest holds no time, so its digest is the archive's alone. A release ships it
// (charts/published.yaml), and the registry is then checked to hold exactly that.
func PublishedOf(a *Archive) (Published, error) {
	_, _, p, err := publication(a)
	return p, err
}

// publication is the manifest and config Push writes for an archive, and what that
// publishes.
func publication(a *Archive) (manifest, config []byte, p Published, err error) {
	if manifest, config, err = helmManifest(a); err != nil {
		return nil, nil, Published{}, err
	}
	digest, _, err := v1.SHA256(bytes.NewReader(manifest))
	if err != nil {
		return nil, nil, Published{}, err
	}
	return manifest, config, Published{Version: a.Version, Digest: digest.String(), Archive: a.Digest}, nil
}

// Pull fetches the archive of a published version by its manifest digest and checks
// both digests: what comes back is exactly what was published.
func Pull(ctx context.Context, source, chart string, p Published, reg registry.Options) ([]byte, error) {
	repoName, err := Repository(source, chart)
	if err != nil {
		return nil, err
	}
	ref, err := name.NewDigest(repoName+"@"+p.Digest, reg.NameOpts()...)
	if err != nil {
		return nil, err
	}
	opts := reg.RemoteOpts(ctx)
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	var layer *v1.Descriptor
	for i := range m.Layers {
		if m.Layers[i].MediaType == ChartMediaType {
			layer = &m.Layers[i]
		}
	}
	if layer == nil || layer.Digest.String() != p.Archive {
		return nil, fmt.Errorf("%s does not hold the chart archive %s", ref, p.Archive)
	}
	blob, err := remote.Layer(ref.Context().Digest(p.Archive), opts...)
	if err != nil {
		return nil, err
	}
	rc, err := blob.Compressed()
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxArchive+1))
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	if len(data) > maxArchive {
		return nil, fmt.Errorf("%s: chart archive larger than %d bytes", ref, maxArchive)
	}
	if got := Digest(data); got != p.Archive {
		return nil, fmt.Errorf("%s: archive digest %s, want %s", ref, got, p.Archive)
	}
	return data, nil
}

// maxArchive bounds a pulled chart archive (Helm's own limit for charts is 20 MiB).
const maxArchive = 20 << 20

// Copy copies a published version from one chart source to another by its manifest
// digest, under its version tag, and verifies the digest the destination reports.
func Copy(ctx context.Context, from, to, chart string, p Published, reg registry.Options) error {
	src, err := Repository(from, chart)
	if err != nil {
		return err
	}
	dst, err := Repository(to, chart)
	if err != nil {
		return err
	}
	return reg.Copy(ctx, src+"@"+p.Digest, dst+":"+Tag(p.Version))
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}
