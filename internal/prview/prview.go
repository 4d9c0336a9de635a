// Package prview writes the preview of a fleet change that a pull request shows (the
// job summary and the comment evactl diff -o markdown makes): the tenants the change
// adds, changes and removes, by wave and cell; the objects and fields it changes, kind
// by kind; each cell's room once it is applied; and what is refused, at its file and
// line. It is a pure function of what evactl diff computed. Every text that came from
// a file goes through safetext.Markdown: a tenant's value opens no tag, link, table
// cell or mention in the comment.
package prview

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenantfile"
	"github.com/aidonow/eva/internal/treediff"
)

// Tenant is where a tenant of the change stands: its rollout wave, and its cell
// ("a → b" when the change moves it; "" without cells).
type Tenant struct {
	Wave int
	Cell string
}

// Cell is one cell's room once the change is applied: its tenants, and the headroom
// left (Pods and TenantsLeft nil when the cell does not bound them).
type Cell struct {
	Name              string
	Tenants           int64
	CPU, Memory       string
	Pods, TenantsLeft *int64
}

// Preview is what the preview shows.
type Preview struct {
	Environment string
	// Report is the change; nil when nothing was rendered (Problems say why).
	Report *treediff.Report
	// Tenants are the render's tenants by code (a removed one may be missing).
	Tenants map[string]Tenant
	// Cells are the environment's cells after the change; none without cells.
	Cells []Cell
	// Problems are the refusals of the files, each at its line.
	Problems []tenantfile.Problem
	// PublishRefusal says why publish would refuse the render ("" when it would not).
	PublishRefusal string
}

// MaxBytes bounds the preview below GitHub's limit on a comment (65,536 characters):
// rows past it are counted, not shown.
const MaxBytes = 60_000

// Markdown writes p as GitHub Flavored Markdown.
func Markdown(p Preview) string {
	w := &writer{budget: MaxBytes}
	w.line(fmt.Sprintf("### Eva: environment %s", safetext.Markdown(p.Environment)))
	w.blank()
	w.line(summary(p))
	w.refusals(p)
	if p.Report != nil && !p.Report.Empty() {
		w.tenants(p)
		w.kinds(p.Report)
	}
	w.cells(p.Cells)
	if w.elided > 0 {
		if w.folded {
			w.b.WriteString("\n</details>\n")
		}
		fmt.Fprintf(&w.b, "\n_%d more row(s) not shown: the whole change is `evactl diff -o json`._\n", w.elided)
	}
	return w.b.String()
}

// summary is the preview's first sentence.
func summary(p Preview) string {
	switch r := p.Report; {
	case r == nil:
		return fmt.Sprintf("**Refused:** %d problem(s) in the files; nothing was rendered.", len(p.Problems))
	case r.Empty():
		return "No change to the published fleet."
	default:
		return fmt.Sprintf("**%d** tenant(s) added, **%d** changed, **%d** removed: %d object(s) in %d file(s).",
			len(r.Added), len(r.Changed), len(r.Removed), len(r.Objects), len(r.Files))
	}
}

// writer is the preview being written, with what is left of MaxBytes.
type writer struct {
	b      strings.Builder
	budget int
	elided int
	folded bool // within a <details> section
}

// line writes a line of the preview, unless rows were left out already: what follows
// them would be headings of empty tables.
func (w *writer) line(s string) {
	if w.elided == 0 {
		w.b.WriteString(s + "\n")
	}
}

func (w *writer) blank() { w.line("") }

// row writes a table row if the budget allows, or counts it.
func (w *writer) row(cells ...string) {
	s := "| " + strings.Join(cells, " | ") + " |\n"
	if w.elided > 0 || w.b.Len()+len(s) > w.budget {
		w.elided++
		return
	}
	w.b.WriteString(s)
}

// refusals lists the problems at their file and line, and publish's refusal.
func (w *writer) refusals(p Preview) {
	if len(p.Problems) == 0 && p.PublishRefusal == "" {
		return
	}
	w.blank()
	w.line("#### Refused")
	w.blank()
	w.row("Where", "Field", "Why")
	w.line("|---|---|---|")
	for _, pr := range p.Problems {
		where := fmt.Sprintf("%s:%d:%d", pr.File, pr.Line, pr.Column)
		w.row(safetext.Markdown(where), orDash(safetext.Markdown(pr.Field)), safetext.Markdown(pr.Message))
	}
	if p.PublishRefusal != "" {
		w.row("publish", "-", safetext.Markdown(p.PublishRefusal))
	}
}

