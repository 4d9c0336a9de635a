package publish

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
)

// Flux's OCI artifact format.
const (
	FluxConfigMediaType  types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	FluxContentMediaType types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"

	// AnnotationTreeDigest records a digest of the published tree's files, so an
	// unchanged render is recognised from the manifest alone.
	AnnotationTreeDigest = "eva.aidonow.com/tree-digest"

	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
)

// OCI publishes the tree as a Flux OCI artifact: one gzip'd tarball layer, built
// reproducibly (sorted entries, fixed times and owners), so the same tree always has the
// same digest and an unchanged publish pushes nothing.
type OCI struct {
	// Ref is the artifact reference, HOST/REPO:TAG (an oci:// prefix is accepted).
	Ref string
	// Insecure allows a plain-HTTP registry.
	Insecure bool
	// Keychain resolves credentials (the Docker config file by default).
	Keychain authn.Keychain
	// Source and Revision fill the source and revision annotations.
	Source, Revision string
	// Created fills the created annotation; the zero time is the Unix epoch, which
	// keeps the digest a function of the content alone.
	Created time.Time
	// Transport overrides the HTTP transport (tests).
	Transport http.RoundTripper

	// held caches, by artifact digest, the TenantDigest of each tenant the artifact
	// holds: an artifact never changes, and those this process pushed or read need no
	// pull to answer TenantDigest.
	mu   sync.Mutex
	held map[string]map[string]string
}

// heldCacheSize bounds the artifacts whose tenant digests are kept: the tag's last few
// (what Flux applied lags what is published by a publish or two).
const heldCacheSize = 8

func (o *OCI) reference() (name.Reference, error) {
	ref := strings.TrimPrefix(o.Ref, "oci://")
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("artifact reference %q: %w", o.Ref, err)
	}
	return r, nil
}

func (o *OCI) options(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// Publish implements Sink. The revision returned is the artifact's digest.
func (o *OCI) Publish(ctx context.Context, u Update, s Safety) (*Result, error) {
	return o.publish(ctx, u, s)
}

// Head implements Revisions: the digest the tag points at.
func (o *OCI) Head(ctx context.Context) (string, error) {
	ref, err := o.reference()
	if err != nil {
		return "", err
	}
	return o.head(ctx, ref)
}

// TenantDigest implements Revisions: the artifact of that digest in the tag's
// repository is pulled (once; answers are cached) and its files read.
func (o *OCI) TenantDigest(ctx context.Context, revision, dir string) (string, error) {
	digest := revisionID(revision, "sha256")
	o.mu.Lock()
	digests, ok := o.held[digest]
	o.mu.Unlock()
	if !ok {
		ref, err := o.reference()
		if err != nil {
			return "", err
		}
		at := ref.Context().Digest(digest)
		img, err := remote.Image(at, o.options(ctx)...)
		if notFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", at, err)
		}
		tree, err := untarArtifact(at, img)
		if err != nil {
			return "", err
		}
		digests = tenantDigests(tree)
		o.remember(digest, digests)
	}
	if d, ok := digests[dir]; ok {
		return d, nil
	}
	return EmptyTenantDigest, nil
}

// remember caches the tenant digests of an artifact.
func (o *OCI) remember(digest string, digests map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held == nil {
		o.held = map[string]map[string]string{}
	}
	for d := range o.held {
		if len(o.held) < heldCacheSize {
			break
		}
		delete(o.held, d) // any: a lookup missed here pulls the artifact again
	}
	o.held[digest] = digests
}

func (o *OCI) publish(ctx context.Context, u Update, s Safety) (*Result, error) {
	ref, err := o.reference()
	if err != nil {
		return nil, err
	}
	if u.Full {
		// A full render identical to what is published is recognised from the manifest's
		// digest: nothing is pulled or pushed.
		if rev, same := o.unchanged(ctx, ref, u); same {
			o.remember(rev, tenantDigests(fullTree(u)))
			return &Result{Plan: &Plan{}, Revision: rev}, nil
		}
	}
	// Registries have no conditional tag write, so this is optimistic: read the tag's
	// digest with its tree, merge, and push only if the tag still has that digest just
	// before the push; if another writer moved it, merge again onto theirs. (A push by
	// someone else between that last check and ours is still possible, a window of one
	// request.)
	for attempt := 1; attempt <= ociAttempts; attempt++ {
		res, moved, err := o.publishOnce(ctx, ref, u, s)
		if err != nil {
			return nil, err
		}
		if !moved {
			res.Attempts = attempt
			return res, nil
		}
	}
	return nil, fmt.Errorf("pushing %s: the tag moved under %d attempts in a row; another writer is publishing", ref, ociAttempts)
}

// ociAttempts bounds how often a publish merges again after another writer moved the tag.
const ociAttempts = 5

