package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/rendercache"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// reuse is what a render may take from the cache of the repository it commits into.
type reuse struct {
	cache *rendercache.Cache
	// head is the commit the repository's branch points at now.
	head string
}

// loadOptions lets the tenant load skip files the cached render found valid, when the
// cache describes the head and was made with the same shared inputs (the catalog among
// them).
func (ru *reuse) loadOptions(key string) tenantfile.LoadOptions {
	// Only with a fresh cache: a stub must not be rendered, and after another head every
	// tenant is (decoded on every core, not reloaded one by one).
	if !ru.fresh(key) {
		return tenantfile.LoadOptions{}
	}
	return tenantfile.LoadOptions{Previous: ru.cache.Files, Recorded: ru.cache.Recorded}
}

// fresh reports whether the cache describes the head, rendered with the same shared
// inputs.
func (ru *reuse) fresh(key string) bool { return ru != nil && ru.cache.Fresh(ru.head, key) }

// unchanged reports whether a tenant was rendered into the current head from the same
// inputs.
func (ru *reuse) unchanged(key, code, digest string) bool {
	return ru.fresh(key) && ru.cache.Tenants[code] == digest
}

// sharedKey digests every input all tenants' renders depend on: the cache's format, the
// renderer's own build (the running executable), the catalog, the environment, and, when
// releases are verified, the charts folder. A change to any of them re-renders every
// tenant.
func sharedKey(catalog *tenant.Catalog, env *overlay.Environment, ri *renderInputs) (string, error) {
	d := rendercache.NewDigest().AddString("evactl render").AddString(executableIdentity())
	cat, err := json.Marshal(catalog)
	if err != nil {
		return "", fmt.Errorf("digesting the catalog: %w", err)
	}
	d.Add(cat).AddString(env.Name).AddString(env.Digest)
	if env.Digest == "" {
		// An environment without a digest cannot be told apart from another: no reuse.
		d.AddString(strconv.FormatInt(int64(os.Getpid()), 10))
	}
	d.AddString(strconv.FormatBool(ri.verifyCharts))
	if ri.verifyCharts {
		if err := digestFolder(d, ri.charts); err != nil {
			return "", err
		}
	} else {
		// The chart sources pin the digests published.yaml lists, checked or not.
		lock, err := os.ReadFile(filepath.Join(ri.charts, chartrepo.LockFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("digesting the published charts: %w", err)
		}
		d.Add(lock)
	}
	return d.Sum(), nil
}

// executableIdentity names the running binary by path, size and modification time: a
// rebuilt evactl renders with other code, so it must not reuse an older render. When
// the executable cannot be found, every run is its own.
func executableIdentity() string {
	path, err := os.Executable()
	if err == nil {
		var info os.FileInfo
		if info, err = os.Stat(path); err == nil {
			return fmt.Sprintf("%s %d %d", path, info.Size(), info.ModTime().UnixNano())
		}
	}
	return fmt.Sprintf("unknown executable, process %d", os.Getpid())
}

// digestFolder adds every regular file under dir (path and content, in walk order).
// A folder that does not exist adds nothing: chart verification then reports it.
func digestFolder(d *rendercache.Digest, dir string) error {
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		d.AddString(filepath.ToSlash(path)).Add(data)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("digesting %s: %w", dir, err)
	}
	return nil
}

// tenantDigests digests each tenant's own inputs on top of the shared key: its file's
// content, its encrypted Secret files, and the releases that admitted it. One digest
// serves every tenant: at 10,000 tenants allocations, not hashing, cost the time.
type tenantDigests struct {
	key      string
	secrets  map[string][]*tenantfile.SecretFile
	releases map[*evav1.EvaRollout]string
	d        *rendercache.Digest
}

func newTenantDigests(key string, secrets []*tenantfile.SecretFile) *tenantDigests {
	td := &tenantDigests{key: key, secrets: map[string][]*tenantfile.SecretFile{},
		releases: map[*evav1.EvaRollout]string{}, d: rendercache.NewDigest()}
	for _, s := range secrets {
		td.secrets[s.Code] = append(td.secrets[s.Code], s)
	}
	return td
}

// of returns a tenant's digest. Not safe for concurrent use.
func (td *tenantDigests) of(t *tenantfile.Tenant, admitted []*evav1.EvaRollout) (string, error) {
	d := td.d
	d.Reset()
	d.AddString(td.key).Add(t.Sum[:])
	for _, s := range td.secrets[t.Object.Spec.CapsuleCode] {
		d.AddString(s.File).Add(s.Data)
	}
	for _, r := range admitted {
		sum, ok := td.releases[r]
		if !ok {
			data, err := json.Marshal(r)
			if err != nil {
				return "", fmt.Errorf("digesting release %s: %w", r.Name, err)
			}
			sum = rendercache.NewDigest().Add(data).Sum()
			td.releases[r] = sum
		}
		d.AddString(sum)
	}
	return d.Sum(), nil
}

// commitChanges renders only the tenants whose inputs changed since the cached commit,
// removes those no longer listed, and commits that on top of it (publish.PublishChanges:
// the same safety checks as a full render). The cached commit must be the branch's head.
func (j *job) commitChanges(cmd *cobra.Command, local *publish.LocalRepo, ru *reuse, ro *renderOptions, start time.Time) error {
	stderr := j.stderr
	var todo []*evav1.EvaTenant
	for i, t := range j.tenants {
		if !j.unchanged[i] {
			todo = append(todo, t)
		}
	}
	bar := newProgress(stderr, len(todo), ro.quiet)
	var mu sync.Mutex
	var files []render.File
	stats, err := j.r.Tree(todo, func(f render.File) error {
		mu.Lock()
		files = append(files, f)
		mu.Unlock()
		return nil
	}, bar.update)
	bar.done()
	if err != nil {
		return j.renderFailed(err)
	}
	u := publish.FullUpdate(files)
	for code := range ru.cache.Tenants {
		if _, kept := j.cache.Tenants[code]; !kept {
			u.Tenants[render.DirName(code)] = nil
		}
	}
	result := &publish.Result{Plan: &publish.Plan{Published: len(ru.cache.Tenants), Rendered: len(j.tenants)}, Revision: ru.head}
	if len(u.Tenants) > 0 {
		if result, err = local.PublishChanges(u, publish.Safety{AllowMassDelete: ro.allowMassDelete}, ro.author.author(),
			fmt.Sprintf("eva: render %d tenant(s) for %s", len(j.tenants), j.r.Env.Name)); err != nil {
			return err
		}
	}
	if result.Committed || !j.allReused || len(u.Tenants) > 0 {
		// Otherwise (nothing read, rendered or committed) the cache already says this.
		j.saveCache(local, result, stderr)
	}
	rep := j.report(stats, start)
	rep.Tree = outcomeOf(result)
	return rep.finish(cmd, ro.output, ro.quiet, fmt.Sprintf("%s; %d tenant(s) unchanged since %s, not rendered again; %s",
		rep.summary(), len(j.tenants)-len(todo), short(ru.head), rep.Tree.commitSummary()))
}

// saveCache records what the committed render was made from. A cache that cannot be
// written costs the next render its speed, not its correctness: it is reported, and
// the render still succeeds.
func (j *job) saveCache(local *publish.LocalRepo, result *publish.Result, stderr io.Writer) {
	j.cache.Commit = result.Revision
	j.cache.Files = j.files.Known()
	if err := j.cache.Save(local.GitDir()); err != nil {
		fmt.Fprintf(stderr, "warning: %v (the next render renders every tenant)\n", err)
	}
}