// tenants is the table of the tenants the change touches, by wave, cell and code.
func (w *writer) tenants(p Preview) {
	type entry struct {
		code, change string
		t            Tenant
		known        bool
		objects      [3]int // added, changed, removed
	}
	var entries []*entry
	byCode := map[string]*entry{}
	for change, codes := range map[string][]string{"added": p.Report.Added, "changed": p.Report.Changed, "removed": p.Report.Removed} {
		for _, code := range codes {
			t, known := p.Tenants[code]
			e := &entry{code: code, change: change, t: t, known: known}
			entries = append(entries, e)
			byCode[code] = e
		}
	}
	for _, o := range p.Report.Objects {
		if e := byCode[o.Tenant]; e != nil {
			e.objects[slices.Index([]string{"added", "changed", "removed"}, o.Status)]++
		}
	}
	slices.SortFunc(entries, func(a, b *entry) int {
		// A tenant the render does not hold (removed) has no wave: last.
		return cmp.Or(compareBool(!a.known, !b.known), cmp.Compare(a.t.Wave, b.t.Wave), cmp.Compare(a.t.Cell, b.t.Cell), cmp.Compare(a.code, b.code))
	})
	w.blank()
	w.line("#### Tenants")
	w.blank()
	w.row("Wave", "Cell", "Tenant", "Change", "Objects")
	w.line("|---:|---|---|---|---|")
	for _, e := range entries {
		wave := "-"
		if e.known {
			wave = fmt.Sprint(e.t.Wave)
		}
		objects := fmt.Sprintf("+%d ~%d -%d", e.objects[0], e.objects[1], e.objects[2])
		w.row(wave, orDash(safetext.Markdown(e.t.Cell)), safetext.Markdown(e.code), e.change, objects)
	}
}

// kinds lists the objects changed, kind by kind, each in a folded section.
func (w *writer) kinds(r *treediff.Report) {
	byKind := map[string][]treediff.ObjectChange{}
	for _, o := range r.Objects {
		kind, _, _ := strings.Cut(o.Object, " ")
		byKind[kind] = append(byKind[kind], o)
	}
	w.blank()
	w.line("#### Objects by kind")
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		objects := byKind[kind]
		counts := map[string]int{}
		for _, o := range objects {
			counts[o.Status]++
		}
		var parts []string
		for _, s := range []string{"added", "changed", "removed"} {
			if counts[s] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
			}
		}
		w.blank()
		w.line(fmt.Sprintf("<details><summary>%s: %s</summary>", safetext.Markdown(kind), strings.Join(parts, ", ")))
		w.folded = w.elided == 0
		w.blank()
		w.row("Tenant", "Object", "Field", "Before", "After")
		w.line("|---|---|---|---|---|")
		for _, o := range objects {
			w.objectRows(o)
		}
		w.blank()
		w.line("</details>")
		w.folded = w.folded && w.elided > 0
	}
}

// objectRows writes one object's rows: one per changed field, or its addition or
// removal.
func (w *writer) objectRows(o treediff.ObjectChange) {
	tenant := orDash(safetext.Markdown(o.Tenant))
	_, name, _ := strings.Cut(o.Object, " ")
	name = safetext.Markdown(name)
	if o.Status != "changed" || len(o.Fields) == 0 {
		note := "(" + o.Status + ")"
		if o.Status == "changed" {
			note = "(bookkeeping only)"
			if len(o.Bookkeeping) == 0 {
				note = "(not YAML: see the file diff)"
			}
		}
		w.row(tenant, name, note, "", "")
		return
	}
	for _, f := range o.Fields {
		w.row(tenant, name, safetext.Markdown(f.Field), orDash(safetext.Markdown(f.Old)), orDash(safetext.Markdown(f.New)))
	}
}

// cells is the table of each cell's room after the change.
func (w *writer) cells(cells []Cell) {
	if len(cells) == 0 {
		return
	}
	w.blank()
	w.line("#### Cells after the change")
	w.blank()
	w.row("Cell", "Tenants", "CPU free", "Memory free", "Pods free", "Tenants free")
	w.line("|---|---:|---:|---:|---:|---:|")
	bound := func(n *int64) string {
		if n == nil {
			return "-"
		}
		return fmt.Sprint(*n)
	}
	for _, c := range cells {
		w.row(safetext.Markdown(c.Name), fmt.Sprint(c.Tenants), safetext.Markdown(c.CPU), safetext.Markdown(c.Memory), bound(c.Pods), bound(c.TenantsLeft))
	}
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
