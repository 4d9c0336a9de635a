package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/safetext"
)

// A tenant file moves between cells as the operator moves an EvaTenant (docs/cells.md,
// "Moves"), one step per publish run. The source cell's tree records the move, in the
// tenant's folder, beside the copy it still holds: which cell the tenant moves to, the
// decommission saga's step that copy was last published at (none while the target
// provisions and the source still serves), and since when its traffic was seen gone.
// The target's tree holds the tenant as any tenant placed there. Once the source's
// copy is out of its tree, so is the record, and the move is over.

// moveRecordFile is the record's name in the tenant's folder of the source's tree. The
// tenant's kustomization.yaml does not list it: Flux never applies it.
const moveRecordFile = "move.json"

// capsuleCode is what a capsule code is (the API's pattern).
var capsuleCode = regexp.MustCompile(evav1.CapsuleCodePattern)

// maxMoveRecord bounds what evactl reads as a move record: Eva writes well under it.
const maxMoveRecord = 4 << 10

// moveRecord is a tenant file's move, as the source cell's tree records it.
type moveRecord struct {
	// To is the cell the tenant moves to.
	To string `json:"to"`
	// Step is the decommission saga's step the source's copy was last published at;
	// empty while the target provisions (the source's copy is whole).
	Step evav1.DecommissionStep `json:"step,omitempty"`
	// TrafficMovedAt is when a publish first saw the source's traffic gone (its Ingress
	// pruned): the drain counts from it.
	TrafficMovedAt *time.Time `json:"trafficMovedAt,omitempty"`
}

// fileMove is one tenant file's move between cells.
type fileMove struct {
	code, from string
	// record is the move as the source's tree holds it (a move this placement starts
	// holds none yet: its record is next); next is what this run publishes.
	record, next moveRecord
	// started says this placement starts the move.
	started bool
	// message says what the move waits for, or what this run does; empty until the
	// move is looked at (advanceMoves).
	message string
}

// removed says the source's copy goes with this run: the saga's last step.
func (m *fileMove) removed() bool { return m.next.Step == evav1.StepRemoved }

// movingSteps are the steps a record may name: the saga's, before the source's copy is
// removed (its record goes with it).
var movingSteps = []evav1.DecommissionStep{"", evav1.StepTrafficRemoved, evav1.StepStreamsRemoved,
	evav1.StepReleasesRemoved, evav1.StepNamespaceOnly}

// moveRecordPath is the record's path in a cell's tree.
func moveRecordPath(code string) string {
	return path.Join(render.TenantsDir, render.DirName(code), moveRecordFile)
}

// parseMoveRecord reads a record found at p in cell's tree: strictly, as Eva writes it.
// A record naming no cell of the environment, or the cell it is in, is refused.
func parseMoveRecord(cell, p string, data []byte, cells []overlay.Cell) (moveRecord, error) {
	var rec moveRecord
	fail := func(format string, args ...any) (moveRecord, error) {
		return moveRecord{}, fmt.Errorf("cell %s: %s: %s", cell, p, fmt.Sprintf(format, args...))
	}
	if len(data) > maxMoveRecord {
		return fail("%d bytes; a move record is at most %d", len(data), maxMoveRecord)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return fail("not a move record: %v", err)
	}
	if dec.More() {
		return fail("not a move record: more than one JSON value")
	}
	switch {
	case !slices.ContainsFunc(cells, func(c overlay.Cell) bool { return c.Name == rec.To }):
		return fail("to: %q is not a cell of the environment (%s): a move's cells stay in environment.yaml until it is done", rec.To, strings.Join(cellNames(cells), ", "))
	case rec.To == cell:
		return fail("to: the tenant moves to the cell it is leaving")
	case !slices.Contains(movingSteps, rec.Step):
		return fail("step: %q is not a step of a move's source", rec.Step)
	}
	return rec, nil
}

// encode is the record as written into the source's tree.
func (r moveRecord) encode() []byte {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("encoding a move record: %v", err)) // strings and a time: cannot fail
	}
	return append(data, '\n')
}

// movesIn reads the move records of the cells' trees: by code, the move whose source
// is the cell whose tree holds the record. A tenant with records in two trees is
// refused: one cell is its source.
func movesIn(trees map[string]map[string][]byte, cells []overlay.Cell) (map[string]*fileMove, error) {
	moves := map[string]*fileMove{}
	for _, c := range cells {
		for p, data := range trees[c.Name] {
			dir := publish.TenantOf(p)
			if dir == "" || p != path.Join(render.TenantsDir, dir, moveRecordFile) {
				continue
			}
			rec, err := parseMoveRecord(c.Name, p, data, cells)
			if err != nil {
				return nil, err
			}
			if err := sourceHolds(trees[c.Name], dir, rec.Step); err != nil {
				return nil, fmt.Errorf("cell %s: %s: %w", c.Name, p, err)
			}
			code := strings.ToUpper(dir)
			if other, ok := moves[code]; ok {
				return nil, fmt.Errorf("tenant %s has move records in cells %s and %s: one cell is its source", code, other.from, c.Name)
			}
			moves[code] = &fileMove{code: code, from: c.Name, record: rec, next: rec}
		}
	}
	return moves, nil
}

