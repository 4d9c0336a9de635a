package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/treediff"
)

// diffOutput is what diff -o json|yaml prints: the report, and why publish would
// refuse the render ("" when it would not).
type diffOutput struct {
	*treediff.Report
	PublishRefusal string `json:"publishRefusal,omitempty"`
}

// readTarget reads the published tree diff compares with: a folder, a git branch or an
// OCI tag. A branch or tag that does not exist is an error: compared with nothing, every
// tenant would show as added.
func readTarget(cmd *cobra.Command, dir string, g *publish.GitRemote, ociT *ociTarget) (map[string][]byte, error) {
	switch {
	case dir != "":
		return publish.ReadDir(dir)
	case g != nil:
		tree, rev, err := g.Read(cmd.Context())
		if err == nil && rev == "" {
			err = fmt.Errorf("branch %q does not exist in %s (a first publish creates it; evactl render shows what it would hold)",
				g.Branch, safetext.RedactURL(g.URL))
		}
		return tree, err
	}
	o, err := ociT.sink()
	if err != nil {
		return nil, err
	}
	tree, digest, err := o.Read(cmd.Context())
	if err == nil && digest == "" {
		err = fmt.Errorf("%s: no such tag (a first publish creates it; evactl render shows what it would hold)", ociT.ref)
	}
	return tree, err
}

// printSummary prints the tenants added, changed and removed, each with the objects
// and fields that differ. Bookkeeping fields are counted, and listed when asked.
func printSummary(out io.Writer, r *treediff.Report, showBookkeeping bool) {
	byTenant := map[string][]treediff.ObjectChange{}
	for _, o := range r.Objects {
		byTenant[o.Tenant] = append(byTenant[o.Tenant], o)
	}
	hidden, hiddenObjects := 0, 0
	section := func(mark, status string, codes []string) {
		for _, code := range codes {
			fmt.Fprintf(out, "%s %s (%s)\n", mark, code, status)
			for _, o := range byTenant[code] {
				n, shown := printObject(out, o, showBookkeeping)
				hidden += n
				if n > 0 && !shown {
					hiddenObjects++
				}
			}
		}
	}
	section("+", "added", r.Added)
	section("~", "changed", r.Changed)
	section("-", "removed", r.Removed)
	for _, o := range byTenant[""] {
		fmt.Fprintf(out, "~ %s\n", o.Path)
		printObject(out, o, showBookkeeping)
	}
	if r.Empty() {
		fmt.Fprintln(out, "no changes")
	}
	if hidden > 0 && !showBookkeeping {
		fmt.Fprintf(out, "(%d bookkeeping field(s) not shown, %d object(s) changed only in them; --bookkeeping lists them)\n",
			hidden, hiddenObjects)
	}
}

// printObject prints one object's change; it returns the bookkeeping fields it did
// not list, and whether it printed the object.
func printObject(out io.Writer, o treediff.ObjectChange, showBookkeeping bool) (int, bool) {
	mark := map[string]string{"added": "+", "removed": "-"}[o.Status]
	if mark != "" {
		fmt.Fprintf(out, "    %s %s\n", mark, o.Object)
		return 0, true
	}
	fields := o.Fields
	if showBookkeeping {
		fields = append(fields, o.Bookkeeping...)
	}
	if len(fields) == 0 {
		if len(o.Bookkeeping) == 0 {
			fmt.Fprintf(out, "    ~ %s\n", o.Object) // not YAML: the file diff says
		}
		return len(o.Bookkeeping), len(o.Bookkeeping) == 0
	}
	fmt.Fprintf(out, "    ~ %s\n", o.Object)
	for _, f := range fields {
		fmt.Fprintf(out, "        %s: %s → %s\n", f.Field, orNone(f.Old), orNone(f.New))
	}
	if showBookkeeping {
		return 0, true
	}
	return len(o.Bookkeeping), true
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// errorText is err's message, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
