// Package safetext makes untrusted text safe to echo in messages: every value a tenant
// file (or a published tree) holds may be printed to a terminal, a CI log or a GitHub
// Actions annotation, where a newline starts a new workflow command, an ANSI escape
// repaints the screen and a 200 KB scalar buries the report. Text goes through Escape
// (one line, printable) and values through Value (also shortened).
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxValue is how many characters of a value a message shows.
const MaxValue = 64

// MaxMessage bounds a whole message (a field path, a problem text).
const MaxMessage = 1024

// Escape returns s on one line with every non-printable character written as a Go
// escape: newlines and carriage returns as \n and \r, other control characters
// (ANSI ESC included) as \xNN, invisible and bidirectional-override characters as
// \uNNNN, invalid UTF-8 bytes as \xNN. Printable text, backslashes included, is kept
// as it is, so Escape is idempotent and messages stay readable.
func Escape(s string) string {
	if isClean(s) {
		return s
	}
	var b strings.Builder
	appendEscaped(&b, s, -1)
	return b.String()
}

// Limit escapes s and shortens it to at most max characters of escaped text, saying
// how long the original was: "aaaa… (200000 bytes)".
func Limit(s string, max int) string {
	var b strings.Builder
	if appendEscaped(&b, s, max) {
		return b.String()
	}
	return fmt.Sprintf("%s… (%d bytes)", b.String(), len(s))
}

// Value quotes a value for a message: escaped, shortened to MaxValue characters, in
// double quotes: "hunter2", "aaaa"… (200000 bytes).
func Value(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	whole := appendEscaped(&b, s, MaxValue)
	b.WriteByte('"')
	if !whole {
		fmt.Fprintf(&b, "… (%d bytes)", len(s))
	}
	return b.String()
}

// isClean reports whether s holds only printable characters.
func isClean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return cleanUnicode(s[i:])
		}
	}
	return true
}

func cleanUnicode(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if !printable(r) {
			return false
		}
	}
	return true
}

// printable keeps what unicode.IsPrint keeps (letters, marks, numbers, punctuation,
// symbols and the ASCII space), which excludes control, format (bidi overrides,
// zero-width characters), private-use and unassigned characters and other spaces.
func printable(r rune) bool { return unicode.IsPrint(r) }

// appendEscaped writes the escaped form of s to b, stopping before the escaped text
// would pass max characters (max < 0: no limit). It reports whether all of s fit.
func appendEscaped(b *strings.Builder, s string, max int) bool {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case printable(r):
			piece = s[i : i+size]
		case r == '\n':
			piece = `\n`
		case r == '\r':
			piece = `\r`
		case r == '\t':
			piece = `\t`
		case r < 0x80:
			piece = fmt.Sprintf(`\x%02x`, r)
		default:
			piece = strings.Trim(strconv.QuoteRuneToASCII(r), "'")
		}
		width := utf8.RuneCountInString(piece)
		if max >= 0 && n+width > max {
			return false
		}
		b.WriteString(piece)
		n += width
		i += size
	}
	return true
}
