package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/rendercache"
)

// RenderGCPercent is the garbage collector target evactl render runs with.
const RenderGCPercent = 400

type renderOptions struct {
	inputs          renderInputs
	out             string
	git             bool
	allowMassDelete bool
	author          authorFlags
	quiet           bool
	output          string
}

func newRenderCommand(opts *options) *cobra.Command {
	ro := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Render tenants into a GitOps tree (committed to a local git repository)",
		Long: `Render every tenant into the GitOps tree Flux applies:

  kustomization.yaml             lists each tenant's Flux file
  flux/<code>.yaml               the tenant's applier account and two Flux Kustomizations
  tenants/<code>/                the foundation (namespace, limits, streams, rules)
  tenants/<code>/workloads/      the workloads (releases, seed Job, Ingress)

In an environment with cells, each cell's tree (the tenants placed on it, in this
layout) goes into its own folder of --out, the cell's path (docs/cells.md).

The tenants are validated first; nothing is written if any is invalid. Each module
release is rendered through its chart with the Helm SDK (--verify-charts). The output
folder is made a git repository if it is not one, and the render is committed
(nothing is committed when nothing changed); --git=false writes a plain folder.
--out - writes the manifests to standard output instead, as kustomize build does: each
file's documents in path order after a "# Source:" comment, without the
kustomization.yaml files.

A render into a repository it rendered into before reads only the tenant files changed
on disk, renders only the tenants whose inputs changed and commits them on top of the
head; a change to the catalog, the environment, the charts or evactl itself renders
everything again (what was rendered from what: .git/eva/render-cache).`,
		Example: `  evactl render --tenants tenants/ --env dev --out out/gitops
  evactl render --env dev --out - | kubectl apply --dry-run=server -f -`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(cmd, opts, ro)
		},
	}
	f := cmd.Flags()
	ro.inputs.bind(f)
	ro.author.bind(f)
	f.StringVar(&ro.out, "out", "", "output folder (required); - writes the manifests to standard output instead, as one YAML stream")
	f.BoolVar(&ro.git, "git", true, "make the output a git repository and commit the render")
	f.BoolVar(&ro.allowMassDelete, "allow-mass-delete", false, "allow removing most (or all) published tenants")
	f.BoolVarP(&ro.quiet, "quiet", "q", false, "print nothing but errors")
	f.StringVarP(&ro.output, "output", "o", "text", outputFlagUsage)
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// sink receives rendered files.
type sink interface{ Put(render.File) error }

