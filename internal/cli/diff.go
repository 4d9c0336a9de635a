package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/treediff"
)

func newDiffCommand(opts *options) *cobra.Command {
	var inputs renderInputs
	var gitT gitTarget
	var ociT ociTarget
	var dir, output string
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Show what a render would change against a folder, a git branch or an OCI artifact",
		Long: `Render the tenants in memory and compare with what is published: the tenants added,
changed and removed, then a unified diff of every file. With --exit-code the command
exits 1 when something differs (for CI).`,
		Example: `  evactl diff --dir out/gitops
  evactl diff --repo https://git.example.com/platform/fleet.git --branch main --exit-code
  evactl diff --ref oci://registry.example.com/eva/tenants:prod --output json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			targets := 0
			for _, set := range []bool{dir != "", gitT.repo != "", ociT.ref != ""} {
				if set {
					targets++
				}
			}
			if targets != 1 {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("name exactly one of --dir, --repo or --ref")}
			}
			if output != "text" && output != "json" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--output must be text or json, not %q", output)}
			}
			j, err := prepare(cmd, opts, &inputs)
			if err != nil {
				return err
			}
			var g *publish.GitRemote
			if gitT.repo != "" {
				if g, err = gitT.remote(publish.DefaultAuthor, ""); err != nil {
					return err
				}
				j.r.TreePath = g.Path // rendered as publish git renders it
			}
			files, _, err := j.renderAll()
			if err != nil {
				return err
			}
			rendered := map[string][]byte{}
			for _, f := range files {
				rendered[f.Path] = f.Data
			}
			var published map[string][]byte
			switch {
			case dir != "":
				published, err = publish.ReadDir(dir)
			case g != nil:
				published, _, err = g.Read(cmd.Context())
			default:
				var o *publish.OCI
				if o, err = ociT.sink(); err == nil {
					published, err = o.Pull(cmd.Context())
				}
			}
			if err != nil {
				return err
			}
			// Neither side shows what the validator refuses: the published tree may
			// hold values from before a rule existed.
			report := treediff.Compare(published, rendered, publish.TenantOf, tenant.SecretReason)
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return err
				}
			} else {
				for _, c := range report.Added {
					fmt.Fprintf(out, "+ %s (added)\n", c)
				}
				for _, c := range report.Changed {
					fmt.Fprintf(out, "~ %s (changed)\n", c)
				}
				for _, c := range report.Removed {
					fmt.Fprintf(out, "- %s (removed)\n", c)
				}
				if report.Empty() {
					fmt.Fprintln(out, "no changes")
				}
				for _, f := range report.Files {
					fmt.Fprint(out, "\n", f.Diff)
				}
			}
			if exitCode && !report.Empty() {
				return &ExitError{Code: ExitInvalid}
			}
			return nil
		},
	}
	f := cmd.Flags()
	inputs.bind(f)
	f.StringVar(&dir, "dir", "", "compare with a rendered folder")
	gitT.bind(f)
	f.StringVar(&ociT.ref, "ref", "", "compare with an OCI artifact, oci://HOST/REPO:TAG")
	f.BoolVar(&ociT.insecure, "insecure", false, "allow a plain-HTTP registry")
	f.BoolVar(&exitCode, "exit-code", false, "exit 1 when something differs")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
