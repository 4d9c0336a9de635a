package status

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestProblemsMessageIsBounded: thousands of problems (issue 37 built a 600 KB message
// from an invalid spec, above the CRD's limit, so the status was never written) give a
// message within the bound that says how many were left out.
func TestProblemsMessageIsBounded(t *testing.T) {
	many := make([]string, 5000)
	for i := range many {
		many[i] = "spec.helmValues[crm].key" + strings.Repeat("x", i%50) + ": Forbidden: looks like a secret"
	}
	cases := map[string]struct {
		problems []string
		want     string // a part of the message
		whole    bool   // every problem is in it
	}{
		"few":             {[]string{"a: bad", "b: worse"}, "a: bad; b: worse", true},
		"thousands":       {many, "more problems", false},
		"one huge":        {[]string{strings.Repeat("é", 10000)}, "é…", false},
		"one huge, more":  {[]string{strings.Repeat("y", 10000), "z: bad"}, "…; and 1 more problems", false},
		"none":            {nil, "", true},
		"exactly the cap": {[]string{strings.Repeat("w", MaxProblemsMessage)}, "", true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := ProblemsMessage(c.problems)
			if len(got) > MaxProblemsMessage {
				t.Errorf("%d bytes, want at most %d", len(got), MaxProblemsMessage)
			}
			if !utf8.ValidString(got) {
				t.Error("cut inside a character")
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("got %q…, want it to hold %q", got[:min(len(got), 80)], c.want)
			}
			if c.whole && got != strings.Join(c.problems, "; ") {
				t.Errorf("problems left out of %q", got)
			}
		})
	}
	// The count is right: the listed problems plus the count make the whole.
	got := ProblemsMessage(many)
	listed := strings.Count(got, "; ") // separators between listed problems, and one before the count
	var more int
	if _, err := fmtSscanf(got[strings.LastIndex(got, "; and ")+2:], &more); err != nil {
		t.Fatal(err)
	}
	if listed+more != len(many) {
		t.Errorf("%d listed + %d counted, want %d", listed, more, len(many))
	}
}

func fmtSscanf(s string, n *int) (int, error) { return fmt.Sscanf(s, "and %d more problems", n) }
