package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
)

// Revisions reads what a sink's destination holds, from the destination itself and
// never from what this process pushed: which revision is published now, and which files
// of a tenant a revision holds. An operator restarted, or one of several sharing a
// branch or tag, answers the same as the one that pushed.
type Revisions interface {
	// Head returns the revision published now (the branch's commit, the tag's
	// digest), "" when nothing is published yet.
	Head(ctx context.Context) (string, error)
	// TenantDigest returns the TenantDigest of the files of the tenant folder dir at a
	// revision, as the sink or the GitOps tool names it ("<commit>", "main@sha1:<commit>",
	// "<tag>@sha256:<digest>"). A revision that holds no such tenant answers
	// EmptyTenantDigest; one the destination does not know (not fetched, collected)
	// answers "" with no error.
	TenantDigest(ctx context.Context, revision, dir string) (string, error)
}

// TenantDigest is the digest of one tenant's published files: their paths and git blob
// ids, in path order. A git tree answers it without reading a blob, an OCI artifact
// from its files, and the operator from the files it renders: the three agree when the
// files do.
func TenantDigest(files []render.File) string {
	entries := make(gitrepo.Files, len(files))
	for _, f := range files {
		entries[f.Path] = gitrepo.Entry{Hash: gitrepo.BlobHash(f.Data)}
	}
	return entriesDigest(entries)
}

// EmptyTenantDigest is the TenantDigest of a tenant with no files: one a revision does
// not hold (removed, or never published).
var EmptyTenantDigest = entriesDigest(nil)

// entriesDigest digests paths and blob ids (modes are not part of it: Eva publishes
// regular files only, and a tree holding anything else is refused when read).
func entriesDigest(files gitrepo.Files) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%s\n", p, files[p].Hash)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// tenantDigests returns the TenantDigest of every tenant folder of a tree (path →
// content); tenants it does not list hold EmptyTenantDigest.
func tenantDigests(tree map[string][]byte) map[string]string {
	byTenant := map[string]gitrepo.Files{}
	for p, data := range tree {
		if d := tenantOf(p); d != "" {
			if byTenant[d] == nil {
				byTenant[d] = gitrepo.Files{}
			}
			byTenant[d][p] = gitrepo.Entry{Hash: gitrepo.BlobHash(data)}
		}
	}
	out := make(map[string]string, len(byTenant))
	for d, files := range byTenant {
		out[d] = entriesDigest(files)
	}
	return out
}

// revisionID strips what a GitOps tool adds to a revision ("main@sha1:<commit>",
// "latest@sha256:<digest>") and returns the commit or digest (algo is the digest
// algorithm a bare OCI digest lacks, "" for git).
func revisionID(revision, algo string) string {
	if _, after, ok := strings.Cut(revision, "@"); ok {
		revision = after
	}
	if algo == "" {
		if i := strings.LastIndex(revision, ":"); i >= 0 {
			revision = revision[i+1:]
		}
		return revision
	}
	if !strings.Contains(revision, ":") {
		revision = algo + ":" + revision
	}
	return revision
}
