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
