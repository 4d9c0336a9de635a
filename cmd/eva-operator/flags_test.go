package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/docsection"
)

// docs/operator.md's table of the operator's flags sits between these markers.
const (
	tableStart = "<!-- operator-flags: generated from eva-operator's flags; EVA_UPDATE_DOCS=1 go test ./cmd/eva-operator rewrites it -->"
	tableEnd   = "<!-- /operator-flags -->"
)

// operatorFlags is every flag `eva-operator --help` prints: the operator's own and those
// its libraries define on the command line when their packages load (controller-runtime's
// --kubeconfig), the test binary's own (-test.*) left out.
func operatorFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("eva-operator", flag.ContinueOnError)
	bindFlags(fs, &config{})
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") && fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	return fs
}

// flagTable is docs/operator.md's table of every flag `eva-operator --help` prints.
func flagTable() string {
	fs := operatorFlags()
	var b strings.Builder
	b.WriteString("| Flag | Default | What it does |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def != "" {
			def = "`" + def + "`"
		}
		usage := strings.ReplaceAll(strings.ReplaceAll(f.Usage, "|", `\|`), "\n", " ")
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, usage)
	})
	return b.String()
}

// TestDocsListEveryFlag keeps docs/operator.md's flag table equal to the flags the binary
// defines: a flag added, renamed or re-described without the docs fails here.
func TestDocsListEveryFlag(t *testing.T) {
	if err := docsection.Keep("../../docs/operator.md", tableStart, tableEnd, "\n"+flagTable(), "go test ./cmd/eva-operator"); err != nil {
		t.Error(err)
	}
}

// notChartValues are the flags the operator's Helm chart sets no value for, and why.
var notChartValues = map[string]string{
	"version":    "prints the version and exits",
	"kubeconfig": "the pod uses its service account (in-cluster configuration)",
	"overlays":   "the chart mounts its environment and passes --environment-dir",
}

// TestChartHasAValueForEveryFlag: every flag of the operator can be set through the
// chart's values (its Deployment template passes it), except those listed with a reason.
func TestChartHasAValueForEveryFlag(t *testing.T) {
	data, err := os.ReadFile("../../deploy/charts/eva-operator/templates/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(data), "\n") {
		if arg, ok := strings.CutPrefix(strings.TrimSpace(line), "- --"); ok {
			name, _, _ := strings.Cut(arg, "=")
			args = append(args, name)
		}
	}
	operatorFlags().VisitAll(func(f *flag.Flag) {
		_, excepted := notChartValues[f.Name]
		switch passed := slices.Contains(args, f.Name); {
		case !passed && !excepted:
			t.Errorf("--%s: the chart's Deployment does not pass it, so no value sets it", f.Name)
		case passed && excepted:
			t.Errorf("--%s is listed as not a chart value (%s), but the chart passes it", f.Name, notChartValues[f.Name])
		}
	})
}
