package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/safetext"
)

// GitRemote publishes to a branch of a remote git repository through a local cache:
// fetch, merge the update into the remote head (only the tenants that changed), one
// commit, fast-forward push. A rejected push (someone else pushed first) is retried on
// the new head with jittered backoff, so concurrent publishers lose nothing.
type GitRemote struct {
	// URL is the repository. Credentials in it (https://user:token@host/…) are used as
	// Auth when Auth is nil, and never stored in the cache or shown in messages; a query
	// or fragment is refused.
	URL    string
	Branch string
	// Path is the folder of the repository that holds the tree ("" for the root).
	Path   string
	Auth   transport.AuthMethod
	Author Author
	// CacheDir holds the local bare clone; it is created if missing.
	CacheDir string
	// Attempts bounds the push attempts (default 8).
	Attempts int
	// Subject is the first line of the commit message.
	Subject string
	// Trailers end the commit message ("Key: value" lines, as git interpret-trailers
	// reads them): the fleet commit the tree was rendered from.
	Trailers []string

	// beforePush, in tests, runs between the merge and the push to stage a race.
	beforePush func()

	// mu keeps go-git operations on the cache one at a time (publishes and reads).
	mu sync.Mutex
	// digests remembers answers of TenantDigest by commit and tenant folder, under
	// digestsMu alone: a known answer never waits for a publish holding mu.
	digestsMu sync.Mutex
	digests   map[[2]string]string
}

const remoteName = "origin"

// Publish implements Sink.
func (g *GitRemote) Publish(ctx context.Context, u Update, s Safety) (*Result, error) {
	if _, err := RepoPath(g.Path); err != nil {
		return nil, err
	}
	if _, _, err := g.endpoint(); err != nil {
		return nil, err
	}
	if err := CheckAuthor(g.Author); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	repo, err := g.open()
	if err != nil {
		return nil, err
	}
	attempts := g.Attempts
	if attempts <= 0 {
		attempts = 8
	}
	var effective *Update
	for attempt := 1; ; attempt++ {
		res, err := g.attempt(ctx, repo, u, s, &effective)
		if err == nil {
			res.Attempts = attempt
			return res, nil
		}
		if !errors.Is(err, errRejected) || attempt >= attempts {
			if errors.Is(err, errRejected) {
				return nil, fmt.Errorf("push to %s %s still rejected after %d attempts: %w", g.shown(), g.Branch, attempt, err)
			}
			return nil, err
		}
		// Someone pushed first: wait a little (jittered, growing) and redo the merge on
		// the new head.
		backoff := time.Duration(50*(1<<min(attempt, 6))) * time.Millisecond
		backoff += time.Duration(rand.Int64N(int64(backoff)))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

var errRejected = errors.New("push rejected: the branch moved")

// endpoint splits the repository URL into the URL to fetch and push (no credentials in
// it) and the credentials to use: Auth, or else those the URL held. A query or a
// fragment is refused: git does not need one, and it would carry a token into logs.
func (g *GitRemote) endpoint() (string, transport.AuthMethod, error) {
	u, err := url.Parse(g.URL)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		// A local path, or an scp-like address (git@host:repo) whose user is SSH's.
		if strings.ContainsRune(g.URL, '?') {
			return "", nil, fmt.Errorf("repository URL %s: a query is not allowed (it may hold a token); pass credentials another way", g.shown())
		}
		return g.URL, g.Auth, nil
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", nil, fmt.Errorf("repository URL %s: a query or fragment is not allowed (it may hold a token); pass credentials another way", g.shown())
	}
	auth := g.Auth
	if u.User != nil {
		name := u.User.Username()
		password, hasPassword := u.User.Password()
		switch {
		case u.Scheme == "ssh" || u.Scheme == "git+ssh" || u.Scheme == "ssh+git":
			u.User = url.User(name) // SSH's user (git) is part of the address
		default:
			if auth == nil && (name != "" || hasPassword) {
				auth = &githttp.BasicAuth{Username: name, Password: password}
			}
			u.User = nil
		}
	}
	return u.String(), auth, nil
}

// shown is the repository URL as messages and the cache may hold it.
func (g *GitRemote) shown() string { return safetext.RedactURL(g.URL) }

// transportURL is the repository URL without credentials (the URL as given when it
// cannot be used: endpoint says why at the start of each operation).
func (g *GitRemote) transportURL() string {
	u, _, err := g.endpoint()
	if err != nil {
		return g.shown()
	}
	return u
}

// auth is the credentials of the remote: Auth, or those its URL held.
func (g *GitRemote) auth() transport.AuthMethod {
	_, auth, _ := g.endpoint()
	return auth
}

// CheckAuthor refuses a commit author git would not write as given: a newline (or
// another control character) in the name or email ends the signature line and can
// forge headers or trailers, and '<' or '>' forge the email's bounds.
func CheckAuthor(a Author) error {
	for _, f := range []struct{ what, value string }{{"name", a.Name}, {"email", a.Email}} {
		if strings.ContainsAny(f.value, "<>") || safetext.Escape(f.value) != f.value {
			return fmt.Errorf("commit author %s %s: holds '<', '>', a newline or another control character, which git would write as another author", f.what, safetext.Value(f.value))
		}
	}
	return nil
}

func (g *GitRemote) open() (*git.Repository, error) {
	if _, _, err := g.endpoint(); err != nil {
		return nil, err
	}
	clean := g.transportURL()
	dir := g.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		sum := sha256.Sum256([]byte(clean))
		dir = filepath.Join(base, "eva", "git", hex.EncodeToString(sum[:8]))
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		repo, err = git.PlainInit(dir, true)
		if err == nil {
			_, err = repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{clean}})
		}
	} else if err == nil {
		err = scrubRemote(repo, clean)
	}
	if err != nil {
		return nil, fmt.Errorf("git cache %s: %w", dir, err)
	}
	return repo, nil
}

