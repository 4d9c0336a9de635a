package cli

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/aidonow/eva/internal/publish"
)

// fileCommit commits some files, and nothing else, on the current branch of the git
// repository holding them.
type fileCommit struct {
	repo *git.Repository
	wt   *git.Worktree
	rels []string
}

// prepareCommit finds the repository of the files and refuses, before anything is
// written, when other changes are staged: they would ride along in a commit that says
// it is about these files.
func prepareCommit(paths []string) (*fileCommit, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("nothing to commit")
	}
	first, err := filepath.Abs(paths[0])
	if err != nil {
		return nil, err
	}
	repo, err := git.PlainOpenWithOptions(filepath.Dir(first), &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("%s is not in a git repository (or pass --commit=false): %w", paths[0], err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("opening the worktree of %s: %w", paths[0], err)
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return nil, fmt.Errorf("resolving the worktree of %s: %w", paths[0], err)
	}
	fc := &fileCommit{repo: repo, wt: wt}
	ours := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", p, err)
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("%s is outside the repository at %s", p, root)
		}
		rel = filepath.ToSlash(rel)
		ours[rel] = true
		fc.rels = append(fc.rels, rel)
	}
	status, err := wt.Status()
	if err != nil {
		return nil, fmt.Errorf("reading the repository's status: %w", err)
	}
	for file, fs := range status {
		if !ours[file] && fs.Staging != git.Unmodified && fs.Staging != git.Untracked {
			return nil, fmt.Errorf("%s has staged changes (%s): commit or unstage them first, so the step's commit holds the release files only", file, string(fs.Staging))
		}
	}
	for _, rel := range fc.rels {
		// The step's commit says it records a step: edits of the release itself (or a
		// release never committed) are reviewed as such, in a commit of their own.
		// (Status lists changed and untracked files only.)
		if fs, listed := status[rel]; listed && (fs.Staging != git.Unmodified || fs.Worktree != git.Unmodified) {
			return nil, fmt.Errorf("%s has changes that are not committed: commit the release file first, then promote", rel)
		}
	}
	return fc, nil
}

// commit stages the files as they are now and commits them, returning the commit.
func (fc *fileCommit) commit(message string, author publish.Author) (string, error) {
	for _, rel := range fc.rels {
		if _, err := fc.wt.Add(rel); err != nil {
			return "", fmt.Errorf("staging %s: %w", rel, err)
		}
	}
	hash, err := fc.wt.Commit(message, &git.CommitOptions{
		Author: &object.Signature{Name: author.Name, Email: author.Email, When: time.Now()},
	})
	if err != nil {
		return "", fmt.Errorf("committing: %w", err)
	}
	return hash.String(), nil
}

// userIdentity is who commits in the repository as git would name them: GIT_AUTHOR_NAME
// and GIT_AUTHOR_EMAIL, else user.name and user.email of the repository's configuration
// (its own, the user's global one, the system's). ok is false when either is missing.
func (fc *fileCommit) userIdentity() (a publish.Author, ok bool) {
	a = publish.Author{Name: os.Getenv("GIT_AUTHOR_NAME"), Email: os.Getenv("GIT_AUTHOR_EMAIL")}
	if cfg, err := fc.repo.ConfigScoped(config.SystemScope); err == nil {
		a.Name = cmp.Or(a.Name, cfg.Author.Name, cfg.User.Name)
		a.Email = cmp.Or(a.Email, cfg.Author.Email, cfg.User.Email)
	}
	return a, a.Name != "" && a.Email != ""
}
