package publish

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/aidonow/eva/internal/gitrepo"
)

// PublishChanges commits the tenants an update lists on top of the head, the way a
// remote branch is updated: only their published files are read and replaced, only the
// trees on their paths are rebuilt, and only their files change in the worktree and
// the index. It is how a re-render of a large fleet commits in time proportional to
// the change rather than to the fleet.
//
// The update must list every tenant whose render may differ from the head's, and the
// tenants removed (nil files); the caller knows them from its render cache. Tenants it
// does not list stay as published and count as rendered, so the mass-deletion guard
// and the Decommissioned rule apply exactly as to a full render.
func (l *LocalRepo) PublishChanges(u Update, s Safety, author Author, subject string) (*Result, error) {
	var baseTree plumbing.Hash
	if !l.head.IsZero() {
		c, err := l.repo.CommitObject(l.head)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", l.head, err)
		}
		baseTree = c.TreeHash
	}
	for d, files := range u.Tenants {
		for _, f := range files {
			if err := checkFilePath(f.Path); err != nil {
				return nil, err
			}
			if tenantOf(f.Path) != d {
				return nil, fmt.Errorf("file %s does not belong to tenant %s", f.Path, d)
			}
		}
	}
	pub := &published{view: gitrepo.NewView(l.repo.Storer, baseTree)}
	u.Full = false
	plan, err := pub.planUpdate(u)
	if err != nil {
		return nil, err
	}
	plan.Partial = false
	eff, err := pub.checked(u, plan, s, l.repo)
	if err != nil {
		return nil, err
	}
	res := &Result{Plan: plan, Revision: l.head.String()}
	if plan.Empty() && !l.head.IsZero() {
		return res, nil
	}
	content := map[plumbing.Hash][]byte{}
	changes, err := pub.changes(eff, func(data []byte) (gitrepo.Entry, error) {
		h, err := gitrepo.StoreBlob(l.repo.Storer, data)
		content[h] = data
		return gitrepo.Entry{Hash: h, Mode: filemode.Regular}, err
	})
	if err != nil {
		return nil, err
	}
	tree, _, err := pub.view.Edit(changes)
	if err != nil {
		return nil, err
	}
	if tree == baseTree && !l.head.IsZero() {
		return res, nil
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: time.Now()}
	commit, err := gitrepo.WriteCommit(l.repo.Storer, tree, l.head, sig, commitMessage(subject, plan))
	if err != nil {
		return nil, err
	}
	// The worktree and the index first, the branch last: a failure part way leaves the
	// branch where it was, and the next render (incremental or full) writes the same
	// files again.
	if err := l.applyToWorktree(changes, content); err != nil {
		return nil, err
	}
	if err := l.editIndex(changes, commit); err != nil {
		return nil, err
	}
	if err := l.repo.Storer.SetReference(plumbing.NewHashReference(l.branch, commit)); err != nil {
		return nil, fmt.Errorf("updating %s: %w", l.branch, err)
	}
	l.head, l.old = commit, nil
	res.Revision, res.Committed = commit.String(), true
	return res, nil
}

// applyToWorktree writes and removes the changed files in the worktree, once every
// path it touches is known to lead through folders only, to a regular file or nothing
// (see outDir).
func (l *LocalRepo) applyToWorktree(changes map[string]*gitrepo.Entry, content map[plumbing.Hash][]byte) error {
	out, err := openOutDir(l.dir)
	if err != nil {
		return err
	}
	defer out.close()
	paths := make([]string, 0, len(changes))
	for p := range changes {
		paths = append(paths, p)
	}
	if err := out.checkPaths(paths); err != nil {
		return err
	}
	dirs := newFolders(out)
	for p, e := range changes {
		rel := filepath.FromSlash(p)
		if e == nil {
			if err := out.remove(rel); err != nil {
				return err
			}
			continue
		}
		data := content[e.Hash]
		if same, err := out.holds(rel, data); err != nil || same {
			if err != nil {
				return err
			}
			continue
		}
		if _, err := dirs.ensure(filepath.Dir(rel)); err != nil {
			return err
		}
		if err := out.write(rel, data); err != nil {
			return err
		}
	}
	return nil
}

// editIndex applies the changes to the index, so `git status` stays clean. The index
// is spliced in place (gitrepo.EditIndex); one in another form is written anew from
// the commit's tree.
func (l *LocalRepo) editIndex(changes map[string]*gitrepo.Entry, commit plumbing.Hash) error {
	out, err := openOutDir(l.dir)
	if err != nil {
		return err
	}
	defer out.close()
	edits := make(map[string]*gitrepo.IndexEntry, len(changes))
	for p, e := range changes {
		if e == nil {
			edits[p] = nil
			continue
		}
		entry := &gitrepo.IndexEntry{Hash: e.Hash, Mode: e.Mode}
		if fi, err := out.root.Lstat(filepath.FromSlash(p)); err == nil {
			entry.Size, entry.ModTime = uint32(fi.Size()), fi.ModTime()
		}
		edits[p] = entry
	}
	err = gitrepo.EditIndex(filepath.Join(l.GitDir(), "index"), edits)
	if err == nil {
		return nil
	}
	if !errors.Is(err, gitrepo.ErrIndexFormat) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("writing index: %w", err)
	}
	files, _, err := gitrepo.ReadTree(l.repo.Storer, commit)
	if err != nil {
		return err
	}
	l.new = files
	return l.writeIndex(map[string]bool{})
}
