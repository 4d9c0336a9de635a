package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/registry"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/rolloutfile"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// chartFlags are validate's flags for checking values against the module charts.
type chartFlags struct {
	charts, env, overlays string
	verify                bool
}

func (c *chartFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&c.charts, "charts", "charts", "folder of module charts whose values.schema.json and templates the values must satisfy")
	f.StringVar(&c.env, "env", "dev", "environment whose overlay patches are applied before the chart check")
	f.StringVar(&c.overlays, "overlays", "overlays", "folder of environment overlays")
	f.BoolVar(&c.verify, "verify-charts", true, "check every tenant's module values against its chart with the Helm SDK")
}

// check adds to res the problems the module charts find: in the tenants' values, and in
// the chart versions the release files name, with the values of env (envErr: why there
// is none).
func (c *chartFlags) check(cmd *cobra.Command, catalog *tenant.Catalog, res *tenantfile.Result, releases []*rolloutfile.File,
	env *overlay.Environment, envErr error) error {
	if !c.verify || !res.Valid() {
		return nil
	}
	checker, err := c.load(cmd, env, envErr)
	if err != nil || checker == nil {
		return err
	}
	r := &render.Renderer{Catalog: catalog, Env: env, Charts: checker.Published()}
	res.Problems = append(res.Problems, chartProblems(res, r, checker)...)
	res.Problems = append(res.Problems, releaseChartProblems(releases, catalog, checker)...)
	tenantfile.SortProblems(res.Problems)
	return nil
}

// load loads the module charts, with the environment's chart source for the versions
// the folder does not hold. Defaults that do not exist (run outside a checkout of the
// platform repository) skip the check with a note (a nil checker); folders named
// explicitly must exist. The values are checked in env: without one (envErr says why),
// nothing stands in for it.
func (c *chartFlags) load(cmd *cobra.Command, env *overlay.Environment, envErr error) (*chartcheck.Checker, error) {
	if !hasCharts(cmd, c.charts) && !cmd.Flags().Changed("charts") {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: not checked against the module charts: no %s folder (pass --charts)\n", c.charts)
		return nil, nil
	}
	if env == nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w: the module values are checked as the environment renders them "+
			"(pass --overlays and --env, or --verify-charts=false)", envErr)}
	}
	checker, err := loadCharts(cmd, c.charts)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (or pass --verify-charts=false)", err)}
	}
	checker.SetFetcher(chartFetcher(cmd.Context(), env))
	return checker, nil
}

// chartFetcher pulls published chart versions the charts folder does not hold from the
// environment's chart source (nil when the environment names no chartSource.url). Pulled
// archives are kept by digest in the user's cache folder: charts hold no secrets, and
// a digest never changes its content.
func chartFetcher(ctx context.Context, env *overlay.Environment) chartcheck.Fetcher {
	src := env.Settings.ChartSource
	if !src.PerTenant() {
		return nil
	}
	reg := registry.Options{Insecure: src.Insecure}
	return func(chart string, p chartrepo.Published) ([]byte, error) {
		cache := ""
		if dir, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(dir, "eva", "charts", strings.ReplaceAll(p.Archive, ":", "-")+".tgz")
			if data, err := os.ReadFile(cache); err == nil && chartrepo.Digest(data) == p.Archive {
				return data, nil
			}
		}
		data, err := chartrepo.Pull(ctx, src.URL, chart, p, reg)
		if err != nil {
			return nil, err
		}
		if cache != "" && os.MkdirAll(filepath.Dir(cache), 0o755) == nil {
			_ = os.WriteFile(cache, data, 0o644)
		}
		return data, nil
	}
}