// publishOnce merges the update onto the tag's current tree and pushes it, unless the
// tag moved since it was read (moved: nothing pushed, try again).
func (o *OCI) publishOnce(ctx context.Context, ref name.Reference, u Update, s Safety) (res *Result, moved bool, err error) {
	old, base, err := o.pull(ctx)
	if err != nil {
		return nil, false, err
	}
	tree, plan, err := checkedTree(old, u, s)
	if err != nil {
		return nil, false, err
	}
	img, err := o.Artifact(tree)
	if err != nil {
		return nil, false, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, false, err
	}
	res = &Result{Plan: plan, Revision: digest.String()}
	if base != "" {
		o.remember(base, tenantDigests(old))
	}
	o.remember(res.Revision, tenantDigests(tree))
	now, err := o.head(ctx, ref)
	switch {
	case err != nil:
		return nil, false, err
	case now == digest.String():
		return res, false, nil // the tag already points at this content: push nothing
	case now != base:
		return nil, true, nil
	}
	if err := remote.Write(ref, img, o.options(ctx)...); err != nil {
		return nil, false, fmt.Errorf("pushing %s: %w", ref, err)
	}
	res.Committed = true
	return res, false, nil
}

// notFound reports whether the registry answered that the tag or manifest does not exist.
func notFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// head returns the digest the tag points at ("" when there is no such tag).
func (o *OCI) head(ctx context.Context, ref name.Reference) (string, error) {
	desc, err := remote.Head(ref, o.options(ctx)...)
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", ref, err)
	}
	return desc.Digest.String(), nil
}

// Artifact builds the Flux artifact of a tree (path → content).
func (o *OCI) Artifact(tree map[string][]byte) (v1.Image, error) {
	layer, err := Tarball(tree)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, FluxConfigMediaType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(layer, FluxContentMediaType)})
	if err != nil {
		return nil, err
	}
	created := o.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	annotations := map[string]string{AnnotationCreated: created.UTC().Format(time.RFC3339), AnnotationTreeDigest: treeDigest(tree)}
	if o.Source != "" {
		annotations[AnnotationSource] = o.Source
	}
	if o.Revision != "" {
		annotations[AnnotationRevision] = o.Revision
	}
	return mutate.Annotations(img, annotations).(v1.Image), nil
}

