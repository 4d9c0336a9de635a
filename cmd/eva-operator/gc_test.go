package main

import (
	"runtime/debug"
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
