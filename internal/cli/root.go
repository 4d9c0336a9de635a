// Package cli implements the evactl command line.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
)

// Exit codes of evactl.
const (
	ExitOK      = 0
	ExitInvalid = 1
	ExitUsage   = 2
)

// ExitError carries an exit code out of a command. A nil Err means the command has
// already told the user what went wrong.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// options are the flags shared by every command.
type options struct {
	catalogPath string
}

func (o *options) catalog() (*tenant.Catalog, error) {
	c, err := tenant.LoadCatalog(o.catalogPath)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return c, nil
}

// NewRootCommand builds the evactl command tree.
func NewRootCommand() *cobra.Command {
	opts := &options{}
	root := &cobra.Command{
		Use:           "evactl",
		Short:         "Validate, render and publish Eva tenants",
		Long:          "evactl validates EvaTenant files and renders them into the manifests Flux applies.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return useFleet(cmd) }
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	root.PersistentFlags().StringVar(&opts.catalogPath, "catalog", "", "catalog YAML file replacing the built-in tiers and modules")
	root.AddCommand(newValidateCommand(opts), newRenderCommand(opts), newPublishCommand(opts), newDiffCommand(opts), newImagesCommand(opts), newChartsCommand(), newRolloutCommand(opts), newVersionCommand(), newInitCommand(), newCellsCommand(opts), newOperatorCommand(), newSecretsCommand(opts))
	refuseUndeclaredArgs(root)
	addCompletions(root)
	return root
}

// refuseUndeclaredArgs makes every command that declares no arguments refuse them:
// cobra lets such a command run with any, so `evactl render tenants/DEVUSR.yaml` used to
// render every tenant as if the argument selected one, and `evactl charts pusj` printed
// the help and succeeded. A command grouping others refuses an unknown one by name,
// with what it may have meant.
func refuseUndeclaredArgs(cmd *cobra.Command) {
	switch {
	case !cmd.Runnable() && cmd.HasSubCommands():
		cmd.SuggestionsMinimumDistance = 2
		cmd.Args = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if near := c.SuggestionsFor(args[0]); len(near) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", near[0])
			}
			return &ExitError{Code: ExitUsage, Err: errors.New(msg)}
		}
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	case cmd.Runnable() && cmd.Args == nil:
		cmd.Args = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s takes no arguments, got %q: it works on what its flags name (see %s --help)",
				c.CommandPath(), args, c.CommandPath())}
		}
	}
	for _, sub := range cmd.Commands() {
		refuseUndeclaredArgs(sub)
	}
}

// Execute runs evactl with args and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	cmd := NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err == nil {
		return ExitOK
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		if exit.Err != nil {
			fmt.Fprintln(stderr, "evactl:", printable(exit.Err))
		}
		return exit.Code
	}
	fmt.Fprintln(stderr, "evactl:", printable(err))
	if isUsageError(err) {
		return ExitUsage
	}
	return ExitInvalid
}

// isUsageError recognises the errors cobra itself returns for a malformed command
// line (flag errors are wrapped by the flag error function already).
func isUsageError(err error) bool {
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "required flag", "accepts ", "invalid argument"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// printable escapes and bounds each line of an error: errors can carry text from
// tenant files, charts or servers, and must not drive the terminal or forge lines.
// Continuation lines are marked with "| ", so none can begin a CI workflow command
// (GitHub Actions reads "::warning ..." at the start of a line, blanks trimmed).
func printable(err error) string {
	lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	for i, l := range lines {
		l = safetext.Limit(l, safetext.MaxMessage)
		if i > 0 {
			l = "  | " + strings.TrimLeft(l, " \t")
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}
