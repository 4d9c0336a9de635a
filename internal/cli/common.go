package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/placement"
	"github.com/aidonow/eva/internal/project"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/rendercache"
	"github.com/aidonow/eva/internal/rollout"
	"github.com/aidonow/eva/internal/rolloutfile"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// renderInputs are the flags of every command that renders.
type renderInputs struct {
	tenants      []string
	env          string
	overlays     string
	charts       string
	rollouts     string
	verifyCharts bool
	// published reads a cell's published tree, where the tenants placed on it before
	// are recorded (nil: no tree to read, every tenant is placed afresh).
	published treeReader
}

func (ri *renderInputs) bind(f *pflag.FlagSet) {
	f.StringSliceVar(&ri.tenants, "tenants", []string{DefaultTenantsDir}, "tenant files or folders")
	f.StringVar(&ri.env, "env", "dev", "environment: the overlay under --overlays applied to every bundle")
	f.StringVar(&ri.overlays, "overlays", "overlays", "folder of environment overlays")
	f.StringVar(&ri.charts, "charts", "charts", "folder of module charts (for --verify-charts)")
	f.StringVar(&ri.rollouts, "rollouts", rolloutfile.DefaultDir, "folder of platform releases (EvaRollout files, see evactl rollout promote); none when it does not exist")
	f.BoolVar(&ri.verifyCharts, "verify-charts", true, "render every release through its chart with the Helm SDK")
}

// files are the files and folders the inputs name, and the project file f (nil: none):
// what a render reads.
func (ri *renderInputs) files(f *project.Fleet) []string {
	files := append(slices.Clone(ri.tenants), ri.overlays, ri.charts, ri.rollouts)
	if f != nil {
		files = append(files, f.Path)
	}
	return files
}

type authorFlags struct{ name, email string }

func (a *authorFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&a.name, "author-name", envOr("EVA_GIT_AUTHOR_NAME", publish.DefaultAuthor.Name), "commit author name")
	f.StringVar(&a.email, "author-email", envOr("EVA_GIT_AUTHOR_EMAIL", publish.DefaultAuthor.Email), "commit author email")
}

// bindOnBehalf binds the author flags of a command that commits on its user's behalf
// (rollout promote): left out, the commit names the user as git does (commitAuthor).
func (a *authorFlags) bindOnBehalf(f *pflag.FlagSet) {
	f.StringVar(&a.name, "author-name", envOr("EVA_GIT_AUTHOR_NAME", ""), "commit author name (default: your git identity in the repository, else "+publish.DefaultAuthor.Name+")")
	f.StringVar(&a.email, "author-email", envOr("EVA_GIT_AUTHOR_EMAIL", ""), "commit author email (default: your git identity in the repository, else "+publish.DefaultAuthor.Email+")")
}

// author is the commit author the flags name, Eva for a flag left empty.
func (a *authorFlags) author() publish.Author {
	return publish.Author{Name: cmp.Or(a.name, publish.DefaultAuthor.Name), Email: cmp.Or(a.email, publish.DefaultAuthor.Email)}
}

// checkAuthor refuses the commit author of a command with author flags (or their
// environment variables) that git would write as another author (publish.CheckAuthor).
func checkAuthor(cmd *cobra.Command) error {
	var a publish.Author
	if f := cmd.Flags().Lookup("author-name"); f != nil {
		a.Name = cmp.Or(f.Value.String(), publish.DefaultAuthor.Name)
	}
	if f := cmd.Flags().Lookup("author-email"); f != nil {
		a.Email = cmp.Or(f.Value.String(), publish.DefaultAuthor.Email)
	}
	if err := publish.CheckAuthor(a); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (--author-name, --author-email, EVA_GIT_AUTHOR_NAME, EVA_GIT_AUTHOR_EMAIL)", err)}
	}
	return nil
}

// usageExit is err as the exit error of a command that loaded tenant files: a usage
// error (no such path, standard input named with other paths) exits with ExitUsage.
func usageExit(err error) error {
	var usage *tenantfile.UsageError
	if errors.As(err, &usage) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return err
}

// safeProblem is the one escaping every printed problem goes through: file, field and
// message escaped (one line, no control characters) and bounded, whichever package
// made the problem. Escaping is idempotent: a problem cleaned where it was made is
// printed as it is.
func safeProblem(p tenantfile.Problem) tenantfile.Problem {
	p.File = safetext.Escape(p.File)
	p.Field = safetext.Limit(p.Field, maxProblemField)
	p.Message = safetext.Limit(p.Message, safetext.MaxMessage)
	return p
}

