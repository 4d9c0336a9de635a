package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
)

// DefaultBranch is the branch Eva commits to in a repository it creates.
const DefaultBranch = "main"

// Author is who commits a render.
type Author struct{ Name, Email string }

// DefaultAuthor is used when none is configured.
var DefaultAuthor = Author{Name: "Eva", Email: "eva@aidonow.com"}

// LocalRepo publishes a render into a git repository on disk, creating it if needed:
// the files land in its worktree and are committed on its current branch. Rendering
// streams files in through Put; Commit then checks the plan, updates the worktree and
// commits. Nothing in the worktree changes before the plan has passed its checks.
type LocalRepo struct {
	dir    string
	repo   *git.Repository
	head   plumbing.Hash
	branch plumbing.ReferenceName
	old    gitrepo.Files
	// oldTree is the head's tree, read with old.
	oldTree plumbing.Hash
	// partial marks a partial update (see Plan.Partial).
	partial bool
	mu      sync.Mutex // guards new, staged and content during Put
	new     gitrepo.Files
	// staged holds the objects a render creates until Commit writes them as one pack.
	staged *gitrepo.Staging
	// content is the data of the blobs Put staged, for the worktree.
	content map[plumbing.Hash][]byte
}

// OpenLocal opens (or initialises) the repository at dir.
func OpenLocal(dir string) (*LocalRepo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInitWithOptions(dir, &git.PlainInitOptions{
			InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(DefaultBranch)},
		})
	}
	if err != nil {
		return nil, fmt.Errorf("opening git repository %s: %w", dir, err)
	}
	l := &LocalRepo{dir: dir, repo: repo, new: gitrepo.Files{}, staged: gitrepo.NewStaging(), content: map[plumbing.Hash][]byte{}}
	headRef, err := repo.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return nil, fmt.Errorf("reading HEAD of %s: %w", dir, err)
	}
	l.branch = headRef.Target()
	if headRef.Type() == plumbing.HashReference {
		return nil, fmt.Errorf("%s: HEAD is detached; check out a branch first", dir)
	}
	if ref, err := repo.Storer.Reference(l.branch); err == nil {
		l.head = ref.Hash()
	} else if !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, fmt.Errorf("reading %s of %s: %w", l.branch, dir, err)
	}
	return l, nil
}

// PeekLocal returns the commit the current branch of the repository at dir points at,
// and its .git folder, creating nothing; ok is false when there is no such repository
// or it has no commit yet.
func PeekLocal(dir string) (head, gitDir string, ok bool) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return "", "", false
	}
	ref, err := repo.Head()
	if err != nil {
		return "", "", false
	}
	return ref.Hash().String(), filepath.Join(dir, git.GitDirName), true
}

// Head returns the commit the branch points at ("" in an empty repository).
func (l *LocalRepo) Head() string {
	if l.head.IsZero() {
		return ""
	}
	return l.head.String()
}

// GitDir returns the repository's .git folder.
func (l *LocalRepo) GitDir() string { return filepath.Join(l.dir, git.GitDirName) }

// oldFiles returns the head's tree as flat files, read on first use: a publish of a few
// tenants (PublishChanges) never reads the whole tree.
func (l *LocalRepo) oldFiles() (gitrepo.Files, error) {
	if l.old == nil {
		files, tree, err := gitrepo.ReadTree(l.repo.Storer, l.head)
		if err != nil {
			return nil, err
		}
		if files == nil {
			files = gitrepo.Files{}
		}
		l.old, l.oldTree = files, tree
	}
	return l.old, nil
}

