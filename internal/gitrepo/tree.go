// Package gitrepo writes rendered trees into git repositories with go-git, building
// blobs and trees directly: the cost of a commit grows with what changed, not with the
// size of the repository, and the worktree is never scanned.
package gitrepo

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Entry is a file of a tree: its blob and mode.
type Entry struct {
	Hash plumbing.Hash
	Mode filemode.FileMode
}

// Files is a flat view of a tree: slash-separated path to entry.
type Files map[string]Entry

// ReadTree flattens the tree of a commit. A zero hash is an empty tree.
func ReadTree(s storer.EncodedObjectStorer, commit plumbing.Hash) (Files, plumbing.Hash, error) {
	files := Files{}
	if commit.IsZero() {
		return files, plumbing.ZeroHash, nil
	}
	c, err := object.GetCommit(s, commit)
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("reading commit %s: %w", commit, err)
	}
	tree, err := object.GetTree(s, c.TreeHash)
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("reading tree of %s: %w", commit, err)
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, entry, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, plumbing.ZeroHash, fmt.Errorf("walking tree of %s: %w", commit, err)
		}
		if entry.Mode == filemode.Dir {
			continue
		}
		files[name] = Entry{Hash: entry.Hash, Mode: entry.Mode}
	}
	return files, c.TreeHash, nil
}

// BlobHash returns the git object id of data as a blob.
func BlobHash(data []byte) plumbing.Hash {
	return plumbing.ComputeHash(plumbing.BlobObject, data)
}

// StoreBlob writes data as a blob unless the store already holds it, and returns its id.
func StoreBlob(s storer.EncodedObjectStorer, data []byte) (plumbing.Hash, error) {
	h := BlobHash(data)
	if s.HasEncodedObject(h) == nil {
		return h, nil
	}
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return h, err
	}
	if _, err := w.Write(data); err != nil {
		return h, err
	}
	if err := w.Close(); err != nil {
		return h, err
	}
	if _, err := s.SetEncodedObject(obj); err != nil {
		return h, fmt.Errorf("storing blob: %w", err)
	}
	return h, nil
}

// WriteTree stores the trees of files (only those the store lacks) and returns the id
// of the root tree.
func WriteTree(s storer.EncodedObjectStorer, files Files) (plumbing.Hash, error) {
	root := &dirNode{children: map[string]*dirNode{}, files: map[string]Entry{}}
	for p, e := range files {
		parts := strings.Split(p, "/")
		d := root
		for _, part := range parts[:len(parts)-1] {
			child, ok := d.children[part]
			if !ok {
				child = &dirNode{children: map[string]*dirNode{}, files: map[string]Entry{}}
				d.children[part] = child
			}
			d = child
		}
		d.files[parts[len(parts)-1]] = e
	}
	return root.write(s)
}

type dirNode struct {
	children map[string]*dirNode
	files    map[string]Entry
}

func (d *dirNode) write(s storer.EncodedObjectStorer) (plumbing.Hash, error) {
	entries := make([]object.TreeEntry, 0, len(d.children)+len(d.files))
	for name, child := range d.children {
		h, err := child.write(s)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	for name, e := range d.files {
		entries = append(entries, object.TreeEntry{Name: name, Mode: e.Mode, Hash: e.Hash})
	}
	return storeTree(s, flat(entries))
}

func flat(entries []object.TreeEntry) map[string]Entry {
	out := make(map[string]Entry, len(entries))
	for _, e := range entries {
		out[e.Name] = Entry{Hash: e.Hash, Mode: e.Mode}
	}
	return out
}

// WriteCommit stores a commit of tree on top of parent (zero for a root commit).
func WriteCommit(s storer.EncodedObjectStorer, tree, parent plumbing.Hash, author object.Signature, message string) (plumbing.Hash, error) {
	c := &object.Commit{Author: author, Committer: author, Message: message, TreeHash: tree}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encoding commit: %w", err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("storing commit: %w", err)
	}
	return h, nil
}

// Under reports whether p lies in the folder prefix ("" is the whole tree).
func Under(p, prefix string) bool {
	return prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// Join joins a folder prefix and a tree path.
func Join(prefix, p string) string {
	if prefix == "" {
		return p
	}
	return path.Join(prefix, p)
}