// maxProblemField bounds a field path in a printed problem.
const maxProblemField = 256

// printProblems writes problems one a line, as file:line:col: field: message.
func printProblems(w io.Writer, problems []tenantfile.Problem) {
	for _, p := range problems {
		fmt.Fprintln(w, safeProblem(p).String())
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// job is a validated set of tenants ready to render.
type job struct {
	r       *render.Renderer
	tenants []*evav1.EvaTenant
	codes   []string
	checker *chartcheck.Checker
	// files are the loaded tenant files: to explain a failed chart check, and what the
	// saved cache records of them (Result.Known, after reused tenants were reloaded).
	files  *tenantfile.Result
	stderr io.Writer
	// releases are the release files; each tenant renders at the releases that
	// admitted it.
	releases []*rolloutfile.File
	// unchanged marks, parallel to tenants, those whose inputs are the same as when
	// they were rendered into the cached commit (prepareWith): they hold stubs only.
	unchanged []bool
	// cache is what this render was made from, saved once it is committed.
	cache *rendercache.Cache
	// allReused says no tenant file was read: each is unchanged on disk since the
	// cached render.
	allReused bool
	// placed maps each tenant's code to its cell, in an environment with cells; use is
	// what each cell's tenants claim then.
	placed map[string]string
	use    map[string]*placement.Use
	// cellTrees are the cells' published trees placement read, by cell name.
	cellTrees map[string]map[string][]byte
	// treeRevisions are the revisions the cells' trees were read at, by cell name.
	treeRevisions map[string]string
	// moves are the tenant files moving between cells, by code (cellmoves.go).
	moves map[string]*fileMove
}

// filesRefused is what stopped a render: the files' problems (printed already), which
// diff -o markdown shows in the preview.
type filesRefused struct {
	problems []tenantfile.Problem
}

func (e *filesRefused) Error() string {
	return fmt.Sprintf("%d problem(s) in the tenant files; nothing was rendered", len(e.problems))
}

// prepare loads the catalog, the environment and the tenants, refusing (and printing
// every problem) when any tenant is invalid, and sets up chart verification.
func prepare(cmd *cobra.Command, opts *options, ri *renderInputs) (*job, error) {
	return prepareWith(cmd, opts, ri, nil)
}

// prepareWith is prepare for a render that may reuse the cache of the repository it
// commits into (ru, nil for none): tenant files unchanged on disk are not decoded again,
// and tenants whose inputs are unchanged since the cached commit are marked so (and
// left undecoded) rather than rendered.
func prepareWith(cmd *cobra.Command, opts *options, ri *renderInputs, ru *reuse) (*job, error) {
	stderr := cmd.ErrOrStderr()
	if err := checkAuthor(cmd); err != nil {
		return nil, err
	}
	catalog, err := opts.catalog()
	if err != nil {
		return nil, err
	}
	env, err := loadEnvironment(cmd, ri.overlays, ri.env)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	key, err := sharedKey(catalog, env, ri)
	if err != nil {
		return nil, err
	}
	loadStart := time.Now()
	load := ru.loadOptions(key)
	var published placementRecord
	if len(env.Settings.Cells) > 0 {
		// Placement weighs every tenant's claim: each file is decoded, none reused,
		// and each cell's tree is rendered on its own.
		load, ru = tenantfile.LoadOptions{}, nil
		if ri.published != nil {
			if published, err = publishedCells(cmd.Context(), env.Settings.Cells, ri.published); err != nil {
				return nil, err
			}
		}
	}
	res, err := tenantfile.LoadWith(ri.tenants, catalog, load)
	if err != nil {
		return nil, usageExit(err)
	}
	res.Problems = append(res.Problems, secretProblems(res, env)...)
	res.Problems = append(res.Problems, entitlementProblems(res, env)...)
	placed, moves, placeProblems := placeTenants(res, env, catalog, published)
	res.Problems = append(res.Problems, placeProblems...)
	lock, err := chartrepo.ReadLockIfPresent(filepath.Join(ri.charts, chartrepo.LockFile))
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	j := &job{r: &render.Renderer{Catalog: catalog, Env: env, Charts: lock}, placed: placed.Cells, use: placed.Use,
		cellTrees: published.trees, treeRevisions: published.revisions, moves: moves}
	releases, problems, err := rolloutfile.Load(ri.rollouts, catalog)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	res.Problems = append(res.Problems, problems...)
	j.releases = releases
	if ri.verifyCharts {
		if j.checker, err = loadCharts(cmd, ri.charts); err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (or pass --verify-charts=false)", err)}
		}
		j.checker.SetFetcher(chartFetcher(cmd.Context(), env))
		res.Problems = append(res.Problems, releaseChartProblems(releases, catalog, j.checker)...)
	}
	tenantfile.SortProblems(res.Problems)
	if !res.Valid() {
		printProblems(stderr, res.Problems)
		return nil, &ExitError{Code: ExitInvalid, Err: &filesRefused{problems: res.Problems}}
	}
	j.files, j.stderr = res, stderr
	// Files (res.Known) is filled in when the cache is saved: a render that changed
	// nothing saves none.
	j.cache = &rendercache.Cache{Key: key, Tenants: make(map[string]string, len(res.Tenants)), Recorded: loadStart}
	j.allReused = res.AllReused()
	rollouts := rolloutfile.Rollouts(releases)
	digests := newTenantDigests(key, res.Secrets)
	for i, t := range res.Tenants {
		// A tenant renders at the releases that admitted it; its own pins still win.
		admitted := rollout.Releases(rollouts, t.Object.Namespace, t.Object.Name, "")
		code := t.Object.Spec.CapsuleCode
		digest, err := digests.of(t, admitted)
		if err != nil {
			return nil, err
		}
		j.cache.Tenants[code] = digest
		j.codes = append(j.codes, code)
		if ru.unchanged(key, code, digest) {
			// Rendered into the cached commit from these very inputs: not rendered again.
			j.tenants = append(j.tenants, t.Object)
			j.unchanged = append(j.unchanged, true)
			continue
		}
		if t.Reused {
			if t, err = tenantfile.Reload(t, catalog); err != nil {
				return nil, err
			}
			res.Tenants[i] = t
		}
		j.tenants = append(j.tenants, rollout.WithReleases(t.Object, admitted, catalog.ModulesOf(t.Object.Spec.Tier)))
		j.unchanged = append(j.unchanged, false)
	}
	if j.checker != nil {
		j.r.Check = func(b *render.Bundle) error {
			for _, rel := range chartcheck.ReleasesIn(b.Code, b.Objects()) {
				if err := j.checker.Check(rel); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return j, nil
}

// renderAll renders the whole tree in memory.
func (j *job) renderAll() ([]render.File, render.TreeStats, error) {
	var mu sync.Mutex
	var files []render.File
	defer debug.SetGCPercent(debug.SetGCPercent(RenderGCPercent))
	stats, err := j.r.Tree(j.tenants, func(f render.File) error {
		mu.Lock()
		files = append(files, f)
		mu.Unlock()
		return nil
	}, nil)
	if err != nil {
		return nil, stats, j.renderFailed(err)
	}
	return files, stats, nil
}

// renderFailed turns a failed render into the exit error. The charts check every
// release during the render itself (each distinct chart and values once); only when
// that fails are the tenants checked again release by release, to print what the charts
// refuse with the file and line that set the value. Nothing was published: the caller
// commits, moves or writes a render only once it has succeeded.
func (j *job) renderFailed(err error) error {
	if j.checker == nil {
		return &ExitError{Code: ExitInvalid, Err: err}
	}
	problems := chartProblems(j.files, j.r, j.checker)
	if len(problems) == 0 {
		return &ExitError{Code: ExitInvalid, Err: err}
	}
	tenantfile.SortProblems(problems)
	printProblems(j.stderr, problems)
	return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d problem(s) in the tenant files; nothing was rendered", len(problems))}
}

// releaseChartProblems checks that every chart version a release names can be had: a
// release of a version that does not exist is refused before any tenant reaches it.
func releaseChartProblems(files []*rolloutfile.File, catalog *tenant.Catalog, checker *chartcheck.Checker) []tenantfile.Problem {
	var problems []tenantfile.Problem
	for _, f := range files {
		for module, version := range f.Rollout.Spec.Versions {
			if err := checker.HasVersion(catalog.Modules[module].Chart, string(version)); err != nil {
				problems = append(problems, f.Problem("spec.versions."+module, err.Error()))
			}
		}
	}
	return problems
}
