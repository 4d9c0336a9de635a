package cli

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
)

// A cell's published tree is the record of which tenants were placed on it: each cell
// of an environment has a tree of its own, laid out as an environment without cells
// has, under the cell's path (a folder of the --out folder or of the git --path, or a
// repository below the OCI --ref's). Placement reads these trees first, so a tenant
// stays on the cell that holds it.

// treeReader reads the published tree of one cell: paths relative to the cell's folder,
// and none when nothing was published there yet; and its revision (the commit or
// digest, "" for a folder).
type treeReader func(ctx context.Context, c overlay.Cell) (map[string][]byte, string, error)

// placementRecord is what the cells' published trees record of placement.
type placementRecord struct {
	// cells maps each published tenant's code to its cell; a moving tenant's is the
	// cell it moves to.
	cells map[string]string
	// trees are the cells' trees, by cell name, and revisions the revision each was
	// read at.
	trees     map[string]map[string][]byte
	revisions map[string]string
	// moves are the tenant files moving between cells, by code (cellmoves.go).
	moves map[string]*fileMove
}

// publishedCells reads every cell's tree and maps each tenant code found to its cell.
// A tenant in two cells' trees is refused, unless it moves from one to the other: the
// record must name one.
func publishedCells(ctx context.Context, cells []overlay.Cell, read treeReader) (placementRecord, error) {
	rec := placementRecord{cells: map[string]string{}, trees: map[string]map[string][]byte{}, revisions: map[string]string{}}
	holders := map[string][]string{}
	for _, c := range cells {
		tree, revision, err := read(ctx, c)
		if err != nil {
			return placementRecord{}, fmt.Errorf("cell %s: reading its published tree: %w", c.Name, err)
		}
		rec.trees[c.Name], rec.revisions[c.Name] = tree, revision
		for p := range tree {
			if dir := publish.TenantOf(p); dir != "" {
				code := strings.ToUpper(dir)
				if !slices.Contains(holders[code], c.Name) {
					holders[code] = append(holders[code], c.Name)
				}
			}
		}
	}
	moves, err := movesIn(rec.trees, cells)
	if err != nil {
		return placementRecord{}, err
	}
	rec.moves = moves
	for code, on := range holders {
		if m, moving := moves[code]; moving {
			if other := slices.DeleteFunc(slices.Clone(on), func(c string) bool { return c == m.from || c == m.record.To }); len(other) > 0 {
				return placementRecord{}, fmt.Errorf("tenant %s moves from cell %s to %s, and is published on cell %s too: remove it from the one it does not run on",
					code, m.from, m.record.To, other[0])
			}
			rec.cells[code] = m.record.To
			continue
		}
		if len(on) > 1 {
			slices.Sort(on)
			return placementRecord{}, fmt.Errorf("tenant %s is published on cells %s and %s: remove it from the one it does not run on",
				code, on[0], on[1])
		}
		rec.cells[code] = on[0]
	}
	return rec, nil
}

// dirCells reads each cell's tree from its folder under dir (a render's --out, or a
// checkout of the published branch at the environment's path).
func dirCells(dir string) treeReader {
	return func(_ context.Context, c overlay.Cell) (map[string][]byte, string, error) {
		tree, err := publish.ReadDir(filepath.Join(dir, filepath.FromSlash(c.Path)))
		return tree, "", err
	}
}

// gitCells reads each cell's tree from its folder below the target's --path.
func gitCells(g *gitTarget) treeReader {
	return func(ctx context.Context, c overlay.Cell) (map[string][]byte, string, error) {
		r, err := g.cellRemote(c, publish.DefaultAuthor)
		if err != nil {
			return nil, "", err
		}
		return r.Read(ctx)
	}
}

// ociCells reads each cell's tree from its artifact (ociTarget.forCell).
func ociCells(o *ociTarget) treeReader {
	return func(ctx context.Context, c overlay.Cell) (map[string][]byte, string, error) {
		sink, err := o.forCell(c).sink()
		if err != nil {
			return nil, "", err
		}
		return sink.Read(ctx)
	}
}

// cellRemote is the target's remote for one cell: its folder below --path.
func (g *gitTarget) cellRemote(c overlay.Cell, author publish.Author) (*publish.GitRemote, error) {
	cell := *g
	cell.path = path.Join(g.path, c.Path)
	return cell.remote(author, "")
}

// forCell is the artifact of one cell (publish.CellRef).
func (o *ociTarget) forCell(c overlay.Cell) *ociTarget {
	cell := *o
	cell.ref = publish.CellRef(o.ref, c.Path)
	return &cell
}

// cellShare is the part of a render one cell publishes: the tenants placed on it and
// the folder of the repository its tree goes under.
type cellShare struct {
	cell    overlay.Cell
	tenants []*evav1.EvaTenant
}

// shares splits the job's tenants by the cell they were placed on, a share per cell
// in the environment's order (a cell with no tenants has an empty share: publishing
// it removes what it held).
func (j *job) shares() []cellShare {
	out := make([]cellShare, 0, len(j.r.Env.Settings.Cells))
	for _, c := range j.r.Env.Settings.Cells {
		s := cellShare{cell: c}
		for _, t := range j.tenants {
			code := t.Spec.CapsuleCode
			if m := j.moves[code]; m != nil && m.started {
				// A move starts with its record in the source's tree alone: a run that
				// stops between two cells' publishes leaves no tenant in two trees
				// without one. The target gets the tenant with the next publish.
				continue
			}
			if j.placed[code] == c.Name {
				s.tenants = append(s.tenants, t)
			}
		}
		out = append(out, s)
	}
	return out
}

// renderShare renders one cell's tenants in memory, as published under treePath (the
// folder of the repository that holds the cell's tree).
func (j *job) renderShare(s cellShare, treePath string) ([]render.File, render.TreeStats, error) {
	r := *j.r
	r.TreePath = treePath
	sub := *j
	sub.r, sub.tenants = &r, s.tenants
	sub.unchanged = make([]bool, len(s.tenants))
	files, stats, err := sub.renderAll()
	if err != nil {
		return nil, stats, err
	}
	// The copies of the tenants moving off this cell, at their saga's step.
	files, err = j.withSources(&r, s, files, &stats)
	return files, stats, err
}

// treePaths says under which folder of its repository each cell's tree is published:
// for a git branch, the cell's path below --path; for a folder of its own or an
// artifact of its own, the root.
type treePaths func(c overlay.Cell) string

// ownRoot is treePaths for cells whose trees are each a repository or artifact of
// their own.
func ownRoot(overlay.Cell) string { return "" }

// hasCells says the job's environment places its tenants on cells.
func (j *job) hasCells() bool { return len(j.r.Env.Settings.Cells) > 0 }