// Tarball writes a tree as a reproducible gzip'd tar: entries sorted, directories
// included, fixed modes, owners and times.
func Tarball(tree map[string][]byte) ([]byte, error) {
	paths := make([]string, 0, len(tree))
	dirs := map[string]bool{}
	for p := range tree {
		paths = append(paths, p)
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		paths = append(paths, d+"/")
	}
	slices.Sort(paths)
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		hdr := &tar.Header{Name: p, ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(p, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(tree[p]))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(tree[p]); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// treeDigest is a digest of a tree's paths and contents (as TenantDigest's, over the
// whole tree).
func treeDigest(tree map[string][]byte) string {
	entries := make(gitrepo.Files, len(tree))
	for p, data := range tree {
		entries[p] = gitrepo.Entry{Hash: gitrepo.BlobHash(data)}
	}
	return entriesDigest(entries)
}

// unchanged reports whether the published artifact is exactly the one Eva builds from
// the tree of a full update, and its digest. The manifest's annotations are only a
// cheap first test (an update whose tree digest differs is not built): anyone who can
// write the tag can copy them onto other content, so the artifact counts as unchanged
// only when its manifest digest is that of Eva's own reproducible build, which covers
// the layer, the config and every annotation.
func (o *OCI) unchanged(ctx context.Context, ref name.Reference, u Update) (string, bool) {
	desc, err := remote.Get(ref, o.options(ctx)...)
	if err != nil {
		return "", false
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil || m.Annotations[AnnotationTreeDigest] == "" {
		return "", false
	}
	tree := fullTree(u)
	if treeDigest(tree) != m.Annotations[AnnotationTreeDigest] {
		return "", false
	}
	img, err := o.Artifact(tree)
	if err != nil {
		return "", false
	}
	digest, err := img.Digest()
	if err != nil || digest != desc.Digest {
		return "", false
	}
	return desc.Digest.String(), true
}

// fullTree is the tree a full update publishes: every listed tenant's files and the
// root kustomization listing them.
func fullTree(u Update) map[string][]byte {
	tree := map[string][]byte{}
	var codes []string
	for d, files := range u.Tenants {
		if files == nil {
			continue
		}
		codes = append(codes, strings.ToUpper(d))
		for _, f := range files {
			tree[f.Path] = f.Data
		}
	}
	root := render.RootKustomizationFile(u.deliveryDir(), codes)
	tree[root.Path] = root.Data
	return tree
}

// Pull reads the published artifact's tree; a missing tag is an empty tree.
func (o *OCI) Pull(ctx context.Context) (map[string][]byte, error) {
	tree, _, err := o.pull(ctx)
	return tree, err
}

// Read returns the published artifact's tree and the digest the tag points at, "" when
// there is no such tag (as GitRemote.Read for a missing branch).
func (o *OCI) Read(ctx context.Context) (map[string][]byte, string, error) { return o.pull(ctx) }

// pull reads the published artifact's tree and the digest the tag pointed at ("" and
// an empty tree when there is no such tag).
func (o *OCI) pull(ctx context.Context) (map[string][]byte, string, error) {
	ref, err := o.reference()
	if err != nil {
		return nil, "", err
	}
	img, err := remote.Image(ref, o.options(ctx)...)
	if notFound(err) {
		return map[string][]byte{}, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", ref, err)
	}
	tree, err := untarArtifact(ref, img)
	return tree, digest.String(), err
}

// untarArtifact checks an image is a Flux artifact holding only what Eva publishes
// (checkPublishedTree, as for a git branch) and returns its tree.
func untarArtifact(ref name.Reference, img v1.Image) (map[string][]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%s has %d layers; a Flux artifact has one", ref, len(layers))
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != FluxContentMediaType {
		return nil, fmt.Errorf("%s is not a Flux artifact (layer media type %q)", ref, mt)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tree, kinds, err := untarKinds(rc, defaultArchiveLimits)
	if err == nil {
		err = checkPublishedTree(kinds, "")
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	return tree, nil
}

// Bounds on an artifact read back from a registry, whoever wrote it: a Flux artifact of
// 10,000 tenants holds about 80,000 entries and 250 MB. A bigger one is refused rather
// than read into memory.
const (
	// MaxArtifactEntries bounds the entries (files, folders and others) of a layer.
	MaxArtifactEntries = 1 << 20
	// MaxArtifactBytes bounds the total size of a layer's files.
	MaxArtifactBytes = 2 << 30
	// MaxArtifactFileBytes bounds one file of a layer.
	MaxArtifactFileBytes = 64 << 20
)

// archiveLimits bounds what untar reads.
type archiveLimits struct {
	entries          int
	bytes, fileBytes int64
}

var defaultArchiveLimits = archiveLimits{entries: MaxArtifactEntries, bytes: MaxArtifactBytes, fileBytes: MaxArtifactFileBytes}

// Untar reads the regular files of a tar stream, within MaxArtifactEntries entries,
// MaxArtifactBytes in all and MaxArtifactFileBytes per file. Folders and symbolic links
// are left out; other entries (hard links, devices, FIFOs) are refused.
func Untar(r io.Reader) (map[string][]byte, error) {
	return untar(r, defaultArchiveLimits)
}

// untar is Untar within the given limits.
func untar(r io.Reader, limits archiveLimits) (map[string][]byte, error) {
	tree, _, err := untarKinds(r, limits)
	return tree, err
}

// untarKinds is untar that also returns the kind of every entry (folders and symbolic
// links included, by path without a trailing slash), for the caller to check the
// tree's shape.
func untarKinds(r io.Reader, limits archiveLimits) (map[string][]byte, map[string]filemode.FileMode, error) {
	tree, kinds := map[string][]byte{}, map[string]filemode.FileMode{}
	tr := tar.NewReader(r)
	var entries int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tree, kinds, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading artifact: %w", err)
		}
		if entries++; entries > limits.entries {
			return nil, nil, fmt.Errorf("reading artifact: more than %d entries; refused", limits.entries)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // metadata, not an entry of the tree
		}
		clean, mode, err := tarEntry(hdr)
		if err != nil {
			return nil, nil, err
		}
		if clean == "." {
			continue // the tree's own folder
		}
		if prev, seen := kinds[clean]; seen && prev != mode {
			// A file listed again as a folder would hide it from the shape check.
			return nil, nil, foreign(clean, "listed twice, as two kinds of entry")
		}
		kinds[clean] = mode
		if mode != filemode.Regular {
			continue
		}
		if hdr.Size > limits.fileBytes {
			return nil, nil, fmt.Errorf("artifact entry %q: %d bytes, more than a file may hold (%d); refused", hdr.Name, hdr.Size, limits.fileBytes)
		}
		if total += hdr.Size; total > limits.bytes {
			return nil, nil, fmt.Errorf("reading artifact: its files hold more than %d bytes; refused", limits.bytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return nil, nil, fmt.Errorf("reading artifact entry %q: %w", hdr.Name, err)
		}
		tree[clean] = data
	}
}

// tarEntry returns the path of a tar entry inside the tree and its kind as a git tree
// would record it (folder, regular file, symbolic link), refusing a path that leaves the
// tree and an entry of any other kind, which no tree Eva publishes holds.
func tarEntry(hdr *tar.Header) (string, filemode.FileMode, error) {
	clean := path.Clean(hdr.Name)
	if strings.HasPrefix(clean, "../") || clean == ".." || path.IsAbs(clean) {
		return "", 0, fmt.Errorf("artifact entry %q escapes the tree", hdr.Name)
	}
	var what string
	switch hdr.Typeflag {
	case tar.TypeDir:
		return clean, filemode.Dir, nil
	case tar.TypeReg:
		if clean == "." {
			return "", 0, fmt.Errorf("artifact entry %q: a file without a name; refused", hdr.Name)
		}
		return clean, filemode.Regular, nil
	case tar.TypeSymlink:
		return clean, filemode.Symlink, nil
	case tar.TypeLink:
		what = "a hard link"
	case tar.TypeFifo:
		what = "a FIFO"
	case tar.TypeChar, tar.TypeBlock:
		what = "a device"
	default:
		what = fmt.Sprintf("a tar entry of type %q", hdr.Typeflag)
	}
	return "", 0, foreign(clean, what)
}