func runRender(cmd *cobra.Command, opts *options, ro *renderOptions) (err error) {
	if err := checkOutput(ro.output); err != nil {
		return err
	}
	if ro.out == stdoutOut {
		if ro.output != "text" {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--out - writes the manifests to standard output: -o %s has nowhere to go", ro.output)}
		}
		return renderToStdout(cmd, opts, ro)
	}
	start := time.Now()
	// A render is a short batch job that allocates a lot and keeps little: trading
	// memory for fewer garbage collections makes a large fleet render much faster, and
	// reading the tenants (even unchanged ones, from the cache) is part of it.
	defer debug.SetGCPercent(debug.SetGCPercent(RenderGCPercent))
	stderr := cmd.ErrOrStderr()
	var ru *reuse
	if ro.git {
		if head, gitDir, ok := publish.PeekLocal(ro.out); ok {
			ru = &reuse{cache: rendercache.Load(gitDir), head: head}
		}
	}
	// In an environment with cells, each cell's folder of --out records the tenants
	// placed on it.
	ro.inputs.published = dirCells(ro.out)
	job, err := prepareWith(cmd, opts, &ro.inputs, ru)
	if err != nil {
		return err
	}
	// A refused render leaves nothing behind: a folder this run creates (with its
	// .git) is removed again on failure, so a retry does not meet an empty repository.
	created, err := missingRoot(ro.out)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--out: %w", err)}
	}
	if created == "" && ro.git {
		// An existing folder that is not yet a repository keeps no .git from a failure.
		if _, serr := os.Lstat(filepath.Join(ro.out, ".git")); errors.Is(serr, os.ErrNotExist) {
			created = filepath.Join(ro.out, ".git")
		}
	}
	if created != "" {
		defer func() {
			if err != nil {
				_ = os.RemoveAll(created)
			}
		}()
	}
	if job.hasCells() {
		return renderCells(cmd, job, ro, start)
	}
	safety := publish.Safety{AllowMassDelete: ro.allowMassDelete}
	var out sink
	var local *publish.LocalRepo
	var dir *publish.Dir
	if ro.git {
		// Put only stores blobs; the worktree, index and branch of an existing
		// repository change in Commit, after every check has passed.
		if local, err = publish.OpenLocal(ro.out); err != nil {
			return err
		}
		out = local
	} else {
		if dir, err = publish.OpenDir(ro.out, job.codes, safety); err != nil {
			return err
		}
		out = dir
	}

	if local != nil && ru.fresh(job.cache.Key) {
		if local.Head() != ru.head {
			return fmt.Errorf("%s: the branch moved while the tenants were read; render again", ro.out)
		}
		return job.commitChanges(cmd, local, ru, ro, start)
	}
	bar := newProgress(stderr, len(job.tenants), ro.quiet)
	emit := out.Put
	var staged []render.File
	if dir != nil && created == "" {
		// A plain folder is written file by file; into an existing one, the render is
		// held in memory until it has fully succeeded, so a failure leaves it as it was.
		var mu sync.Mutex
		emit = func(f render.File) error {
			mu.Lock()
			staged = append(staged, f)
			mu.Unlock()
			return nil
		}
	}
	stats, err := job.r.Tree(job.tenants, emit, bar.update)
	bar.done()
	if err != nil {
		return job.renderFailed(err)
	}
	for _, f := range staged {
		if err := out.Put(f); err != nil {
			return err
		}
	}
	rep := job.report(stats, start)
	summary := rep.summary()
	switch {
	case local != nil:
		result, err := local.Commit(safety, ro.author.author(),
			fmt.Sprintf("eva: render %d tenant(s) for %s", stats.Tenants, job.r.Env.Name))
		if err != nil {
			return err
		}
		rep.Tree = outcomeOf(result)
		summary += "; " + rep.Tree.commitSummary()
		job.saveCache(local, result, stderr)
	case dir != nil:
		if err := dir.Finish(); err != nil {
			return err
		}
		rep.Tree = &treeOutcome{Updated: true, Tenants: stats.Tenants}
	}
	return rep.finish(cmd, ro.output, ro.quiet, summary)
}

// commitSummary says what a render committed.
func (o *treeOutcome) commitSummary() string {
	if o.Updated {
		return fmt.Sprintf("committed %s (%s)", short(o.Revision), o.counts())
	}
	return "nothing changed, nothing committed"
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// progress draws a bar on a terminal for long renders; in CI, in a pipe or with
// --quiet it draws nothing.
type progress struct {
	w     io.Writer
	total int
	on    bool
	last  time.Time
}

func newProgress(w io.Writer, total int, quiet bool) *progress {
	on := !quiet && total >= 200 && os.Getenv("CI") == ""
	if f, ok := w.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		on = false
	}
	return &progress{w: w, total: total, on: on}
}

func (p *progress) update(done int) {
	if !p.on || (time.Since(p.last) < 100*time.Millisecond && done < p.total) {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := width * done / p.total
	fmt.Fprintf(p.w, "\rrendering [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, p.total)
}

func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// missingRoot returns the outermost folder of path that does not exist yet ("" when
// path exists), which is what a run creates and must remove if it fails.
func missingRoot(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	root := ""
	for p := abs; ; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if err == nil {
			return root, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		root = p
		if filepath.Dir(p) == p {
			return root, nil
		}
	}
}
