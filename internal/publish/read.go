package publish

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
)

// Read returns the published tree of the branch (under Path) and its commit.
func (g *GitRemote) Read(ctx context.Context) (map[string][]byte, string, error) {
	prefix, err := RepoPath(g.Path)
	if err != nil {
		return nil, "", err
	}
	repo, err := g.open()
	if err != nil {
		return nil, "", err
	}
	head, err := g.fetch(ctx, repo)
	if err != nil {
		return nil, "", err
	}
	full, _, err := gitrepo.ReadTree(repo.Storer, head)
	if err != nil {
		return nil, "", err
	}
	kinds, hashes := map[string]filemode.FileMode{}, map[string]plumbing.Hash{}
	for p, e := range full {
		if prefix != "" && strings.HasPrefix(prefix+"/", p+"/") {
			// A file at the publish path or above it: the folder is not there.
			return nil, "", foreign(p, "not a folder (the publish path is "+prefix+")")
		}
		rel, ok := p, prefix == ""
		if !ok {
			rel, ok = strings.CutPrefix(p, prefix+"/")
		}
		if ok {
			kinds[rel], hashes[rel] = e.Mode, e.Hash
		}
	}
	if err := checkPublishedTree(kinds, prefix); err != nil {
		return nil, "", err
	}
	tree := make(map[string][]byte, len(hashes))
	for rel, h := range hashes {
		data, err := readBlob(repo, h)
		if err != nil {
			return nil, "", err
		}
		tree[rel] = data
	}
	rev := ""
	if !head.IsZero() {
		rev = head.String()
	}
	return tree, rev, nil
}

// checkPublishedTree checks the shape of a published tree, flattened (path relative to
// the managed folder → kind as git records it; prefix is that folder in the repository,
// "" for the root): every entry by checkPublishedFile, and only folders where the tree
// needs them, at Eva's own folders (tenants/, flux/, argocd/) and above every entry. A
// git branch (Read) and an OCI artifact (untarArtifact) are both checked by it, so what
// is refused on one is refused on the other.
func checkPublishedTree(kinds map[string]filemode.FileMode, prefix string) error {
	owned := ownedDirs()
	for _, rel := range slices.Sorted(maps.Keys(kinds)) {
		mode, p := kinds[rel], gitrepo.Join(prefix, rel)
		if err := checkPublishedFile(rel, p, mode); err != nil {
			return err
		}
		if mode != filemode.Dir && slices.Contains(owned, rel) {
			return foreign(p, "not a folder")
		}
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			if m, ok := kinds[d]; ok && m != filemode.Dir {
				return foreign(gitrepo.Join(prefix, d), "not a folder")
			}
		}
	}
	return nil
}

// ReadDir returns the GitOps tree in a folder: the root kustomization and the files
// under flux/ and tenants/. A missing folder is an empty tree. A symlink, FIFO or
// device in it is refused with its path: the tree is read only inside the folder.
func ReadDir(dir string) (map[string][]byte, error) {
	tree := map[string][]byte{}
	out, err := openOutDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return tree, nil
	}
	if err != nil {
		return nil, err
	}
	defer out.close()
	if data, ok, err := out.read(render.RootKustomization); err != nil {
		return nil, err
	} else if ok {
		tree[render.RootKustomization] = data
	}
	for _, top := range ownedDirs() {
		exists, err := out.checkDir(top)
		if err != nil {
			return nil, err
		}
		if !exists {
			continue
		}
		err = fs.WalkDir(out.root.FS(), top, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if !e.Type().IsRegular() {
				return out.refuse(filepath.FromSlash(p), describe(e.Type()))
			}
			data, ok, err := out.read(filepath.FromSlash(p))
			if ok {
				tree[p] = data
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return tree, nil
}

// TenantOf returns the tenant folder a tree path belongs to ("" for shared files).
func TenantOf(p string) string { return tenantOf(strings.TrimPrefix(p, "./")) }
