package cli

import (
	"fmt"
	"path"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/prview"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/treediff"
)

func newDiffCommand(opts *options) *cobra.Command {
	var inputs renderInputs
	var gitT gitTarget
	var ociT ociTarget
	var dir, output string
	var exitCode, allowMassDelete, unifiedDiff, showBookkeeping bool
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Show what a render would change against a folder, a git branch or an OCI artifact",
		Long: `Render the tenants in memory and compare with what is published: the tenants added,
changed and removed, and for each the objects and fields that differ
(HelmRelease eva-tenant-acmeco/crm: spec.values.replicaCount 3 → 4); --unified adds a unified
diff of every file. Fields that are Eva's bookkeeping (spec digests, Flux reconcile
requests) are counted, and listed with --bookkeeping. -o markdown writes the preview a
pull request shows (the workflow evactl init writes posts it): the tenants by wave and
cell, the objects and fields by kind, each cell's room after the change, and what is
refused, at its file and line.

The checks publish runs against the published tree run here too: a render that removes
a tenant whose published bundle is not Decommissioned, or most of the fleet, or that
takes a code another owner published, fails (exit 1) as its publish would. A --branch
or --ref tag that does not exist is an error, not an empty tree. With --exit-code the
command also exits 1 when something differs (for CI).`,
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
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("name exactly one of --dir, --repo or --ref (or set publish: in eva.yaml)")}
			}
			if err := checkDiffOutput(output); err != nil {
				return err
			}
			var g *publish.GitRemote
			var err error
			cellPaths := treePaths(ownRoot)
			switch {
			case gitT.repo != "":
				if g, err = gitT.remote(publish.DefaultAuthor, ""); err != nil {
					return err
				}
				inputs.published = gitCells(&gitT)
				cellPaths = func(c overlay.Cell) string { return path.Join(g.Path, c.Path) }
			case dir != "":
				inputs.published = dirCells(dir)
			default:
				inputs.published = ociCells(&ociT)
			}
			j, err := prepare(cmd, opts, &inputs)
			if err != nil {
				return writeRefusedPreview(cmd.OutOrStdout(), output, inputs.env, err)
			}
			if g != nil {
				j.r.TreePath = g.Path // rendered as publish git renders it
			}
			if j.hasCells() {
				j.reportMoves(cmd.ErrOrStderr())
				report, refused := diffCells(j, cellPaths, publish.Safety{AllowMassDelete: allowMassDelete})
				return finishDiff(cmd, output, j, report, refused, unifiedDiff, showBookkeeping, exitCode)
			}
			files, _, err := j.renderAll()
			if err != nil {
				return err
			}
			rendered := map[string][]byte{}
			for _, f := range files {
				rendered[f.Path] = f.Data
			}
			published, err := readTarget(cmd, dir, g, &ociT)
			if err != nil {
				return err
			}
			// Neither side shows what the validator refuses: the published tree may
			// hold values from before a rule existed.
			report := treediff.Compare(published, rendered, publish.TenantOf, tenant.SecretReason)
			// What publish would refuse after the merge, the pull request is refused now.
			_, refused := publish.Preview(published, publish.FullUpdate(files), publish.Safety{AllowMassDelete: allowMassDelete})
			return finishDiff(cmd, output, j, report, refused, unifiedDiff, showBookkeeping, exitCode)
		},
	}
	f := cmd.Flags()
	inputs.bind(f)
	f.StringVar(&dir, "dir", "", "compare with a rendered folder")
	gitT.bind(f)
	f.StringVar(&ociT.ref, "ref", "", "compare with an OCI artifact, oci://HOST/REPO:TAG")
	f.BoolVar(&ociT.insecure, "insecure", false, "allow a plain-HTTP registry")
	f.BoolVar(&exitCode, "exit-code", false, "exit 1 when something differs")
	f.BoolVar(&allowMassDelete, "allow-mass-delete", false, "as publish --allow-mass-delete: do not fail when the render removes most (or all) published tenants")
	f.BoolVar(&unifiedDiff, "unified", false, "also print a unified diff of every file that differs")
	f.BoolVar(&showBookkeeping, "bookkeeping", false, "also list the fields that are Eva's bookkeeping (spec digests, Flux reconcile requests)")
	f.StringVarP(&output, "output", "o", "text", "output format: text, json, yaml, or markdown (the pull-request preview: tenants by wave and cell, objects by kind, cells' room, refusals)")
	return cmd
}

// finishDiff prints the report and decides the exit status: 1 when publish would refuse
// the render, or (with exitCode) when something differs.
func finishDiff(cmd *cobra.Command, output string, j *job, report *treediff.Report, refused error, unifiedDiff, showBookkeeping, exitCode bool) error {
	out := cmd.OutOrStdout()
	if report == nil {
		return refused
	}
	if output == "markdown" {
		fmt.Fprint(out, prview.Markdown(previewOf(j, report, refused)))
	} else if output != "text" {
		if err := writeStructured(out, output, diffOutput{Report: report, PublishRefusal: errorText(refused)}); err != nil {
			return err
		}
	} else {
		printSummary(out, report, showBookkeeping)
		if unifiedDiff {
			for _, f := range report.Files {
				fmt.Fprint(out, "\n", f.Diff)
			}
		}
	}
	if refused != nil {
		return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("publish would refuse this render: %w", refused)}
	}
	if exitCode && !report.Empty() {
		return &ExitError{Code: ExitInvalid}
	}
	return nil
}
