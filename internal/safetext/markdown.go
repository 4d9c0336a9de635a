package safetext

import (
	"fmt"
	"strings"
)

// Markdown returns s, escaped onto one line (Escape), as literal text of GitHub
// Flavored Markdown: every ASCII punctuation character but , - / and space is written
// as a numeric character reference, so no byte of s opens an HTML tag, a link, an
// image, a code span, emphasis or a table cell, or turns into a mention (@team), an
// issue reference (#1) or an autolink (https://, www.). What it shows reads the same.
func Markdown(s string) string {
	s = Escape(s)
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < 0x80 && isMarkdownActive(byte(r)) {
			fmt.Fprintf(&b, "&#%d;", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isMarkdownActive says whether an ASCII character may mean something to a Markdown
// reader.
func isMarkdownActive(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return false
	case c == ' ', c == ',', c == '-', c == '/':
		return false
	}
	return c >= 0x21 && c <= 0x7e
}
