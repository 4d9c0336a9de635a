package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/placement"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// placeTenants places the tenants of res on the environment's cells (none when it has
// no cells), as the published trees record them (rec): a published tenant stays on its
// cell while its placement allows it, and a Decommissioned one stays there regardless
// (it claims nothing, and goes nowhere when no cell holds it). A tenant whose
// placement no longer allows its cell moves (the moves returned, by code, with those
// already under way): while it moves it claims room on both cells. What cannot be
// placed is a problem at the tenant's placement, or its tier when it sets none; so is a
// tenant that would leave a cell the environment no longer has, and a moving tenant
// whose placement no longer allows the cell it moves to.
func placeTenants(res *tenantfile.Result, env *overlay.Environment, catalog *tenant.Catalog, rec placementRecord) (placement.Result, map[string]*fileMove, []tenantfile.Problem) {
	if len(env.Settings.Cells) == 0 {
		return placement.Result{}, nil, nil
	}
	byCode := map[string]*tenantfile.Tenant{}
	var objects []*evav1.EvaTenant
	var retired []string
	for _, t := range res.Tenants {
		if t.Object == nil {
			continue
		}
		code := t.Object.Spec.CapsuleCode
		byCode[code] = t
		objects = append(objects, t.Object)
		if t.Object.Spec.LifecycleOrDefault() != evav1.LifecycleActive {
			retired = append(retired, code)
		}
	}
	reqs := placement.Requests(objects, catalog, func(code string) (string, string) {
		if m, moving := rec.moves[code]; moving {
			return rec.cells[code], m.from
		}
		return rec.cells[code], ""
	})
	var redirected []string
	for i, r := range reqs {
		// A move goes on to its target whatever the placement now says: the tenant
		// is placed there, and the placement is a problem.
		if m, moving := rec.moves[r.Code]; moving && !r.Allows(placement.Cell{Name: m.record.To, Labels: cellLabels(env, m.record.To)}) {
			reqs[i].Cell, reqs[i].Labels = m.record.To, nil
			redirected = append(redirected, r.Code)
		}
	}
	// A moving tenant, and one whose move this placement starts, holds its room on
	// both cells (placement.Place).
	placed := placement.Place(env.Settings.PlacementCells(), reqs)
	for _, code := range retired {
		if cell := rec.cells[code]; cell != "" {
			placed.Cells[code] = cell
		}
	}
	var problems []tenantfile.Problem
	at := func(code, message string) {
		t := byCode[code]
		field := "spec.tier"
		if t.Object.Spec.Placement != nil {
			field = "spec.placement"
		}
		problems = append(problems, t.ProblemAt(field, fmt.Sprintf("environment %s: %s", env.Name, message)))
	}
	for _, p := range placed.Problems {
		if _, ok := byCode[p.Code]; ok {
			at(p.Code, p.Message)
		}
	}
	moves := fileMoves(&placed, rec, redirected, env, at)
	return placed, moves, problems
}

// fileMoves are the moves of tenant files under way (rec.moves) and those placed
// starts; a move redirected, or one that cannot start, is a problem (at), and its
// tenant is left out of placed.
func fileMoves(placed *placement.Result, rec placementRecord, redirected []string, env *overlay.Environment, at func(code, message string)) map[string]*fileMove {
	moves := maps.Clone(rec.moves)
	if moves == nil {
		moves = map[string]*fileMove{}
	}
	for _, code := range redirected {
		m := moves[code]
		at(code, fmt.Sprintf("%s is moving from cell %s to %s (step %s), which its placement no longer allows; a move is neither undone nor redirected: allow cell %[3]s again until the move is done, then change the placement (docs/cells.md#moves)",
			code, m.from, m.record.To, stepName(m.record.Step)))
	}
	for _, code := range placed.Moves {
		from := rec.cells[code]
		switch {
		case !slices.ContainsFunc(env.Settings.Cells, func(c overlay.Cell) bool { return c.Name == from }):
			at(code, fmt.Sprintf("%s is published on cell %s, which the environment no longer has; evactl cannot take it off a cell it does not publish: keep the cell in environment.yaml until the tenant has moved (docs/cells.md#moves)", code, from))
		case env.Settings.Applier == overlay.ApplierArgoCD:
			at(code, fmt.Sprintf("%s is published on cell %s, which its placement no longer allows; evactl moves tenant files between cells that Flux delivers, not Argo CD (docs/cells.md#moves)", code, from))
		default:
			moves[code] = &fileMove{code: code, from: from, next: moveRecord{To: placed.Cells[code]}, started: true}
			continue
		}
		delete(placed.Cells, code)
	}
	return moves
}

// cellLabels are the labels of the environment's cell name.
func cellLabels(env *overlay.Environment, name string) map[string]string {
	for _, c := range env.Settings.PlacementCells() {
		if c.Name == name {
			return c.Labels
		}
	}
	return nil
}

// stepName names a move's step in messages.
func stepName(step evav1.DecommissionStep) string {
	if step == "" {
		return "ProvisioningTarget"
	}
	return string(step)
}

// cellReport is what evactl cells prints: each cell's capacity, use and headroom, and
// which cell each tenant goes to.
type cellReport struct {
	Environment string               `json:"environment"`
	Cells       []cellUse            `json:"cells"`
	Placements  map[string]string    `json:"placements"`
	Problems    []tenantfile.Problem `json:"problems"`
}

type cellUse struct {
	Name     string             `json:"name"`
	Labels   map[string]string  `json:"labels,omitempty"`
	Capacity placement.Capacity `json:"capacity"`
	Tenants  int64              `json:"tenants"`
	CPU      string             `json:"cpu"`
	Memory   string             `json:"memory"`
	Pods     int64              `json:"pods"`
	// Headroom is what the cell can still take, CPU and memory with overcommit.
	Headroom struct {
		CPU     string `json:"cpu"`
		Memory  string `json:"memory"`
		Pods    *int64 `json:"pods,omitempty"`
		Tenants *int64 `json:"tenants,omitempty"`
	} `json:"headroom"`
}

