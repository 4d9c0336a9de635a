package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/aidonow/eva/internal/safetext"
)

// fleetState is the fleet repository commit a publish renders from: the git
// repository holding the tenant files, its commit, and the files evactl reads that
// differ from that commit.
type fleetState struct {
	// source is the repository's origin URL without credentials; revision
	// "<branch>@sha1:<commit>", as Flux writes revisions ("" outside a repository).
	source, revision string
	// changed are the input files (slash paths from the repository's root) that differ
	// from the commit: "path (modified|added|deleted)", sorted.
	changed []string
}

// readFleetState reads the state of the repository holding the first of inputs
// (files or folders evactl reads: the tenants, overlays, charts, rollouts, eva.yaml);
// inputs outside it are not its to say. Outside a git repository it is empty.
func readFleetState(inputs []string) (fleetState, error) {
	if len(inputs) == 0 {
		return fleetState{}, nil
	}
	s, root, tree, wt, err := fleetCommit(inputs[0])
	if err != nil || root == "" {
		return s, err
	}
	// Read here, not in fleetCommit: gitProvenance reads the commit alone, and the
	// rules take a walk of the worktree.
	patterns, err := gitignore.ReadPatterns(wt.Filesystem, nil)
	if err != nil {
		return fleetState{}, fmt.Errorf("reading the fleet's ignore rules: %w", err)
	}
	ignored := gitignore.NewMatcher(patterns)
	for _, in := range inputs {
		changed, err := changedFiles(root, in, tree, ignored)
		if err != nil {
			return fleetState{}, err
		}
		s.changed = append(s.changed, changed...)
	}
	slices.Sort(s.changed)
	s.changed = slices.Compact(s.changed)
	return s, nil
}

// fleetCommit opens the git repository holding dir: its source and revision, the
// root of its worktree ("" outside a repository, or for a bare one), the tree of its
// commit (nil before the first) and the worktree.
func fleetCommit(dir string) (s fleetState, root string, tree *object.Tree, wt *git.Worktree, err error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return fleetState{}, "", nil, nil, nil
	}
	if err != nil {
		return fleetState{}, "", nil, nil, fmt.Errorf("reading the fleet repository of %s: %w", dir, err)
	}
	if remote, err := repo.Remote("origin"); err == nil && len(remote.Config().URLs) > 0 {
		s.source = safetext.RedactURL(remote.Config().URLs[0])
	}
	switch head, err := repo.Head(); {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		// No commit yet: every file is added.
	case err != nil:
		return fleetState{}, "", nil, nil, fmt.Errorf("reading the fleet repository's HEAD: %w", err)
	default:
		s.revision = fmt.Sprintf("%s@sha1:%s", head.Name().Short(), head.Hash())
		commit, err := repo.CommitObject(head.Hash())
		if err == nil {
			tree, err = commit.Tree()
		}
		if err != nil {
			return fleetState{}, "", nil, nil, fmt.Errorf("reading the fleet's commit %s: %w", head.Hash(), err)
		}
	}
	if wt, err = repo.Worktree(); err != nil {
		return s, "", tree, nil, nil // bare: no files of its own on disk
	}
	if root, err = filepath.EvalSymlinks(wt.Filesystem.Root()); err != nil {
		return fleetState{}, "", nil, nil, err
	}
	return s, root, tree, wt, nil
}

