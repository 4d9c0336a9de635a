package status

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxProblemsMessage bounds the message that lists an invalid spec's problems: far below
// the CRD's 32 KiB limit on a condition message, so the status that reports the problems
// is always written (a tenant whose status cannot be written reads as Current to kstatus),
// and short enough to read in kubectl describe.
const MaxProblemsMessage = 4096

// ProblemsMessage joins problems with "; " into at most MaxProblemsMessage bytes. What
// does not fit is counted, never cut silently: "…; and 412 more problems". A single
// problem longer than the bound is shortened at a character boundary.
func ProblemsMessage(problems []string) string {
	if whole := strings.Join(problems, "; "); len(whole) <= MaxProblemsMessage {
		return whole
	}
	// Room for the longest count there can be, so the count always fits.
	budget := MaxProblemsMessage - len(fmt.Sprintf("; and %d more problems", len(problems)))
	var b strings.Builder
	listed := 0
	for _, p := range problems {
		sep := ""
		if listed > 0 {
			sep = "; "
		}
		if b.Len()+len(sep)+len(p) > budget {
			break
		}
		b.WriteString(sep + p)
		listed++
	}
	if listed == 0 {
		b.WriteString(cutRunes(problems[0], budget-len("…")) + "…")
		listed = 1
	}
	if rest := len(problems) - listed; rest > 0 {
		fmt.Fprintf(&b, "; and %d more problems", rest)
	}
	return b.String()
}

// cutRunes returns the longest prefix of s of at most n bytes that ends at a character
// boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
