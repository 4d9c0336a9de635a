package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenantfile"
)

// RenderGCPercent is the garbage collector target evactl render runs with.
const RenderGCPercent = 400

type renderOptions struct {
	tenants         []string
	env             string
	overlays        string
	charts          string
	out             string
	verifyCharts    bool
	git             bool
	allowMassDelete bool
	authorName      string
	authorEmail     string
	quiet           bool
}

func newRenderCommand(opts *options) *cobra.Command {
	ro := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Render tenants into a GitOps tree (committed to a local git repository)",
		Long: `Render every tenant into the GitOps tree Flux applies:

  kustomization.yaml             lists each tenant's Flux Kustomization
  flux/<code>.yaml               the tenant's Flux Kustomization
  tenants/<code>/                the tenant bundle and its kustomization.yaml

The tenants are validated first; nothing is written if any is invalid. Each module
release is rendered through its chart with the Helm SDK (--verify-charts). The output
folder is made a git repository if it is not one, and the render is committed
(nothing is committed when nothing changed); --git=false writes a plain folder.`,
		Example: `  evactl render --tenants tenants/ --env dev --out out/gitops`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(cmd, opts, ro)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&ro.tenants, "tenants", []string{DefaultTenantsDir}, "tenant files or folders")
	f.StringVar(&ro.env, "env", "dev", "environment: the overlay under --overlays applied to every bundle")
	f.StringVar(&ro.overlays, "overlays", "overlays", "folder of environment overlays")
	f.StringVar(&ro.charts, "charts", "charts", "folder of module charts (for --verify-charts)")
	f.StringVar(&ro.out, "out", "", "output folder (required)")
	f.BoolVar(&ro.verifyCharts, "verify-charts", true, "render every release through its chart with the Helm SDK")
	f.BoolVar(&ro.git, "git", true, "make the output a git repository and commit the render")
	f.BoolVar(&ro.allowMassDelete, "allow-mass-delete", false, "allow removing most (or all) published tenants")
	f.StringVar(&ro.authorName, "author-name", envOr("EVA_GIT_AUTHOR_NAME", publish.DefaultAuthor.Name), "commit author name")
	f.StringVar(&ro.authorEmail, "author-email", envOr("EVA_GIT_AUTHOR_EMAIL", publish.DefaultAuthor.Email), "commit author email")
	f.BoolVarP(&ro.quiet, "quiet", "q", false, "print nothing but errors")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// sink receives rendered files.
type sink interface{ Put(render.File) error }

func runRender(cmd *cobra.Command, opts *options, ro *renderOptions) error {
	start := time.Now()
	stderr := cmd.ErrOrStderr()
	catalog, err := opts.catalog()
	if err != nil {
		return err
	}
	env, err := overlay.Load(ro.overlays, ro.env)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	res, err := tenantfile.Load(ro.tenants, catalog)
	if err != nil {
		var usage *tenantfile.UsageError
		if errors.As(err, &usage) {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		return err
	}
	if !res.Valid() {
		for _, p := range res.Problems {
			fmt.Fprintln(stderr, p.String())
		}
		return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d problem(s) in the tenant files; nothing was rendered", len(res.Problems))}
	}
	tenants := make([]*evav1.EvaTenant, len(res.Tenants))
	codes := make([]string, len(res.Tenants))
	for i, t := range res.Tenants {
		tenants[i], codes[i] = t.Object, t.Object.Spec.CapsuleCode
	}

	r := &render.Renderer{Catalog: catalog, Env: env}
	var checker *chartcheck.Checker
	if ro.verifyCharts {
		if checker, err = chartcheck.Load(ro.charts); err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (or pass --verify-charts=false)", err)}
		}
		r.Check = func(b *render.Bundle) error {
			for _, rel := range chartcheck.ReleasesIn(b.Code, b.Objects()) {
				if err := checker.Check(rel); err != nil {
					return err
				}
			}
			return nil
		}
	}

	safety := publish.Safety{AllowMassDelete: ro.allowMassDelete}
	var out sink
	var local *publish.LocalRepo
	var dir *publish.Dir
	if ro.git {
		if local, err = publish.OpenLocal(ro.out); err != nil {
			return err
		}
		out = local
	} else {
		if dir, err = publish.OpenDir(ro.out, codes, safety); err != nil {
			return err
		}
		out = dir
	}

	bar := newProgress(stderr, len(tenants), ro.quiet)
	// A render is a short batch job that allocates a lot and keeps little: trading
	// memory for fewer garbage collections makes a large fleet render much faster.
	defer debug.SetGCPercent(debug.SetGCPercent(RenderGCPercent))
	stats, err := r.Tree(tenants, out.Put, bar.update)
	bar.done()
	if err != nil {
		return err
	}
	summary := fmt.Sprintf("rendered %d tenants, %d objects, %s in %s", stats.Tenants, stats.Objects,
		humanBytes(stats.Bytes), time.Since(start).Round(time.Millisecond))
	if checker != nil {
		summary += fmt.Sprintf("; %d releases verified against their charts (%d distinct renders)", checker.Checks, checker.Renders)
	}
	switch {
	case local != nil:
		result, err := local.Commit(safety, publish.Author{Name: ro.authorName, Email: ro.authorEmail},
			fmt.Sprintf("eva: render %d tenant(s) for %s", stats.Tenants, env.Name))
		if err != nil {
			return err
		}
		if result.Committed {
			summary += fmt.Sprintf("; committed %s (%s)", short(result.Revision), planCounts(result.Plan))
		} else {
			summary += "; nothing changed, nothing committed"
		}
	case dir != nil:
		if err := dir.Finish(); err != nil {
			return err
		}
	}
	if !ro.quiet {
		fmt.Fprintln(stderr, summary)
	}
	return nil
}

func planCounts(p *publish.Plan) string {
	return fmt.Sprintf("%d added, %d changed, %d removed", len(p.Added), len(p.Changed), len(p.Removed))
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
