package e2e

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/aidonow/eva/internal/testenv"
)

// longestFirst names the scenarios that take longest, longest first (from the run
// report: 3 to 6.5 minutes each in a full run, against 1 to 2.5 for most others). They
// start before every other scenario: declared in later files, they used to start last,
// and one of them alone ran the suite's last minutes. A name missing here, or one that
// no longer exists, changes only the order.
var longestFirst = []string{
	"TestRolloutPullRequestPathOnRealFlux",
	"TestRolloutByWaveOnRealFlux",
	"TestFailedReleaseFailsTenantAndRecovers",
	"TestArgoCDOperatorGitOpsMode",
	// Next, so that Argo CD (started for both) stops early (startArgoCD).
	"TestArgoCDDeliversTenantsPublishedByEvactl",
	"TestGitOpsFleetWithStuckRelease",
	"TestMissingChartVersionFailsTenant",
	"TestMissingValuesSecretFailsTenant",
	// Five rounds of 1 to 3 minutes each: asked for last (their test must run first).
	"TestOperatorSurvivesSIGKILL/",
}

// scenarios runs the suite's scenarios at most -parallel at a time, longest first.
var scenarios *testenv.Scheduler

// takeOverParallel makes the scenarios scheduler, not Go, limit how many scenarios run
// at once: it keeps the -parallel the suite was run with as the scheduler's limit, and
// raises Go's own to let every parallel test through to the scheduler. Call it before
// m.Run.
func takeOverParallel() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return fmt.Errorf("no -test.parallel flag")
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil || n < 1 {
		return fmt.Errorf("-test.parallel=%s: not a positive number", f.Value)
	}
	scenarios = testenv.NewScheduler(n, longestFirst, time.Second)
	return flag.Set("test.parallel", "1000")
}