// scrubRemote makes the cache's remote URL the clean one: a cache made by an earlier
// version may hold the URL with its credentials.
func scrubRemote(repo *git.Repository, clean string) error {
	cfg, err := repo.Config()
	if err != nil {
		return err
	}
	r, ok := cfg.Remotes[remoteName]
	if !ok || (len(r.URLs) == 1 && r.URLs[0] == clean) {
		return nil
	}
	r.URLs = []string{clean}
	return repo.SetConfig(cfg)
}

func (g *GitRemote) remoteRef() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(remoteName, g.Branch)
}

// fetch brings the remote branch into the cache and returns its head (zero when the
// branch does not exist yet).
func (g *GitRemote) fetch(ctx context.Context, repo *git.Repository) (plumbing.Hash, error) {
	var progress bytes.Buffer
	spec := config.RefSpec(fmt.Sprintf("+refs/heads/%s:%s", g.Branch, g.remoteRef()))
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName, RemoteURL: g.transportURL(), RefSpecs: []config.RefSpec{spec},
		Auth: g.auth(), Progress: &progress, Force: true, Tags: git.NoTags,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
	case errors.Is(err, git.NoMatchingRefSpecError{}) || isMissingRef(err):
		return plumbing.ZeroHash, nil // a new branch
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return plumbing.ZeroHash, nil
	default:
		return plumbing.ZeroHash, fmt.Errorf("fetching %s from %s: %w", g.Branch, g.shown(), withServerMessage(err, &progress))
	}
	ref, err := repo.Storer.Reference(g.remoteRef())
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ref.Hash(), nil
}

func isMissingRef(err error) bool {
	return err != nil && strings.Contains(err.Error(), "couldn't find remote ref")
}