func newCellsCommand(opts *options) *cobra.Command {
	var tenants []string
	var env, overlays, output string
	var published publishedRecord
	cmd := &cobra.Command{
		Use:   "cells",
		Short: "Show each cell's use and headroom and where each tenant is placed",
		Long: `Place the tenants on the environment's cells (environment.yaml cells:) as validate and
render do: each Active tenant claims its tier's quota (or, for a tier without one, the
most its values may ask for), and goes to the cell its spec.placement allows whose
fullest dimension stays least full. Prints each cell's capacity, use and headroom;
a tenant no cell can take is a problem at its file and line (exit 1).`,
		Example: `  evactl cells --env prod
  evactl cells --env prod -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			catalog, err := opts.catalog()
			if err != nil {
				return err
			}
			e, err := loadEnvironment(cmd, overlays, env)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if len(e.Settings.Cells) == 0 {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("environment %s has no cells: it is one cluster (docs/cells.md)", e.Name)}
			}
			res, err := tenantfile.Load(tenants, catalog)
			if err != nil {
				return usageExit(err)
			}
			record, err := published.placements(cmd, e)
			if err != nil {
				return err
			}
			placed, _, problems := placeTenants(res, e, catalog, record)
			report := newCellReport(e, placed, append(res.Problems, problems...))
			if output == "text" {
				writeCellTable(cmd.OutOrStdout(), report)
				printProblems(cmd.ErrOrStderr(), report.Problems)
			} else if err := writeStructured(cmd.OutOrStdout(), output, report); err != nil {
				return err
			}
			if len(report.Problems) > 0 {
				return &ExitError{Code: ExitInvalid}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&tenants, "tenants", []string{DefaultTenantsDir}, "tenant files or folders")
	f.StringVar(&env, "env", "dev", "environment whose cells the tenants are placed on")
	f.StringVar(&overlays, "overlays", "overlays", "folder of environment overlays")
	f.StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	published.bind(cmd)
	return cmd
}

// publishedRecord is where the commands that place tenants without publishing them
// read the record of placement: a folder (--published), or the published branch itself
// (--repo and the other flags of publish git).
type publishedRecord struct {
	dir string
	git gitTarget
}

// bind adds the record's flags.
func (p *publishedRecord) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.dir, "published", "", "folder holding the environment's published tree (a checkout of the published branch at publish's --path, or render's --out): tenants stay on the cells whose trees hold them; unset (and no --repo), every tenant is placed afresh")
	p.git.bind(cmd.Flags())
}

// placements reads where the tenants were placed from the cells' trees (none when
// neither --published nor --repo is set, or the environment has no cells).
func (p *publishedRecord) placements(cmd *cobra.Command, e *overlay.Environment) (placementRecord, error) {
	var read treeReader
	switch {
	case p.dir != "" && p.git.repo != "":
		return placementRecord{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("name one of --published and --repo")}
	case len(e.Settings.Cells) == 0:
		return placementRecord{}, nil
	case p.dir != "":
		read = dirCells(p.dir)
	case p.git.repo != "":
		read = gitCells(&p.git)
	default:
		return placementRecord{}, nil
	}
	rec, err := publishedCells(cmd.Context(), e.Settings.Cells, read)
	if err != nil {
		return placementRecord{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("the published trees (--published or --repo): %w", err)}
	}
	return rec, nil
}

// newCellReport gathers the placement into the report.
func newCellReport(e *overlay.Environment, placed placement.Result, problems []tenantfile.Problem) cellReport {
	r := cellReport{Environment: e.Name, Placements: placed.Cells, Problems: problems}
	if r.Placements == nil {
		r.Placements = map[string]string{}
	}
	if r.Problems == nil {
		r.Problems = []tenantfile.Problem{}
	}
	for _, c := range e.Settings.PlacementCells() {
		u := placement.Use{}
		if p := placed.Use[c.Name]; p != nil {
			u = *p
		}
		cu := cellUse{Name: c.Name, Labels: c.Labels, Capacity: c.Capacity, Tenants: u.Tenants, CPU: u.CPU.String(), Memory: u.Memory.String(), Pods: u.Pods}
		cpu, mem, pods, tenants := placement.Headroom(c, u)
		cu.Headroom.CPU, cu.Headroom.Memory = cpu.String(), mem.String()
		if c.Capacity.Pods > 0 {
			cu.Headroom.Pods = &pods
		}
		if c.Capacity.Tenants > 0 {
			cu.Headroom.Tenants = &tenants
		}
		r.Cells = append(r.Cells, cu)
	}
	return r
}

// writeCellTable prints the report as a table, a cell a row.
func writeCellTable(w io.Writer, r cellReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CELL\tLABELS\tTENANTS\tCPU\tMEMORY\tPODS\tHEADROOM")
	limit := func(n int64) string {
		if n <= 0 {
			return "-"
		}
		return fmt.Sprint(n)
	}
	for _, c := range r.Cells {
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
			labels = append(labels, k+"="+c.Labels[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%s\t%s/%s\t%s/%s\t%d/%s\tcpu %s, memory %s\n", c.Name, strings.Join(labels, ","),
			c.Tenants, limit(c.Capacity.Tenants), c.CPU, c.Capacity.CPU.String(), c.Memory, c.Capacity.Memory.String(),
			c.Pods, limit(c.Capacity.Pods), c.Headroom.CPU, c.Headroom.Memory)
	}
	_ = tw.Flush()
}
