package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/buildinfo"
	"github.com/aidonow/eva/internal/fileguard"
	"github.com/aidonow/eva/internal/scaffold"
)

// develRelease is what a development build writes as the fleet's release: accepted by
// development builds, refused by every release until the fleet names one.
const develRelease = "0.0.0-devel"

func newInitCommand() *cobra.Command {
	o := scaffold.Options{}
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Args:  cobra.MaximumNArgs(1),
		Short: "Make a new fleet repository: eva.yaml, an environment, an example tenant, SOPS rules, a CI workflow",
		Long: `Make a fleet repository in DIR (default: the working directory): the project file
eva.yaml naming this evactl's release, whose environments and module charts the fleet
uses where it holds none of its own; one environment (overlays/<env>/tenant/); an
example tenant (tenants/EXAMPL.yaml) with its own age key for SOPS (the private half
in keys/, which .gitignore keeps out of git) and a creation rule in .sops.yaml; and the
pull-request workflow running evactl validate and diff, and a CODEOWNERS file giving
--owners everything but the tenant files.

init writes over nothing: when any of its files exists, it names them and writes none.`,
		Example: `  evactl init my-fleet --domain dev.example.com
  cd my-fleet && evactl validate && evactl render --out out/gitops`,
		Annotations: map[string]string{noFleet: ""},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if o.Domain == "" {
				o.Domain = o.Env + ".example.com"
			}
			if err := o.Check(); err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			return initFleet(cmd, dir, o)
		},
	}
	cmd.Flags().StringVar(&o.Env, "env", "dev", "the environment the fleet holds")
	cmd.Flags().StringVar(&o.ChartsURL, "charts-url", "oci://ghcr.io/aidonow/charts", "the OCI repository of the module charts (the environment's chartSource.url): an Eva release's, or yours after evactl charts push")
	cmd.Flags().StringVar(&o.Domain, "domain", "", "the environment's domain: tenants are served at <code>.<domain> (default <env>.example.com)")
	cmd.Flags().StringVar(&o.Owners, "owners", "@OWNER/platform", "GitHub users or team (.github/CODEOWNERS) who must approve changes to eva.yaml, environments, charts, releases and workflows")
	return cmd
}

// initFleet writes the scaffold into dir, refusing before writing anything when a
// file it would write exists.
func initFleet(cmd *cobra.Command, dir string, o scaffold.Options) error {
	o.Release = buildinfo.Read().Release()
	if o.Release == "" {
		o.Release = develRelease
	}
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		return fmt.Errorf("making the example tenant's age key: %w", err)
	}
	o.Recipient = identity.Recipient().String()
	o.KeyFile = "keys/" + scaffold.ExampleCode + ".agekey"
	files := scaffold.Files(o)
	files[o.KeyFile] = identity.String() + "\n"
	names := make([]string, 0, len(files))
	var taken []string
	for name := range files {
		names = append(names, name)
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			taken = append(taken, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if err := refuseLinkedParents(dir, name); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
	}
	slices.Sort(names)
	if len(taken) > 0 {
		slices.Sort(taken)
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s already holds %v: init writes over nothing (choose an empty folder)", dir, taken)}
	}
	for _, name := range names {
		path := filepath.Join(dir, filepath.FromSlash(name))
		mode := os.FileMode(0o644)
		if name == o.KeyFile {
			mode = 0o600
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeNew(path, []byte(files[name]), mode); err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), "created", filepath.Join(dir, filepath.FromSlash(name)))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), `
Next:
  cd %s
  evactl validate                     # the example tenant, against Eva %s's module charts
  evactl render --out out/gitops      # what Flux will apply, committed to a local repository
  kubectl -n flux-system create secret generic sops-age-%s --from-file=identity.agekey=%s
  evactl operator values --env %s > eva-operator-env.yaml   # install the operator's chart with -f it
Keep %s out of git (it is in .gitignore); docs/fleet-repository.md explains the layout.
`, dir, o.Release, strings.ToLower(scaffold.ExampleCode), o.KeyFile, o.Env, o.KeyFile)
	return nil
}

// refuseLinkedParents refuses a folder of name's path below dir that exists as anything
// but a folder: a symlinked overlays/ or keys/ would have init write the environment or
// the tenant's private key wherever the link points.
func refuseLinkedParents(dir, name string) error {
	parent := filepath.Dir(filepath.FromSlash(name))
	var walked string
	for _, part := range strings.Split(parent, string(filepath.Separator)) {
		if part == "." {
			return nil
		}
		walked = filepath.Join(walked, part)
		info, err := os.Lstat(filepath.Join(dir, walked))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return fmt.Errorf("%s is %s, not a folder: init writes %s only into folders of %s itself", filepath.Join(dir, walked), fileguard.Kind(info.Mode()), name, dir)
		}
	}
	return nil
}

// writeNew writes a file that must not exist yet: one created between the check and
// the write (or a link planted there) fails the write rather than being followed.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
