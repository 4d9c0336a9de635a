package e2e

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The suite's run report: how long each scenario ran once it had its turn, and why each
// failed one failed, written after every test has ended. A failed wait's message comes
// before pages of component logs (its own, then the operator's, dumped by cleanups), and
// a CI log shows only its tail; the report repeats the reason where it is read.
var report struct {
	sync.Mutex
	ran    []scenarioTime
	failed []string
}

type scenarioTime struct {
	name   string
	start  time.Time
	took   time.Duration
	failed bool
}

// parallel marks the test parallel, as t.Parallel does, waits for its turn (the
// scenarios scheduler: at most -parallel at once, the longest first), and times it from
// when it runs (not from when it was queued behind the others) to its last cleanup, after
// which the turn passes on.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	done := scenarios.Wait(t.Name())
	timed(t, done)
}

// parallelGroup is parallel for a test whose parallel subtests each call parallel: it
// takes no turn of its own (it would hold one while its subtests wait for theirs), and
// its time includes their waits for a turn.
func parallelGroup(t *testing.T) {
	t.Helper()
	t.Parallel()
	timed(t, func() {})
}

// timed records the test's time in the run report once its last cleanup has run, then
// calls done.
func timed(t *testing.T, done func()) {
	start := time.Now()
	t.Cleanup(func() {
		defer done()
		report.Lock()
		defer report.Unlock()
		report.ran = append(report.ran, scenarioTime{name: t.Name(), start: start, took: time.Since(start), failed: t.Failed()})
	})
}

// fatalf records why the test failed (the first line of the message, at most 2,000
// characters) for the run report, and fails it with the whole message.
func fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	first, _, _ := strings.Cut(msg, "\n")
	if len(first) > 2000 {
		first = strings.ToValidUTF8(first[:2000], "") + "…"
	}
	report.Lock()
	report.failed = append(report.failed, t.Name()+": "+first)
	report.Unlock()
	t.Fatal(msg)
}

// writeReport writes the run report: scenarios slowest first, then the recorded failures.
func writeReport(w io.Writer) {
	report.Lock()
	defer report.Unlock()
	if len(report.ran) == 0 {
		return
	}
	ran := slices.Clone(report.ran)
	slices.SortFunc(ran, func(a, b scenarioTime) int { return cmp.Compare(b.took, a.took) })
	first := slices.MinFunc(ran, func(a, b scenarioTime) int { return a.start.Compare(b.start) }).start
	fmt.Fprintln(w, "e2e scenarios, slowest first (from when each ran, not when it was queued; started: after the first):")
	for _, s := range ran {
		verdict := "ok"
		if s.failed {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "  %-4s %7s  started %7s  %s\n", verdict, s.took.Round(time.Second), s.start.Sub(first).Round(time.Second), s.name)
	}
	for _, f := range report.failed {
		fmt.Fprintln(w, "e2e failure:", f)
	}
}

// within caps a wait at the test binary's own deadline (-timeout), less a minute for the
// cleanups and the run report: a wait that outlasts it ends the run in a panic and
// goroutine dumps instead of the wait's own failure.
func within(t *testing.T, timeout time.Duration) time.Duration {
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - time.Minute; left < timeout {
			return max(left, time.Second)
		}
	}
	return timeout
}
