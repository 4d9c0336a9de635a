package publish

import (
	"context"
	"os"
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
// under flux/ and tenants/. A missing folder is an empty tree.
func ReadDir(dir string) (map[string][]byte, error) {
	tree := map[string][]byte{}
	if data, err := os.ReadFile(filepath.Join(dir, render.RootKustomization)); err == nil {
		tree[render.RootKustomization] = data
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	for _, top := range append([]string{render.TenantsDir}, render.DeliveryDirs...) {
		err := filepath.WalkDir(filepath.Join(dir, top), func(p string, e os.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			if err != nil || e.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[filepath.ToSlash(rel)] = data
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return tree, nil
}

// TenantOf returns the tenant folder a tree path belongs to ("" for shared files).
func TenantOf(p string) string { return tenantOf(strings.TrimPrefix(p, "./")) }
