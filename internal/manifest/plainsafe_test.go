package manifest

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// plainSafeByRule is plainSafe as first written, character by character: the oracle the
// table-driven plainSafe is held to.
func plainSafeByRule(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	c := s[0]
	if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '/' && c != '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == '/' || c == '_' || c == '-' || c == '=' || c == '@' || c == '+':
		case c == ':' && i < len(s)-1:
		default:
			return false
		}
	}
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL":
		return false
	}
	return true
}

// TestPlainSafeFollowsItsRule compares plainSafe with the rule on every string of up to
// three bytes (all 256 byte values first, then a set of telling ones), on every YAML 1.1
// keyword and its neighbours, and on random strings.
func TestPlainSafeFollowsItsRule(t *testing.T) {
	check := func(s string) {
		if got, want := plainSafe(s), plainSafeByRule(s); got != want {
			t.Fatalf("plainSafe(%q) = %t, the rule says %t", s, got, want)
		}
	}
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	telling := []byte("aZ09/_.-=@+: #\"'\t\n\x7f\x80\xc3\xa9\xff{}[],&*!|>%`?~")
	for _, a := range telling {
		for _, b := range telling {
			for _, c := range telling {
				check(string([]byte{a, b, c}))
			}
		}
	}
	for _, w := range []string{"y", "yes", "Yes", "YES", "no", "true", "TRUE", "false", "on", "On", "off", "OFF", "null", "Null",
		"yess", "nul", "trues", "falsey", "offf", "nulls", "NULLs", "eva-tenant-aaaaaa", "a:b", "a:", "http://x", "café"} {
		check(w)
	}
	rng := rand.New(rand.NewPCG(16, 3))
	for range 100000 {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = telling[rng.IntN(len(telling))]
		}
		check(string(b))
	}
}
