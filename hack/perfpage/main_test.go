package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/aidonow/eva/internal/cli
cpu: Some CPU   
BenchmarkRenderCLI/dev-2   	1	5227142796 ns/op	5.227 s/fleet	1234 B/op
some log line
BenchmarkRenderCLI/dev-2   	1	3843122412 ns/op	3.843 s/fleet	1234 B/op
BenchmarkRenderCLI/dev-2   	1	4442551163 ns/op	4.442 s/fleet	1236 B/op
BenchmarkRenderCLI/prod-2  	1	4026407049 ns/op	4.026 s/fleet
PASS
ok  	github.com/aidonow/eva/internal/cli	200.1s
`

// TestSummariseTakesMediansPerBenchmark: three runs of one benchmark give their median
// and range per metric, in the order the result lines gave the units; log lines and the
// package's result line are not runs.
func TestSummariseTakesMediansPerBenchmark(t *testing.T) {
	runs, m, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if m.CPU != "Some CPU" || m.GOOS != "linux" || len(runs) != 4 {
		t.Fatalf("machine %+v, %d runs", m, len(runs))
	}
	bs := Summarise(runs)
	if len(bs) != 2 || bs[0].Name != "BenchmarkRenderCLI/dev" || bs[0].Runs != 3 || bs[0].Procs != 2 {
		t.Fatalf("benchmarks %+v", bs)
	}
	fleet := bs[0].Metrics[1]
	if fleet.Unit != "s/fleet" || fleet.Median != 4.442 || fleet.Min != 3.843 || fleet.Max != 5.227 {
		t.Errorf("s/fleet %+v", fleet)
	}
	page := Page{Machine: m, Benchmarks: bs}.Markdown()
	for _, want := range []string{"## BenchmarkRenderCLI (internal/cli)", "**dev**, 3 run(s)", "| s/fleet | 4.442 | 3.843 | 5.227 |", "| B/op | 1234 | 1234 | 1236 |"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

// TestMeasuringSomeKeepsTheOthers: a page written again from the output of one
// benchmark keeps the other benchmarks' sections as they were, in their place, and the
// note; the one measured replaces its own. Seen failing before -keep: the page held
// BenchmarkRenderCLI alone.
func TestMeasuringSomeKeepsTheOthers(t *testing.T) {
	old := "# Performance\n\nGenerated before.\n\n**Carried over from an earlier day.**\n\n" +
		"## BenchmarkOperatorFleet (internal/controller)\n\nMeasured 2026-11-28.\n\n| ns/op | 1 | 1 | 1 |\n\n" +
		"## BenchmarkRenderCLI (internal/cli)\n\n**dev**, 1 run(s):\n\n| s/fleet | 9 | 9 | 9 |\n\n" +
		"## BenchmarkOperatorProcess (internal/controller)\n\n| ns/op | 2 | 2 | 2 |\n"
	note, kept := ParsePage(old)
	if note != "Carried over from an earlier day." || len(kept) != 3 || kept[1].Name != "BenchmarkRenderCLI" {
		t.Fatalf("parsed note %q, sections %+v", note, kept)
	}
	runs, m, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	page := Page{Machine: m, Benchmarks: Summarise(runs), Kept: kept, Note: note, Commit: "abc"}.Markdown()
	fleet := strings.Index(page, "## BenchmarkOperatorFleet (internal/controller)\n\nMeasured 2026-11-28.\n\n| ns/op | 1 | 1 | 1 |\n")
	render := strings.Index(page, "## BenchmarkRenderCLI (internal/cli)\n\nMeasured 0001-01-01 at commit `abc`.")
	process := strings.Index(page, "## BenchmarkOperatorProcess (internal/controller)\n\n| ns/op | 2 | 2 | 2 |\n")
	if fleet < 0 || render < fleet || process < render {
		t.Errorf("sections kept in place and BenchmarkRenderCLI measured again (at %d, %d, %d):\n%s", fleet, render, process, page)
	}
	if strings.Contains(page, "| s/fleet | 9 |") || !strings.Contains(page, "| s/fleet | 4.442 |") {
		t.Errorf("the old figures of BenchmarkRenderCLI are on the page:\n%s", page)
	}
	if !strings.Contains(page, "**Carried over from an earlier day.**") || strings.Count(page, "\n## ") != 3 {
		t.Errorf("note or sections lost:\n%s", page)
	}
	again, _ := ParsePage(page)
	if again != note {
		t.Errorf("note read back %q", again)
	}
}
