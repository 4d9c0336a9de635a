package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/rolloutfile"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// DefaultTenantsDir is where tenant files live in an Eva repository.
const DefaultTenantsDir = "tenants"

func newValidateCommand(opts *options) *cobra.Command {
	var output, rollouts string
	var published publishedRecord
	var charts chartFlags
	cmd := &cobra.Command{
		Use:   "validate [PATH... | -]",
		Args:  cobra.ArbitraryArgs,
		Short: "Check tenant files against the API and the catalog",
		Long: `Check tenant files (or folders of them; default tenants/) strictly: unknown fields,
wrong types, capsule codes, tiers, module pins, secret-looking values, and across files
duplicate codes and names. Every problem is reported, each as file:line:col: field: message.
"-" reads one tenant from standard input (named <stdin> in problems).

Each tenant's module values are then merged as render merges them (catalog, tier,
capsule identity, helmValues, the --env overlay's patches) and checked against the
module charts (values.schema.json and templates, with the Helm SDK), each failure
pointed at the line that set the value: what validate accepts, render accepts. The
chart check is skipped, with a note, when the default charts/ folder is absent; it
needs the environment (--overlays, --env), whose environment.yaml is checked as
tenant files are, each problem at its line.

Tenant files must be regular files of at most 256 KiB: symbolic links (inside or
outside the folder) are refused without being read, as are custom YAML tags, server-set
metadata and eva.aidonow.com/ labels and annotations. Values echoed in messages are
shortened and escaped in every output format.

Exit status: 0 valid, 1 invalid, 2 usage error.`,
		Example: `  evactl validate
  evactl validate tenants/DEVUSR.yaml --output github`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "github" {
				if err := checkOutput(output); err != nil {
					return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--output %q: want text, json, yaml or github", output)}
				}
			}
			if len(args) == 0 {
				args = []string{defaultTenants(cmd)}
			}
			catalog, err := opts.catalog()
			if err != nil {
				return err
			}
			res, err := loadTenants(cmd, args, catalog)
			if err != nil {
				return usageExit(err)
			}
			// Release files are checked as render checks them: what validate accepts,
			// render accepts.
			releases, releaseProblems, err := rolloutfile.Load(rollouts, catalog)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			res.Problems = append(res.Problems, releaseProblems...)
			tenantfile.SortProblems(res.Problems)
			// Encrypted Secrets must be decryptable in the environment, when there is one
			// to check against (validate also runs outside a platform checkout). A
			// settings file that is there but refused is a problem like a tenant's.
			env, envErr := loadEnvironment(cmd, charts.overlays, charts.env)
			var refused *overlay.SettingsError
			if errors.As(envErr, &refused) {
				res.Problems = append(res.Problems, refused.Problems...)
				tenantfile.SortProblems(res.Problems)
			} else if err := envErr; err == nil {
				res.Problems = append(res.Problems, secretProblems(res, env)...)
				res.Problems = append(res.Problems, reservedProblems(res, env)...)
				res.Problems = append(res.Problems, entitlementProblems(res, env)...)
				placed, err := published.placements(cmd, env)
				if err != nil {
					return err
				}
				_, _, placeProblems := placeTenants(res, env, catalog, placed)
				res.Problems = append(res.Problems, placeProblems...)
				tenantfile.SortProblems(res.Problems)
			} else if len(res.Secrets) > 0 && (cmd.Flags().Changed("overlays") || cmd.Flags().Changed("env")) {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if err := charts.check(cmd, catalog, res, releases, env, envErr); err != nil {
				return err
			}
			if err := writeProblems(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, res); err != nil {
				return err
			}
			if !res.Valid() {
				return &ExitError{Code: ExitInvalid}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json, yaml or github (GitHub Actions annotations)")
	cmd.Flags().StringVar(&rollouts, "rollouts", rolloutfile.DefaultDir, "folder of platform releases (EvaRollout files) to check; none when it does not exist")
	published.bind(cmd)
	charts.bind(cmd.Flags())
	return cmd
}

// loadTenants reads the tenant files args name, or one tenant from standard input when
// the only argument is "-".
func loadTenants(cmd *cobra.Command, args []string, catalog *tenant.Catalog) (*tenantfile.Result, error) {
	if !slices.Contains(args, "-") {
		return tenantfile.Load(args, catalog)
	}
	if len(args) > 1 {
		return nil, &tenantfile.UsageError{Err: fmt.Errorf("- (standard input) is one tenant file: name no other paths with it")}
	}
	return tenantfile.LoadReader(cmd.InOrStdin(), catalog)
}

func writeProblems(stdout, stderr io.Writer, format string, res *tenantfile.Result) error {
	switch format {
	case "json", "yaml":
		problems := res.Problems
		if problems == nil {
			problems = []tenantfile.Problem{}
		}
		return writeStructured(stdout, format, struct {
			Valid    bool                 `json:"valid"`
			Files    int                  `json:"files"`
			Problems []tenantfile.Problem `json:"problems"`
		}{res.Valid(), res.Files, problems})
	case "github":
		for _, p := range res.Problems {
			p = safeProblem(p)
			title := "invalid tenant"
			if p.Field != "" {
				title = p.Field
			}
			fmt.Fprintf(stdout, "::error file=%s,line=%d,col=%d,title=%s::%s\n",
				ghProperty(p.File), p.Line, p.Column, ghProperty(title), ghData(p.Message))
		}
	default:
		printProblems(stdout, res.Problems)
	}
	if res.Valid() {
		fmt.Fprintf(stderr, "%d tenant file(s) valid\n", res.Files)
	} else {
		fmt.Fprintf(stderr, "%d problem(s) in %d file(s) checked\n", len(res.Problems), res.Files)
	}
	return nil
}

// ghData escapes a GitHub Actions workflow command message.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghProperty escapes a GitHub Actions workflow command property value.
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
