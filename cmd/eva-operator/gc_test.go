package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestGCPercentDefaultsUnlessGOGCIsSet: without GOGC the operator runs at
// defaultGCPercent; with GOGC set it leaves the target as Go set it from the variable.
func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	setGCPercent(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, defaultGCPercent)
	}
	setGCPercent(func(key string) string {
		if key == "GOGC" {
			return "200"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: GC percent changed to %d", got)
	}
}

// TestMemoryLimitFollowsTheContainers: the soft limit is softLimitShare of the
// container's limit, in bytes (as the chart's resourceFieldRef gives it) or as a
// quantity; GOMEMLIMIT, when set, wins; a value that is no memory size is an error that
// names the variable, and sets nothing.
func TestMemoryLimitFollowsTheContainers(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for value, want := range map[string]int64{"629145600": 534773760, "600Mi": 534773760, "1Gi": 912680550} {
		debug.SetMemoryLimit(before)
		got, err := setMemoryLimit(env(map[string]string{containerMemoryLimit: value}))
		if err != nil || got != want || debug.SetMemoryLimit(-1) != want {
			t.Errorf("%s=%s: limit %d (%v), want %d", containerMemoryLimit, value, got, err, want)
		}
	}
	debug.SetMemoryLimit(before)
	if got, err := setMemoryLimit(env(map[string]string{containerMemoryLimit: "600Mi", "GOMEMLIMIT": "1GiB"})); got != 0 || err != nil || debug.SetMemoryLimit(-1) != before {
		t.Errorf("with GOMEMLIMIT set: limit %d (%v), want none set", got, err)
	}
	for _, bad := range []string{"lots", "-1", "0"} {
		_, err := setMemoryLimit(env(map[string]string{containerMemoryLimit: bad}))
		if err == nil || !strings.Contains(err.Error(), containerMemoryLimit) || debug.SetMemoryLimit(-1) != before {
			t.Errorf("%s=%s: error %v, limit changed: want an error naming the variable, nothing set", containerMemoryLimit, bad, err)
		}
	}
}
