package safetext

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text: ok":                "plain text: ok",
		"x\n::warning file=evil::pwned": `x\n::warning file=evil::pwned`,
		"a\r\nb":                        `a\r\nb`,
		"\x1b[2J\x1b[31mred":            `\x1b[2J\x1b[31mred`,
		"tab\there":                     `tab\there`,
		"nul\x00":                       `nul\x00`,
		"del\x7f":                       `del\x7f`,
		"p\u0430ssword":                 "p\u0430ssword", // Cyrillic а is printable
		"right\u202eleft":               `right\u202eleft`,
		"zero\u200bwidth":               `zero\u200bwidth`,
		"bad\xffutf8":                   `bad\xffutf8`,
		`back\slash`:                    `back\slash`,
		"c1\u009bcontrol":               `c1\u009bcontrol`,
		"line\u2028sep":                 `line\u2028sep`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if again := Escape(Escape(in)); again != Escape(in) {
			t.Errorf("Escape is not idempotent on %q", in)
		}
	}
}

func TestValueShortens(t *testing.T) {
	big := strings.Repeat("x", 200_000)
	got := Value(big)
	if want := `"` + strings.Repeat("x", MaxValue) + `"… (200000 bytes)`; got != want {
		t.Errorf("Value(200 KB) = %q", got)
	}
	if got := Value("hunter2"); got != `"hunter2"` {
		t.Errorf("Value = %q", got)
	}
	if got := Value(strings.Repeat("\x1b", 100)); strings.ContainsRune(got, 0x1b) || len(got) > 120 {
		t.Errorf("Value of escapes = %q", got)
	}
	if got := Limit("abc\ndef", 4); got != `abc\… (7 bytes)` && got != `abc… (7 bytes)` {
		t.Errorf("Limit = %q", got)
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a\nb", "\x1b[0m", "\xff", "\u202e", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Escape(s), Value(s), Limit(s, 10)} {
			if !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
			}
			for _, r := range out {
				if !unicode.IsPrint(r) {
					t.Fatalf("non-printable %U out of %q: %q", r, s, out)
				}
			}
		}
		if n := utf8.RuneCountInString(Value(s)); n > MaxValue+40 {
			t.Fatalf("Value too long (%d) for %q", n, s)
		}
		if Escape(Escape(s)) != Escape(s) {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}

// TestMarkdown: text from a tenant file opens nothing in a pull-request comment: no
// tag, link, code span, table cell, mention, issue reference or autolink.
func TestMarkdown(t *testing.T) {
	for in, want := range map[string]string{
		"replicaCount":                  "replicaCount",
		"spec.values.a/b-c, d":          "spec&#46;values&#46;a/b-c, d",
		"<img src=x onerror=alert(1)>":  "&#60;img src&#61;x onerror&#61;alert&#40;1&#41;&#62;",
		"[x](https://evil.example)":     "&#91;x&#93;&#40;https&#58;//evil&#46;example&#41;",
		"a | b `c` @team #1 *e* _f_ ~g": "a &#124; b &#96;c&#96; &#64;team &#35;1 &#42;e&#42; &#95;f&#95; &#126;g",
		"line\nbreak &amp;":             "line&#92;nbreak &#38;amp&#59;",
		"www.evil.example":              "www&#46;evil&#46;example",
	} {
		if got := Markdown(in); got != want {
			t.Errorf("Markdown(%q) = %q, want %q", in, got, want)
		}
	}
}
