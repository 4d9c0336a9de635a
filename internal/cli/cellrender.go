package cli

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/treediff"
)

// renderedShare is one cell's share rendered, with the checks its publish will run
// already passed against the tree placement read.
type renderedShare struct {
	cellShare
	files []render.File
}

// renderShares renders every cell's share under treePath and previews each against the
// cell's published tree: a refusal (a tenant lost, another owner's folder) in any cell
// stops the whole render before anything is written or published.
func (j *job) renderShares(treePath treePaths, safety publish.Safety) ([]renderedShare, render.TreeStats, error) {
	var out []renderedShare
	var total render.TreeStats
	for _, s := range j.shares() {
		files, stats, err := j.renderShare(s, treePath(s.cell))
		if err != nil {
			return nil, total, err
		}
		total.Tenants += stats.Tenants
		total.Objects += stats.Objects
		total.Bytes += stats.Bytes
		if _, err := publish.Preview(j.cellTrees[s.cell.Name], publish.FullUpdate(files), j.cellSafety(safety, s.cell.Name)); err != nil {
			return nil, total, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("cell %s: %w", s.cell.Name, err)}
		}
		out = append(out, renderedShare{cellShare: s, files: files})
	}
	return out, total, nil
}

// renderCells writes an environment with cells into --out: each cell's tree into its
// own folder (a git repository of its own, or a plain folder), after every cell's
// render and checks have passed.
func renderCells(cmd *cobra.Command, j *job, ro *renderOptions, start time.Time) error {
	if flat, err := publish.ReadDir(ro.out); err != nil {
		return err
	} else if len(flat) > 0 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--out %s holds a tree rendered without cells; environment %s places its tenants on cells (%s): render into another folder (docs/cells.md)",
			ro.out, j.r.Env.Name, strings.Join(cellNames(j.r.Env.Settings.Cells), ", "))}
	}
	if !ro.quiet {
		j.reportMoves(cmd.ErrOrStderr())
	}
	safety := publish.Safety{AllowMassDelete: ro.allowMassDelete}
	shares, stats, err := j.renderShares(ownRoot, safety)
	if err != nil {
		return err
	}
	rep := j.report(stats, start)
	var results []string
	for _, s := range shares {
		dir := filepath.Join(ro.out, filepath.FromSlash(s.cell.Path))
		outcome, err := writeShare(dir, s, ro, j.cellSafety(safety, s.cell.Name), j.r.Env.Name)
		if err != nil {
			return fmt.Errorf("cell %s: %w", s.cell.Name, err)
		}
		rep.Cells = append(rep.Cells, cellOutcome{Cell: s.cell.Name, treeOutcome: *outcome})
		text := outcome.commitSummary()
		if !ro.git {
			text = fmt.Sprintf("%d tenants written", outcome.Tenants)
		}
		results = append(results, s.cell.Name+" "+text)
	}
	rep.timed(start) // writing and committing the cells' trees included
	return rep.finish(cmd, ro.output, ro.quiet, fmt.Sprintf("%s; cells: %s", rep.summary(), strings.Join(results, "; ")))
}

// writeShare writes one cell's tree into dir and says what changed.
func writeShare(dir string, s renderedShare, ro *renderOptions, safety publish.Safety, env string) (*treeOutcome, error) {
	if !ro.git {
		var codes []string
		for _, t := range s.tenants {
			codes = append(codes, t.Spec.CapsuleCode)
		}
		d, err := publish.OpenDir(dir, codes, safety)
		if err != nil {
			return nil, err
		}
		for _, f := range s.files {
			if err := d.Put(f); err != nil {
				return nil, err
			}
		}
		return &treeOutcome{Updated: true, Tenants: len(codes)}, d.Finish()
	}
	local, err := publish.OpenLocal(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range s.files {
		if err := local.Put(f); err != nil {
			return nil, err
		}
	}
	result, err := local.Commit(safety, ro.author.author(),
		fmt.Sprintf("eva: render %d tenant(s) for %s, cell %s", len(s.tenants), env, s.cell.Name))
	if err != nil {
		return nil, err
	}
	return outcomeOf(result), nil
}

// cellSink is where one cell's tree is published.
type cellSink func(c overlay.Cell) (publish.Sink, error)

// publishCells publishes an environment with cells: every cell's share is rendered and
// checked first, then each cell's tree is published to its own destination, one after
// the other (a failure leaves the cells before it published, each whole).
func publishCells(cmd *cobra.Command, j *job, pf *publishFlags, sinkFor cellSink, treePath treePaths, start time.Time) error {
	safety := publish.Safety{AllowMassDelete: pf.allowMassDelete}
	shares, stats, err := j.renderShares(treePath, safety)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), pf.timeout)
	defer cancel()
	rep := j.report(stats, start)
	var done []string
	for _, s := range shares {
		sink, err := sinkFor(s.cell)
		if err != nil {
			return err
		}
		res, err := sink.Publish(ctx, publish.FullUpdate(s.files), j.cellSafety(safety, s.cell.Name))
		if err != nil {
			return fmt.Errorf("cell %s: %w (published before it: %s)", s.cell.Name, err, noneIfEmpty(done))
		}
		done = append(done, s.cell.Name)
		outcome := outcomeOf(res)
		rep.Cells = append(rep.Cells, cellOutcome{Cell: s.cell.Name, treeOutcome: *outcome})
		// Each cell is said as it is published: a later cell's failure leaves it so.
		if res.Committed || !pf.quiet {
			fmt.Fprintf(cmd.ErrOrStderr(), "cell %s: %s\n", s.cell.Name, outcome.publishSummary())
		}
		if pf.output == "text" {
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", s.cell.Name, res.Revision)
		}
	}
	rep.timed(start)
	return rep.finish(cmd, pf.output, pf.quiet, rep.summary())
}

// diffCells renders every cell's share as published under treePath and compares it
// with the cell's published tree (read when the tenants were placed). The report names
// files by their path below the environment (the cell's path first).
func diffCells(j *job, treePath treePaths, safety publish.Safety) (*treediff.Report, error) {
	published, rendered := map[string][]byte{}, map[string][]byte{}
	var refusals []string
	for _, s := range j.shares() {
		files, _, err := j.renderShare(s, treePath(s.cell))
		if err != nil {
			return nil, err
		}
		for p, data := range j.cellTrees[s.cell.Name] {
			published[path.Join(s.cell.Path, p)] = data
		}
		for _, f := range files {
			rendered[path.Join(s.cell.Path, f.Path)] = f.Data
		}
		if _, err := publish.Preview(j.cellTrees[s.cell.Name], publish.FullUpdate(files), j.cellSafety(safety, s.cell.Name)); err != nil {
			refusals = append(refusals, fmt.Sprintf("cell %s: %v", s.cell.Name, err))
		}
	}
	tenantOf := func(p string) string {
		for _, c := range j.r.Env.Settings.Cells {
			if rest, ok := strings.CutPrefix(p, c.Path+"/"); ok {
				return publish.TenantOf(rest)
			}
		}
		return ""
	}
	report := treediff.Compare(published, rendered, tenantOf, tenant.SecretReason)
	if len(refusals) > 0 {
		return report, fmt.Errorf("%s", strings.Join(refusals, "; "))
	}
	return report, nil
}

// cellNames lists the cells' names, for messages.
func cellNames(cells []overlay.Cell) []string {
	names := make([]string, len(cells))
	for i, c := range cells {
		names[i] = c.Name
	}
	return names
}

func noneIfEmpty(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