// sourceHolds checks that a tree holding a move record holds the copy the record says
// it publishes: the tenant's folder (of a capsule code's name), without what the
// recorded step took out. A record is never trusted to take a copy further than its
// tree shows it taken: evactl publishes each step with its record, in one commit.
func sourceHolds(tree map[string][]byte, dir string, step evav1.DecommissionStep) error {
	if render.DirName(strings.ToUpper(dir)) != dir || !capsuleCode.MatchString(strings.ToUpper(dir)) {
		return fmt.Errorf("a move record in a folder that is not a tenant's")
	}
	foundation, ok := tree[path.Join(render.TenantsDir, dir, render.ManifestsFile)]
	if !ok {
		return fmt.Errorf("a move record without the tenant's copy beside it")
	}
	workloads, hasWorkloads := tree[path.Join(render.TenantsDir, dir, render.WorkloadsDir, render.ManifestsFile)]
	// Read as kustomize reads them, not as Eva writes them: a kind quoted, or inside a
	// List, is still the object Flux applies.
	foundationKinds, err := render.ManifestKinds(foundation)
	if err != nil {
		return fmt.Errorf("its copy's %s does not read as manifests: %w", render.ManifestsFile, err)
	}
	workloadKinds, err := render.ManifestKinds(workloads)
	if err != nil {
		return fmt.Errorf("its copy's workloads do not read as manifests: %w", err)
	}
	at := slices.Index(movingSteps, step)
	var wrong string
	switch {
	case at >= slices.Index(movingSteps, evav1.StepTrafficRemoved) && workloadKinds["Ingress"]:
		wrong = "its copy still has its Ingress"
	case at >= slices.Index(movingSteps, evav1.StepStreamsRemoved) && foundationKinds["Stream"]:
		wrong = "its copy still has its Streams"
	case at >= slices.Index(movingSteps, evav1.StepReleasesRemoved) && hasWorkloads:
		wrong = "its copy still has its workloads"
	case step == evav1.StepNamespaceOnly && !publish.Decommissioned(foundation):
		wrong = "its copy is not Decommissioned"
	}
	if wrong != "" {
		return fmt.Errorf("the record says step %s, but %s: it was not published by evactl", step, wrong)
	}
	return nil
}

// sourceFiles are the source's copy of a moving tenant at the step this run publishes,
// with the record: none once the copy is removed.
func (j *job) sourceFiles(r *render.Renderer, m *fileMove) ([]render.File, error) {
	if m.removed() {
		return nil, nil
	}
	t := j.tenant(m.code)
	if t == nil {
		return nil, nil // its file is gone: the publish's checks say whether it may go
	}
	files, err := r.StepFiles(t, m.next.Step)
	if err != nil {
		return nil, err
	}
	return append(files, render.File{Path: moveRecordPath(m.code), Data: m.next.encode()}), nil
}

// cellSafety is a publish's safety for one cell's tree: the copies whose moves end with
// this run leave it on purpose, lost to no one.
func (j *job) cellSafety(base publish.Safety, cell string) publish.Safety {
	for _, m := range j.leaving(cell) {
		if m.removed() {
			base.Moved = append(slices.Clone(base.Moved), render.DirName(m.code))
		}
	}
	return base
}

// leaving are the moves whose source is cell, in code order.
func (j *job) leaving(cell string) []*fileMove {
	var out []*fileMove
	for _, code := range slices.Sorted(maps.Keys(j.moves)) {
		if m := j.moves[code]; m.from == cell {
			out = append(out, m)
		}
	}
	return out
}

// withSources adds to a cell's rendered tree the copies its moving tenants leave there,
// and lists them in the tree's root kustomization.yaml.
func (j *job) withSources(r *render.Renderer, s cellShare, files []render.File, stats *render.TreeStats) ([]render.File, error) {
	cell := s.cell.Name
	leaving := j.leaving(cell)
	if len(leaving) == 0 {
		return files, nil
	}
	codes := make([]string, 0, len(s.tenants)+len(leaving))
	for _, t := range s.tenants {
		codes = append(codes, t.Spec.CapsuleCode)
	}
	out := slices.DeleteFunc(files, func(f render.File) bool { return f.Path == render.RootKustomization })
	for _, m := range leaving {
		source, err := j.sourceFiles(r, m)
		if err != nil {
			return nil, fmt.Errorf("cell %s: the copy %s leaves: %w", cell, m.code, err)
		}
		if len(source) > 0 {
			codes = append(codes, m.code)
		}
		for _, f := range source {
			stats.Bytes += int64(len(f.Data))
		}
		out = append(out, source...)
	}
	return append(out, render.RootKustomizationFile(r.DeliveryDir(), codes)), nil
}

// reportMoves says where each move of a tenant file stands, and what this run does of
// it (advanceMoves), one line each. What a move waits for quotes the cells' clusters
// (a release's message can hold text a tenant's values put there): it is escaped, so
// a CI log shows it on its line, no workflow command or terminal escape taken from it.
func (j *job) reportMoves(w io.Writer) {
	for _, code := range slices.Sorted(maps.Keys(j.moves)) {
		m := j.moves[code]
		msg := m.message
		if msg == "" {
			msg = fmt.Sprintf("at step %s (evactl publish git or oci, with --cell-kubeconfig, takes it further)", stepName(m.record.Step))
			if m.started {
				msg = fmt.Sprintf("starts: cell %s's tree records it; cell %s gets the tenant with the next publish", m.from, m.next.To)
			}
		}
		fmt.Fprintf(w, "move of %s from cell %s to %s: %s\n", code, m.from, m.next.To, safetext.Limit(msg, safetext.MaxMessage))
	}
}
