package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The README's table of the operator's flags sits between these markers.
const (
	tableStart = "<!-- operator-flags: generated from eva-operator's flags; EVA_UPDATE_README=1 go test ./cmd/eva-operator rewrites it -->"
	tableEnd   = "<!-- /operator-flags -->"
)

// flagTable is the README table of every flag `eva-operator --help` prints.
func flagTable() string {
	fs := flag.NewFlagSet("eva-operator", flag.ContinueOnError)
	bindFlags(fs, &config{})
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

// TestReadmeListsEveryFlag keeps the README's flag table equal to the flags the binary
// defines: a flag added, renamed or re-described without the README fails here.
func TestReadmeListsEveryFlag(t *testing.T) {
	const readme = "../../README.md"
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start, end := strings.Index(text, tableStart), strings.Index(text, tableEnd)
	if start < 0 || end < start {
		t.Fatalf("README.md has no operator flag table between %q and %q", tableStart, tableEnd)
	}
	want := "\n" + flagTable()
	got := text[start+len(tableStart) : end]
	if got == want {
		return
	}
	if os.Getenv("EVA_UPDATE_README") == "1" {
		if err := os.WriteFile(readme, []byte(text[:start+len(tableStart)]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's operator flag table differs from the flags; run EVA_UPDATE_README=1 go test ./cmd/eva-operator. Want:\n%s", want)
}
