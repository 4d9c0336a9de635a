package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aidonow/eva/internal/docsection"
)

// The CLI reference in docs/cli.md sits between these markers.
const (
	cliRefStart = "<!-- evactl-reference: generated from evactl's commands; EVA_UPDATE_DOCS=1 go test ./internal/cli -run TestDocsDescribeEveryCommand rewrites it -->"
	cliRefEnd   = "<!-- end evactl-reference -->"
)

// cliReference is a section per command of the tree, with every flag it takes.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		if c != root {
			fmt.Fprintf(&b, "\n### %s\n\n`%s`: %s\n", c.CommandPath(), c.UseLine(), c.Short)
			var rows []string
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if f.Hidden {
					return
				}
				name := "`--" + f.Name + "`"
				if f.Shorthand != "" {
					name = "`-" + f.Shorthand + "`, " + name
				}
				def := f.DefValue
				if def == "" || def == "[]" {
					def = " "
				} else {
					def = "`" + def + "`"
				}
				rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, strings.ReplaceAll(f.Usage, "|", `\|`)))
			})
			if len(rows) > 0 {
				b.WriteString("\n| flag | default | meaning |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n")
			}
		}
		subs := c.Commands()
		slices.SortFunc(subs, func(a, b *cobra.Command) int { return strings.Compare(a.Name(), b.Name()) })
		for _, s := range subs {
			walk(s)
		}
	}
	walk(root)
	return b.String()
}

// TestDocsDescribeEveryCommand keeps docs/cli.md's reference equal to the command tree:
// a command or flag added, renamed or re-described without the docs fails here.
func TestDocsDescribeEveryCommand(t *testing.T) {
	want := cliReference(NewRootCommand()) + "\n"
	if err := docsection.Keep("../../docs/cli.md", cliRefStart, cliRefEnd, want, "go test ./internal/cli -run TestDocsDescribeEveryCommand"); err != nil {
		t.Error(err)
	}
}
