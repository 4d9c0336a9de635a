package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/aidonow/eva/internal/registry"
)

// emptyConfig is the OCI empty descriptor's content, the config of an artifact.
var emptyConfig = []byte("{}")

// Pushed is what Push wrote.
type Pushed struct {
	// Index is the image index by digest (<repository>@sha256:…).
	Index name.Digest
	// SBOM is the referrer holding the SBOM, by digest.
	SBOM name.Digest
}

// Push writes the index under tag (a <repository>:<tag> reference) and attaches the
// SBOM to it as an OCI 1.1 referrer (artifactType SBOMMediaType, subject the index);
// registries without the referrers API get the referrers tag schema (go-containerregistry
// maintains the sha256-<digest> tag). The digest the registry reports for the tag must
// equal the index's.
func Push(ctx context.Context, reg registry.Options, tag string, idx v1.ImageIndex, sbom []byte) (*Pushed, error) {
	ref, err := name.NewTag(tag, reg.NameOpts()...)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", tag, err)
	}
	opts := reg.RemoteOpts(ctx)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return nil, fmt.Errorf("pushing %s: %w", tag, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	head, err := remote.Head(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", tag, err)
	}
	if head.Digest != digest {
		return nil, fmt.Errorf("verifying %s: the registry reports %s, we pushed %s", tag, head.Digest, digest)
	}
	rawIdx, err := idx.RawManifest()
	if err != nil {
		return nil, err
	}
	subject := v1.Descriptor{MediaType: types.OCIImageIndex, Digest: digest, Size: int64(len(rawIdx))}
	sbomRef, err := attach(ref.Context(), opts, subject, sbom)
	if err != nil {
		return nil, fmt.Errorf("attaching the SBOM to %s: %w", tag, err)
	}
	return &Pushed{Index: ref.Context().Digest(digest.String()), SBOM: sbomRef}, nil
}

// attach pushes blob as an artifact manifest referring to subject.
func attach(repo name.Repository, opts []remote.Option, subject v1.Descriptor, blob []byte) (name.Digest, error) {
	config := static.NewLayer(emptyConfig, types.MediaType("application/vnd.oci.empty.v1+json"))
	content := static.NewLayer(blob, types.MediaType(SBOMMediaType))
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{config, content} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return name.Digest{}, err
		}
		d, _ := l.Digest()
		size, _ := l.Size()
		mt, _ := l.MediaType()
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: d, Size: size})
	}
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMMediaType,
		Config:        descs[0],
		Layers:        descs[1:],
		Subject:       &subject,
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return name.Digest{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return name.Digest{}, err
	}
	ref := repo.Digest(h.String())
	if err := remote.Put(ref, rawManifest{raw: raw, mt: types.OCIManifestSchema1}, opts...); err != nil {
		return name.Digest{}, err
	}
	return ref, nil
}

// rawManifest is a manifest pushed as its bytes.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }
