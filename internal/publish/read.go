package publish

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

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
	tree := map[string][]byte{}
	for p, e := range full {
		rel, ok := p, prefix == ""
		if !ok {
			rel, ok = strings.CutPrefix(p, prefix+"/")
		}
		if !ok {
			continue
		}
		if err := checkPublishedFile(rel, p, e.Mode); err != nil {
			return nil, "", err
		}
		data, err := readBlob(repo, e.Hash)
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
