package e2e

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

// releaseRun is one release of crm to every tenant of a throughput run, through their
// three waves (maxUpdate 100% each, no bake) with a short readyTimeout: what queueing
// at the helm-controllers does to it without a cap, and with the environment's
// helmReleasesPerMinute.
type releaseRun struct {
	shards, tenants int
	readyTimeout    string
	// perMinute is the environment's helmReleasesPerMinute; zero: no cap.
	perMinute float64
	// outcome is the rollout's phase when it first settled (Complete or Halted), took
	// the time until then, and timedOut the tenants its halt named.
	outcome  evav1.RolloutPhase
	took     time.Duration
	timedOut int
	// capped: the rollout's message said admissions were capped at some point.
	capped bool
}

// releaseSettings reads EVA_THROUGHPUT_READY_TIMEOUT and EVA_THROUGHPUT_CAP; ok is
// false when the capped-release measurement is not asked for.
func releaseSettings(t *testing.T) (readyTimeout string, perMinute float64, ok bool) {
	t.Helper()
	capSetting := os.Getenv("EVA_THROUGHPUT_CAP")
	if capSetting == "" {
		return "", 0, false
	}
	perMinute, err := strconv.ParseFloat(capSetting, 64)
	if err != nil || perMinute <= 0 {
		t.Fatalf("EVA_THROUGHPUT_CAP=%q: want releases a minute per helm-controller, above 0", capSetting)
	}
	readyTimeout = cmp.Or(os.Getenv("EVA_THROUGHPUT_READY_TIMEOUT"), "1m")
	if _, err := time.ParseDuration(readyTimeout); err != nil {
		t.Fatalf("EVA_THROUGHPUT_READY_TIMEOUT=%q: %v", readyTimeout, err)
	}
	return readyTimeout, perMinute, true
}

// measureReleases releases crm to every tenant twice, through the three waves, with
// readyTimeout: first with the operator as it runs (no cap), then with an operator
// whose environment caps admissions at perMinute per helm-controller. The first goes
// back to crm 1.4.0, the second to 1.5.0 again, so each changes every tenant's release.
func measureReleases(t *testing.T, ns string, op **testenv.Process, settings map[string]any,
	shards, tenants int, readyTimeout string, perMinute float64) []releaseRun {
	t.Helper()
	uncapped := releaseRun{shards: shards, tenants: tenants, readyTimeout: readyTimeout}
	uncapped.release(t, ns, "queued", crmBase)
	waitRollout(t, ns, "queued", 30*time.Minute, evav1.RolloutComplete) // a halt goes on once all are Ready

	(*op).Kill()
	capped := withSetting(settings, "helmReleasesPerMinute", perMinute)
	*op = startOperator(t, ns, "--overlays="+environment(t, capped))
	withCap := releaseRun{shards: shards, tenants: tenants, readyTimeout: readyTimeout, perMinute: perMinute}
	withCap.release(t, ns, "capped", crmFixed)
	waitRollout(t, ns, "capped", 30*time.Minute, evav1.RolloutComplete)
	return []releaseRun{uncapped, withCap}
}

// withSetting is settings with key set to value.
func withSetting(settings map[string]any, key string, value any) map[string]any {
	out := maps.Clone(settings)
	out[key] = value
	return out
}

// release creates the rollout and waits until it first settles, Complete or Halted.
func (r *releaseRun) release(t *testing.T, ns, name, version string) {
	t.Helper()
	start := time.Now()
	createRollout(t, ns, name, version, r.readyTimeout, map[string]any{"wave": int64(1), "maxUpdate": "100%"},
		map[string]any{"wave": int64(2), "maxUpdate": "100%"}, map[string]any{"wave": int64(3), "maxUpdate": "100%"})
	messages := watchRolloutMessages(t, ns, name)
	poll(t, "rollout "+name+" settled", 30*time.Minute, func() error {
		st := rolloutStatus(t, ns, name)
		switch st.Phase {
		case evav1.RolloutComplete, evav1.RolloutHalted:
			r.outcome, r.took = st.Phase, time.Since(start)
			r.timedOut = strings.Count(st.Message, "not Ready on the release")
			return nil
		}
		return fmt.Errorf("%s: %s", st.Phase, st.Message)
	})
	r.capped = slices.ContainsFunc(messages(), func(m string) bool { return strings.Contains(m, "admissions capped") })
	t.Logf("release %s (%d tenants, %d shard(s), readyTimeout %s, cap %g a minute): %s after %s; %d named as timed out; capped: %v",
		name, r.tenants, r.shards, r.readyTimeout, r.perMinute, r.outcome, r.took.Round(time.Second), r.timedOut, r.capped)
}

// releaseTable renders the releases as the Markdown table docs/rollouts.md quotes.
func releaseTable(runs []releaseRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| Flux shards | tenants | readyTimeout | helmReleasesPerMinute | first settled | after | tenants timed out | admissions capped |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		perMinute := "none"
		if r.perMinute > 0 {
			perMinute = strconv.FormatFloat(r.perMinute, 'g', -1, 64)
		}
		timedOut := strconv.Itoa(r.timedOut)
		if r.outcome == evav1.RolloutHalted {
			timedOut = "at least " + timedOut
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s | %v |\n", r.shards, r.tenants, r.readyTimeout, perMinute,
			r.outcome, r.took.Round(time.Second), timedOut, r.capped)
	}
	return b.String()
}