// changedFiles lists the files under in (a file or folder inside the worktree at root)
// that differ from tree: modified, added, or deleted since (nil tree: no commit yet,
// every file added). A file the ignore rules keep out of git and the commit does not
// hold is no change, nor is a submodule; an input missing on disk and in the commit
// is none either.
func changedFiles(root, in string, tree *object.Tree, ignored gitignore.Matcher) ([]string, error) {
	abs, err := filepath.Abs(in)
	if err != nil {
		return nil, err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, nil // another repository's, or none
	}
	prefix := filepath.ToSlash(rel)
	committed, submodules, err := committedUnder(tree, prefix)
	if err != nil {
		return nil, err
	}
	var changed []string
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == abs {
			return nil
		}
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(root, p)
		name = filepath.ToSlash(name)
		if d.IsDir() {
			if d.Name() == ".git" || submodules[name] {
				return filepath.SkipDir
			}
			return nil
		}
		want, ok := committed[name]
		delete(committed, name)
		if !ok && ignored.Match(strings.Split(name, "/"), false) {
			return nil
		}
		hash, err := worktreeBlob(p, d)
		switch {
		case err != nil:
			return err
		case !ok:
			changed = append(changed, name+" (added)")
		case want != hash:
			changed = append(changed, name+" (modified)")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the fleet's files under %s: %w", in, err)
	}
	for name := range committed {
		changed = append(changed, name+" (deleted)")
	}
	return changed, nil
}

// committedUnder lists the files tree holds at prefix (a file, or a folder: "." for
// all) with their blob hashes, and the submodules there.
func committedUnder(tree *object.Tree, prefix string) (map[string]plumbing.Hash, map[string]bool, error) {
	files, submodules := map[string]plumbing.Hash{}, map[string]bool{}
	if tree == nil {
		return files, submodules, nil
	}
	sub := tree
	if prefix != "." {
		entry, err := tree.FindEntry(prefix)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return files, submodules, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the fleet's commit at %s: %w", prefix, err)
		}
		switch entry.Mode {
		case filemode.Dir:
			if sub, err = tree.Tree(prefix); err != nil {
				return nil, nil, fmt.Errorf("reading the fleet's commit at %s: %w", prefix, err)
			}
		case filemode.Submodule:
			submodules[prefix] = true
			return files, submodules, nil
		default:
			files[prefix] = entry.Hash
			return files, submodules, nil
		}
	}
	walker := object.NewTreeWalker(sub, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			return files, submodules, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the fleet's commit at %s: %w", prefix, err)
		}
		if prefix != "." {
			name = prefix + "/" + name
		}
		switch entry.Mode {
		case filemode.Dir:
		case filemode.Submodule:
			submodules[name] = true
		default:
			files[name] = entry.Hash
		}
	}
}

// worktreeBlob is the git blob hash of the file at p as it is on disk (a symbolic
// link's is its target, as git stores it).
func worktreeBlob(p string, d fs.DirEntry) (plumbing.Hash, error) {
	var data []byte
	var err error
	if d.Type()&fs.ModeSymlink != 0 {
		var target string
		target, err = os.Readlink(p)
		data = []byte(target)
	} else {
		data, err = os.ReadFile(p)
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), nil
}

// trailers are the lines the published commit names the fleet commit with.
func (s fleetState) trailers() []string {
	var lines []string
	if s.revision != "" {
		lines = append(lines, "Eva-Fleet-Revision: "+s.revision)
	}
	if s.source != "" {
		lines = append(lines, "Eva-Fleet-Source: "+s.source)
	}
	if len(s.changed) > 0 && s.revision != "" {
		lines = append(lines, fmt.Sprintf("Eva-Fleet-Uncommitted: %d files", len(s.changed)))
	}
	return lines
}

// checkClean refuses a publish from files that differ from the fleet's commit, unless
// allowed: the published tree would name a commit it was not rendered from. The file
// names are escaped: a tenant's pull request names its files, and the message reaches
// CI logs.
func (s fleetState) checkClean(allowDirty bool) error {
	if len(s.changed) == 0 || allowDirty {
		return nil
	}
	shown := s.changed
	if len(shown) > 5 {
		shown = append(slices.Clone(shown[:5]), fmt.Sprintf("and %d more", len(s.changed)-5))
	}
	at := "no commit yet"
	if s.revision != "" {
		at = "commit " + s.revision
	}
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("the fleet's files differ from %s: %s; commit them first, so that the published tree names the commit it was rendered from, or pass --allow-dirty",
		at, safetext.Escape(strings.Join(shown, ", ")))}
}
