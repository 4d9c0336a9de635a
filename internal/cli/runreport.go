package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
)

// runReport is what one render or publish did. With -o json or yaml it is printed on
// standard output, for a program to read; the text summary on standard error is made
// from it.
type runReport struct {
	Environment string `json:"environment"`
	// Tenants counts the fleet's tenants; Rendered, those this run rendered (a render
	// into a repository it rendered before renders only the tenants whose inputs
	// changed).
	Tenants  int   `json:"tenants"`
	Rendered int   `json:"rendered"`
	Objects  int   `json:"objects"`
	Bytes    int64 `json:"bytes"`
	// Seconds is how long the run took.
	Seconds float64 `json:"seconds"`
	// Verified is the check of the releases against their charts (none with
	// --verify-charts=false).
	Verified *chartVerification `json:"verified,omitempty"`
	// Tree is what became of the tree; Cells, of each cell's tree, in an environment
	// with cells.
	Tree  *treeOutcome  `json:"tree,omitempty"`
	Cells []cellOutcome `json:"cells,omitempty"`

	took time.Duration
}

// chartVerification counts the releases rendered through their charts.
type chartVerification struct {
	Releases int `json:"releases"`
	Renders  int `json:"renders"` // distinct chart renders: equal releases render once
}

// treeOutcome is what a render or a publish did to one tree.
type treeOutcome struct {
	// Revision is the commit (or the OCI artifact's digest) the destination now holds;
	// "" for a plain folder (render --git=false).
	Revision string `json:"revision,omitempty"`
	// Updated: something new was committed, pushed or written.
	Updated bool `json:"updated"`
	// Added, Changed and Removed are the tenants (capsule codes) whose folders the run
	// added, changed and removed (unknown, and left out, for a plain folder).
	Added   []string `json:"added,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Tenants counts the tenants written into a plain folder.
	Tenants int `json:"tenants,omitempty"`
}

// cellOutcome is one cell's treeOutcome.
type cellOutcome struct {
	Cell string `json:"cell"`
	treeOutcome
}

// report starts the run's report from the render's statistics.
func (j *job) report(stats render.TreeStats, start time.Time) *runReport {
	r := &runReport{Environment: j.r.Env.Name, Tenants: len(j.tenants), Rendered: stats.Tenants,
		Objects: stats.Objects, Bytes: stats.Bytes}
	r.timed(start)
	if j.checker != nil {
		r.Verified = &chartVerification{Releases: j.checker.Checks, Renders: j.checker.Renders}
	}
	return r
}

// timed records the run's time so far: a run that writes after rendering reports again.
func (r *runReport) timed(start time.Time) {
	r.took = time.Since(start)
	r.Seconds = r.took.Seconds()
}

// summary is the report's first clause in text: what was rendered, how fast.
func (r *runReport) summary() string {
	s := fmt.Sprintf("rendered %d tenants, %d objects, %s in %s", r.Rendered, r.Objects,
		humanBytes(r.Bytes), r.took.Round(time.Millisecond))
	if r.Verified != nil {
		s += fmt.Sprintf("; %d releases verified against their charts (%d distinct renders)", r.Verified.Releases, r.Verified.Renders)
	}
	return s
}

// outcomeOf is what a publish.Result says of a tree.
func outcomeOf(res *publish.Result) *treeOutcome {
	o := &treeOutcome{Revision: res.Revision, Updated: res.Committed}
	if res.Committed && res.Plan != nil {
		o.Added, o.Changed, o.Removed = codesOf(res.Plan.Added), codesOf(res.Plan.Changed), codesOf(res.Plan.Removed)
	}
	return o
}

// counts is "N added, N changed, N removed".
func (o *treeOutcome) counts() string {
	return fmt.Sprintf("%d added, %d changed, %d removed", len(o.Added), len(o.Changed), len(o.Removed))
}

// publishSummary says what a publish did to its destination.
func (o *treeOutcome) publishSummary() string {
	if o.Updated {
		return fmt.Sprintf("published %s (%s)", o.Revision, o.counts())
	}
	return fmt.Sprintf("nothing changed, %s is current", o.Revision)
}

// codesOf turns tenant folders into capsule codes.
func codesOf(dirs []string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = strings.ToUpper(d)
	}
	return out
}

// finish prints the report: text on standard error (unless quiet), or json or yaml on
// standard output.
func (r *runReport) finish(cmd *cobra.Command, output string, quiet bool, text string) error {
	if output == "text" {
		if !quiet {
			fmt.Fprintln(cmd.ErrOrStderr(), text)
		}
		return nil
	}
	return writeStructured(cmd.OutOrStdout(), output, r)
}

// outputFlagUsage is the help of render's and publish's -o.
const outputFlagUsage = "output format: text (a summary on standard error) or json or yaml (the run's report on standard output: tenants rendered, revision, tenants added, changed and removed, per cell)"
