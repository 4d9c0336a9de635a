// Command perfpage writes docs/performance.md, the one page that holds Eva's benchmark
// figures, from the output of `go test -bench` (what `make bench` runs): for each
// benchmark, what it measures (its doc comment) and, for each metric, the median, the
// lowest and the highest of the runs (-count). Figures live there, generated, and
// nowhere else: not in the README, not in commit messages.
//
//	go run ./hack/perfpage -out docs/performance.md out/bench.txt
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "docs/performance.md", "the page to write")
	note := flag.String("note", "", "a sentence on how the figures were measured, printed under the header (a busy machine, a subset)")
	keep := flag.String("keep", "", "a page this command wrote: the sections of the benchmarks not in the input are kept, and its note unless -note is set")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: perfpage [-out FILE] BENCH-OUTPUT...")
		os.Exit(2)
	}
	if err := run(*out, *note, *keep, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "perfpage:", err)
		os.Exit(1)
	}
}

func run(out, note, keep string, inputs []string) error {
	var runs []Run
	var machine Machine
	for _, name := range inputs {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rs, m, err := Parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, rs...)
		machine = machine.merge(m)
	}
	if len(runs) == 0 {
		return errors.New("no benchmark results in the input")
	}
	page := Page{Machine: machine, Benchmarks: Summarise(runs), Generated: time.Now().UTC(), Commit: commit(), Note: note}
	if keep != "" {
		old, err := os.ReadFile(keep)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		keptNote, kept := ParsePage(string(old))
		page.Kept = kept
		if page.Note == "" {
			page.Note = keptNote
		}
	}
	page.Docs = docComments(page.Benchmarks)
	return os.WriteFile(out, []byte(page.Markdown()), 0o644)
}

// Machine is what the benchmark output says of where it ran.
type Machine struct {
	GOOS, GOARCH, CPU string
}

func (m Machine) merge(o Machine) Machine {
	if m.GOOS == "" {
		m.GOOS = o.GOOS
	}
	if m.GOARCH == "" {
		m.GOARCH = o.GOARCH
	}
	if m.CPU == "" {
		m.CPU = o.CPU
	}
	return m
}

// Run is one result line of one benchmark: its package, name (without the -N suffix of
// GOMAXPROCS), GOMAXPROCS and metrics by unit.
type Run struct {
	Package, Name string
	Procs         int
	Metrics       map[string]float64
	Order         []string // the units in the order the line gave them
}

// Parse reads `go test -bench` output: the goos, goarch, cpu and pkg headers, and each
// result line. Anything else (test logs, PASS, ok lines) is skipped.
func Parse(r io.Reader) ([]Run, Machine, error) {
	var runs []Run
	var m Machine
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch key, value, _ := strings.Cut(line, ": "); key {
		case "goos":
			m.GOOS = value
			continue
		case "goarch":
			m.GOARCH = value
			continue
		case "cpu":
			m.CPU = strings.TrimSpace(value)
			continue
		case "pkg":
			pkg = value
			continue
		}
		if run, ok := parseResult(line); ok {
			run.Package = pkg
			runs = append(runs, run)
		}
	}
	return runs, m, sc.Err()
}

// parseResult reads "BenchmarkX/sub-2  1  123 ns/op  4.5 s/fleet ...".
func parseResult(line string) (Run, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") || len(fields)%2 != 0 {
		return Run{}, false
	}
	run := Run{Name: fields[0], Procs: 1, Metrics: map[string]float64{}}
	if i := strings.LastIndexByte(run.Name, '-'); i > 0 {
		var procs int
		if _, err := fmt.Sscanf(run.Name[i+1:], "%d", &procs); err == nil {
			run.Name, run.Procs = run.Name[:i], procs
		}
	}
	var iterations int
	if _, err := fmt.Sscanf(fields[1], "%d", &iterations); err != nil {
		return Run{}, false
	}
	for i := 2; i+1 < len(fields); i += 2 {
		var v float64
		if _, err := fmt.Sscanf(fields[i], "%g", &v); err != nil {
			return Run{}, false
		}
		unit := fields[i+1]
		if _, seen := run.Metrics[unit]; !seen {
			run.Order = append(run.Order, unit)
		}
		run.Metrics[unit] = v
	}
	return run, true
}

// commit is the checked-out commit, with "+changes" when the tree differs from it.
func commit() string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(head))
	if err := exec.Command("git", "diff", "--quiet", "HEAD", "--", ".", ":!docs/performance.md").Run(); err != nil {
		c += "+changes"
	}
	return c
}