// Put records one rendered file and stores its blob. It is safe for concurrent use.
func (l *LocalRepo) Put(f render.File) error {
	if err := checkFilePath(f.Path); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h, err := gitrepo.StoreBlob(l.staged, f.Data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	l.content[h] = f.Data
	l.new[f.Path] = gitrepo.Entry{Hash: h, Mode: filemode.Regular}
	return nil
}

// Result is what a publish did.
type Result struct {
	Plan      *Plan
	Revision  string // the commit (or OCI digest) now published
	Committed bool   // something new was published
	Attempts  int    // pushes tried (git remotes)
}

// Commit checks the plan against the safety rules, brings the worktree to the new
// render and commits it (nothing when nothing changed).
func (l *LocalRepo) Commit(safety Safety, author Author, subject string) (*Result, error) {
	if _, err := l.oldFiles(); err != nil {
		return nil, err
	}
	plan := MakePlan(l.old, l.new)
	plan.Partial = l.partial
	if err := plan.Check(safety, l.readOld); err != nil {
		return nil, err
	}
	res := &Result{Plan: plan, Revision: l.head.String()}
	tree, err := gitrepo.WriteTree(l.staged, l.new)
	if err != nil {
		return nil, err
	}
	written, err := l.syncWorktree()
	if err != nil {
		return nil, err
	}
	if tree == l.oldTree && !l.head.IsZero() {
		return res, l.writeIndex(written)
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: time.Now()}
	commit, err := gitrepo.WriteCommit(l.staged, tree, l.head, sig, commitMessage(subject, plan))
	if err != nil {
		return nil, err
	}
	// Every object the commit needs is in the repository before the branch names it.
	if err := l.writeStaged(); err != nil {
		return nil, err
	}
	if err := l.repo.Storer.SetReference(plumbing.NewHashReference(l.branch, commit)); err != nil {
		return nil, fmt.Errorf("updating %s: %w", l.branch, err)
	}
	l.head = commit
	res.Revision, res.Committed = commit.String(), true
	return res, l.writeIndex(written)
}

// writeStaged writes the objects the render staged (blobs, trees, the commit) into the
// repository as one pack, leaving out the blobs the head already has.
func (l *LocalRepo) writeStaged() error {
	fs, ok := l.repo.Storer.(*filesystem.Storage)
	if !ok {
		for h, o := range l.staged.Objects {
			if l.repo.Storer.HasEncodedObject(h) != nil {
				if _, err := l.repo.Storer.SetEncodedObject(o); err != nil {
					return fmt.Errorf("writing object %s: %w", h, err)
				}
			}
		}
		return nil
	}
	present := make(map[plumbing.Hash]bool, len(l.old))
	for _, e := range l.old {
		present[e.Hash] = true
	}
	wrote, err := l.staged.WritePack(filepath.Join(fs.Filesystem().Root(), "objects"), func(h plumbing.Hash) bool { return present[h] })
	if err != nil {
		return fmt.Errorf("writing the render's objects: %w", err)
	}
	if wrote {
		fs.Reindex()
	}
	return nil
}

// commitMessage is a local render's commit message: the subject, then the tenants the
// plan adds, changes and removes.
func commitMessage(subject string, plan *Plan) string {
	msg := subject + "\n"
	if s := plan.Summary(); s != "" {
		msg += "\n" + s
	}
	return msg
}

func (l *LocalRepo) readOld(p string) ([]byte, error) {
	e, ok := l.old[p]
	if !ok {
		return nil, fmt.Errorf("%s is not in the published tree", p)
	}
	return readBlob(l.repo, e.Hash)
}

func readBlob(repo *git.Repository, h plumbing.Hash) ([]byte, error) {
	blob, err := repo.BlobObject(h)
	if err != nil {
		return nil, err
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// syncWorktree writes the files that differ from the previous commit (or are missing
// on disk) and deletes the files the render no longer has. It returns the paths written.
// Nothing is written before every path it writes or removes is known to lead through
// folders only, to a regular file or nothing (see outDir).
func (l *LocalRepo) syncWorktree() (map[string]bool, error) {
	out, err := openOutDir(l.dir)
	if err != nil {
		return nil, err
	}
	defer out.close()
	type job struct {
		path string
		data []byte
		keep bool // published unchanged: write only when missing
	}
	jobs := make([]job, 0, len(l.new))
	paths := make([]string, 0, len(l.new))
	for p, e := range l.new {
		j := job{path: p}
		if o, ok := l.old[p]; ok && o.Hash == e.Hash {
			j.keep = true
		}
		data, ok := l.content[e.Hash]
		if !ok {
			var err error
			if data, err = readBlob(l.repo, e.Hash); err != nil {
				return nil, fmt.Errorf("reading %s back: %w", p, err)
			}
		}
		j.data = data
		jobs = append(jobs, j)
		paths = append(paths, p)
	}
	var removed []string
	for p := range l.old {
		if _, ok := l.new[p]; !ok {
			removed = append(removed, p)
		}
	}
	if err := out.checkPaths(append(paths, removed...)); err != nil {
		return nil, err
	}
	// Files are written on several goroutines: each costs a few system calls, which
	// overlap.
	wrote := make([]bool, len(jobs))
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	dirs := newFolders(out)
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(jobs); i = int(next.Add(1)) - 1 {
				wrote[i], errs[i] = writeWorktreeFile(dirs, jobs[i].path, jobs[i].data, jobs[i].keep)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	written := make(map[string]bool, len(jobs))
	for i, j := range jobs {
		if wrote[i] {
			written[j.path] = true
		}
	}
	for _, p := range removed {
		if err := out.remove(filepath.FromSlash(p)); err != nil {
			return nil, err
		}
	}
	return written, nil
}

// writeWorktreeFile makes the file at p (a tree path) hold data. A file kept from the
// published tree is left alone when it exists (wrote false); a file already holding
// data is not rewritten.
func writeWorktreeFile(dirs *folders, p string, data []byte, keep bool) (wrote bool, err error) {
	rel := filepath.FromSlash(p)
	created, err := dirs.ensure(filepath.Dir(rel))
	if err != nil {
		return false, err
	}
	if !created {
		if keep {
			// Published unchanged and of the right size on disk: left as it is (a
			// render interrupted part way is caught by the size, most of the time).
			if fi, err := dirs.out.checkFile(rel); err != nil {
				return false, err
			} else if fi != nil && fi.Size() == int64(len(data)) {
				return false, nil
			}
		}
		if same, err := dirs.out.holds(rel, data); err != nil || same {
			return same, err
		}
	}
	if err := dirs.out.write(rel, data); err != nil {
		return false, err
	}
	return true, nil
}

// writeIndex makes the index match the commit, so `git status` in the folder is clean.
// Files written now carry their stat data; others get none, which makes git re-check
// their content rather than trust a stale stat.
func (l *LocalRepo) writeIndex(written map[string]bool) error {
	idx := &index.Index{Version: 2}
	paths := make([]string, 0, len(l.new))
	for p := range l.new {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out, err := openOutDir(l.dir)
	if err != nil {
		return err
	}
	defer out.close()
	for _, p := range paths {
		e := &index.Entry{Name: p, Hash: l.new[p].Hash, Mode: l.new[p].Mode}
		if written[p] {
			if fi, err := out.root.Lstat(filepath.FromSlash(p)); err == nil {
				e.Size = uint32(fi.Size())
				e.ModifiedAt = fi.ModTime()
			}
		}
		idx.Entries = append(idx.Entries, e)
	}
	if err := l.repo.Storer.SetIndex(idx); err != nil {
		return fmt.Errorf("writing index: %w", err)
	}
	return nil
}

// LocalDir is the Sink of a git repository on disk (created if missing): the same
// interface the git and OCI sinks offer, for the operator and for tests.
type LocalDir struct {
	Dir     string
	Author  Author
	Subject string
}

// Publish implements Sink: the update is merged into the repository's current tree
// (only the tenants it lists change, unless it is full) and committed.
func (d *LocalDir) Publish(_ context.Context, u Update, s Safety) (*Result, error) {
	l, err := OpenLocal(d.Dir)
	if err != nil {
		return nil, err
	}
	old, err := l.oldFiles()
	if err != nil {
		return nil, err
	}
	next, err := merge(old, u.clone(), func(data []byte) (gitrepo.Entry, error) {
		h, err := gitrepo.StoreBlob(l.repo.Storer, data)
		return gitrepo.Entry{Hash: h, Mode: filemode.Regular}, err
	})
	if err != nil {
		return nil, err
	}
	l.new, l.partial = next, !u.Full
	author := d.Author
	if author.Name == "" {
		author = DefaultAuthor
	}
	return l.Commit(s, author, orSubject(d.Subject))
}

func orSubject(s string) string {
	if s == "" {
		return "eva: publish tenants"
	}
	return s
}

var (
	_ Sink = (*LocalDir)(nil)
	_ Sink = (*GitRemote)(nil)
	_ Sink = (*OCI)(nil)
)