func (g *GitRemote) attempt(ctx context.Context, repo *git.Repository, u Update, s Safety, effective **Update) (*Result, error) {
	head, err := g.fetch(ctx, repo)
	if err != nil {
		return nil, err
	}
	baseTree := plumbing.ZeroHash
	if !head.IsZero() {
		c, err := object.GetCommit(repo.Storer, head)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", head, err)
		}
		baseTree = c.TreeHash
	}
	prefix, err := RepoPath(g.Path)
	if err != nil {
		return nil, err
	}
	pub := &published{view: gitrepo.NewView(repo.Storer, baseTree), prefix: prefix}
	plan, err := pub.planUpdate(u)
	if err != nil {
		return nil, err
	}
	if *effective == nil {
		// First attempt: judge the update against what is published now, and keep only
		// the tenants it really changes. A retry re-applies exactly those on the newer
		// head, so it never reverts what another publisher changed meanwhile.
		eff, err := pub.checked(u, plan, s, repo)
		if err != nil {
			return nil, err
		}
		*effective = &eff
	} else if plan, err = pub.planUpdate(**effective); err != nil {
		return nil, err
	}
	// Every object the new commit introduces is collected for the push.
	var objects []plumbing.Hash
	changes, err := pub.changes(**effective, func(data []byte) (gitrepo.Entry, error) {
		h, err := gitrepo.StoreBlob(repo.Storer, data)
		objects = append(objects, h)
		return gitrepo.Entry{Hash: h, Mode: filemode.Regular}, err
	})
	if err != nil {
		return nil, err
	}
	tree, trees, err := pub.view.Edit(changes)
	if err != nil {
		return nil, err
	}
	objects = append(objects, trees...)
	if tree == baseTree && !head.IsZero() {
		return &Result{Plan: plan, Revision: head.String()}, nil
	}
	msg := g.Subject
	if msg == "" {
		msg = "eva: publish tenants"
	}
	if sum := plan.Summary(); sum != "" {
		msg += "\n\n" + sum
	}
	if len(g.Trailers) > 0 {
		msg = strings.TrimRight(msg, "\n") + "\n\n" + strings.Join(g.Trailers, "\n") + "\n"
	}
	author := g.Author
	if author.Name == "" {
		author = DefaultAuthor
	}
	commit, err := gitrepo.WriteCommit(repo.Storer, tree, head, object.Signature{Name: author.Name, Email: author.Email, When: time.Now()}, msg)
	if err != nil {
		return nil, err
	}
	if g.beforePush != nil {
		g.beforePush()
	}
	err = gitrepo.PushUpdate(ctx, repo.Storer, g.transportURL(), g.auth(), plumbing.NewBranchReferenceName(g.Branch), head, commit, append(objects, commit))
	if errors.Is(err, gitrepo.ErrStale) {
		return nil, fmt.Errorf("%w: %v", errRejected, err)
	}
	if err != nil {
		return nil, err
	}
	// Record what the remote now holds, so the next publish starts from it.
	if err := repo.Storer.SetReference(plumbing.NewHashReference(g.remoteRef(), commit)); err != nil {
		return nil, err
	}
	return &Result{Plan: plan, Revision: commit.String(), Committed: true}, nil
}

// withServerMessage adds what the server printed (a hook's message) to an error.
func withServerMessage(err error, progress *bytes.Buffer) error {
	if msg := gitrepo.ServerMessage(progress); msg != "" {
		return fmt.Errorf("%w (server said: %s)", err, msg)
	}
	return err
}

// Head implements Revisions: the branch's commit on the remote, fetched into the cache.
func (g *GitRemote) Head(ctx context.Context) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	repo, err := g.open()
	if err != nil {
		return "", err
	}
	head, err := g.fetch(ctx, repo)
	if err != nil || head.IsZero() {
		return "", err
	}
	return head.String(), nil
}

// TenantDigest implements Revisions: the tenant's folder and delivery files in the
// commit's tree (a few tree objects, no blob), from the cache, which is fetched first
// when it lacks the commit. Answers are cached: a commit never changes.
func (g *GitRemote) TenantDigest(ctx context.Context, revision, dir string) (string, error) {
	commit := revisionID(revision, "")
	if !plumbing.IsHash(commit) {
		return "", nil
	}
	prefix, err := RepoPath(g.Path)
	if err != nil {
		return "", err
	}
	key := [2]string{commit, dir}
	g.digestsMu.Lock()
	d, known := g.digests[key]
	g.digestsMu.Unlock()
	if known {
		return d, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	repo, err := g.open()
	if err != nil {
		return "", err
	}
	c, err := object.GetCommit(repo.Storer, plumbing.NewHash(commit))
	if err != nil {
		if _, err := g.fetch(ctx, repo); err != nil {
			return "", err
		}
		if c, err = object.GetCommit(repo.Storer, plumbing.NewHash(commit)); err != nil {
			return "", nil // not on the branch: unknown
		}
	}
	files, err := (&published{view: gitrepo.NewView(repo.Storer, c.TreeHash), prefix: prefix}).tenantFiles(dir)
	if err != nil {
		return "", fmt.Errorf("reading tenant %s at %s: %w", dir, commit, err)
	}
	d = entriesDigest(files)
	g.digestsMu.Lock()
	if g.digests == nil || len(g.digests) > 1<<14 {
		g.digests = map[[2]string]string{}
	}
	g.digests[key] = d
	g.digestsMu.Unlock()
	return d, nil
}
