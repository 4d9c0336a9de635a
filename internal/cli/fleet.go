package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	eva "github.com/aidonow/eva"
	"github.com/aidonow/eva/internal/buildinfo"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/project"
)

// noFleet marks the commands that do not read a fleet repository (init, version, and
// cobra's completion): they run wherever the working directory is, whatever its
// eva.yaml says.
const noFleet = "eva.aidonow.com/no-fleet"

// fleetKey holds the fleet a command runs in, in its context.
type fleetKey struct{}

// fleetFolders are the flags naming a fleet's folders and the defaults under which
// the project file's folders replace them. A flag with another default (rollout
// status's --rollouts, which reads the cluster unless given) is left alone.
var fleetFolders = map[string]string{
	"tenants":  project.DefaultTenants,
	"overlays": project.DefaultEnvironments,
	"charts":   project.DefaultCharts,
	"rollouts": project.DefaultRollouts,
}

// useFleet finds the project file (eva.yaml) in the working directory or above it
// and makes its folders the defaults of the command's folder flags; flags given on the
// command line still win. Without a project file the defaults stay relative to the
// working directory.
func useFleet(cmd *cobra.Command) error {
	for c := cmd; c != nil; c = c.Parent() {
		if _, ok := c.Annotations[noFleet]; ok || c.Name() == "completion" {
			return nil
		}
	}
	f, err := project.Find(".")
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if f == nil {
		return nil
	}
	if err := f.CheckRelease(buildinfo.Read().Release()); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	dirs := map[string]string{"tenants": f.Tenants, "overlays": f.Environments, "charts": f.Charts, "rollouts": f.Rollouts}
	for name, def := range fleetFolders {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || fl.Changed || strings.Trim(fl.DefValue, "[]") != def {
			continue
		}
		if err := fl.Value.Set(dirs[name]); err != nil {
			return fmt.Errorf("--%s from %s: %w", name, f.Path, err)
		}
	}
	if err := useFleetTarget(cmd, f); err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cmd.SetContext(context.WithValue(ctx, fleetKey{}, f))
	return nil
}

// targetFlags name where a command reads or writes the published render: the fleet's
// publish target stands in for them only when none is given.
var targetFlags = []string{"repo", "ref", "dir", "published"}

// useFleetTarget makes the project file's environment and publish target the defaults
// of --env and of --repo, --branch and --path (or --ref), as its folders are of the
// folder flags: the pull-request workflow and a platform engineer run the same
// commands without naming them.
func useFleetTarget(cmd *cobra.Command, f *project.Fleet) error {
	set := func(name, value string) error {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || fl.Changed || value == "" {
			return nil
		}
		if err := fl.Value.Set(value); err != nil {
			return fmt.Errorf("--%s from %s: %w", name, f.Path, err)
		}
		return nil
	}
	if fl := cmd.Flags().Lookup("env"); fl != nil && fl.DefValue == "dev" {
		if err := set("env", f.Environment); err != nil {
			return err
		}
	}
	p := f.Publish
	if p == nil || slices.ContainsFunc(targetFlags, func(name string) bool {
		fl := cmd.Flags().Lookup(name)
		return fl != nil && fl.Changed
	}) {
		return nil
	}
	if cmd.Flags().Lookup("repo") == nil && cmd.Flags().Lookup("ref") == nil {
		return nil
	}
	for name, value := range map[string]string{"repo": p.Repo, "branch": p.Branch, "path": p.Path, "ref": p.Ref} {
		if p.Ref != "" && name != "ref" || p.Repo != "" && name == "ref" {
			continue // an OCI target sets no git flag, a git one no --ref
		}
		if err := set(name, value); err != nil {
			return err
		}
	}
	return nil
}

// fleetOf is the fleet cmd runs in, nil outside one.
func fleetOf(cmd *cobra.Command) *project.Fleet {
	if cmd.Context() == nil {
		return nil
	}
	f, _ := cmd.Context().Value(fleetKey{}).(*project.Fleet)
	return f
}

// defaultTenants is where the tenant files are when no argument names them.
func defaultTenants(cmd *cobra.Command) string {
	if f := fleetOf(cmd); f != nil {
		return f.Tenants
	}
	return DefaultTenantsDir
}

// releaseFiles unpacks the environments and module charts this evactl carries (once
// per content: later calls find the folder).
func releaseFiles() (string, error) { return project.Unpack(eva.Release) }

// releaseFor is the folder of the release's files when cmd's fleet uses a release and
// the flag naming the fleet's own folder was not given; "" otherwise.
func releaseFor(cmd *cobra.Command, flag string) (string, error) {
	f := fleetOf(cmd)
	if f == nil || f.Release == "" {
		return "", nil
	}
	if fl := cmd.Flags().Lookup(flag); fl != nil && fl.Changed {
		return "", nil
	}
	return releaseFiles()
}

// loadEnvironment loads environment name from the overlays folder root or, when the
// fleet holds no such environment and uses an Eva release, the release's environment
// of that name: a fleet's own environment replaces the released one whole.
func loadEnvironment(cmd *cobra.Command, root, name string) (*overlay.Environment, error) {
	rel, err := releaseFor(cmd, "overlays")
	if err != nil {
		return nil, err
	}
	local := overlay.Names(root)
	if rel == "" || slices.Contains(local, name) {
		return overlay.Load(root, name)
	}
	released := overlay.Names(filepath.Join(rel, "overlays"))
	if slices.Contains(released, name) {
		return overlay.Load(filepath.Join(rel, "overlays"), name)
	}
	return nil, fmt.Errorf("environment %s: no such environment in %s (%s) or in Eva %s (%s)",
		name, root, listOrNone(local), fleetOf(cmd).Release, listOrNone(released))
}

// environmentNames lists the environments loadEnvironment finds, for completion.
func environmentNames(cmd *cobra.Command, root string) []string {
	names := overlay.Names(root)
	if rel, err := releaseFor(cmd, "overlays"); err == nil && rel != "" {
		names = append(names, overlay.Names(filepath.Join(rel, "overlays"))...)
		slices.Sort(names)
		names = slices.Compact(names)
	}
	return names
}

// loadCharts loads the module charts of the folder dir and, when the fleet uses an
// Eva release, the release's charts the folder does not hold.
func loadCharts(cmd *cobra.Command, dir string) (*chartcheck.Checker, error) {
	rel, err := releaseFor(cmd, "charts")
	if err != nil || rel == "" {
		return chartcheck.Load(dir)
	}
	return chartcheck.Load(dir, filepath.Join(rel, "charts"))
}

// hasCharts says whether module charts can be loaded for cmd: the folder exists or
// the fleet's release carries them.
func hasCharts(cmd *cobra.Command, dir string) bool {
	if rel, err := releaseFor(cmd, "charts"); err == nil && rel != "" {
		return true
	}
	return exists(dir)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// exists says whether path names something that can be stat'ed.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
