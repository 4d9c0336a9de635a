// Package manifest turns Kubernetes objects into deterministic YAML: sorted keys, no
// status, no empty creationTimestamp, a fixed style. It is a small, fast emitter for the
// JSON data model (what unstructured objects hold), so a fleet of tenants renders in
// seconds rather than the minutes a general-purpose YAML library would take.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// EncodeDocuments writes objects as a multi-document YAML stream, each document
// introduced by "---".
func EncodeDocuments(buf *bytes.Buffer, objects []map[string]any) error {
	for _, obj := range objects {
		buf.WriteString("---\n")
		if err := Encode(buf, obj); err != nil {
			return err
		}
	}
	return nil
}

// Encode writes one object as block-style YAML with keys in sorted order.
func Encode(buf *bytes.Buffer, obj map[string]any) error {
	if len(obj) == 0 {
		buf.WriteString("{}\n")
		return nil
	}
	e := encoderPool.Get().(*encoder)
	e.buf = buf
	defer func() {
		e.buf, e.keys = nil, e.keys[:0]
		encoderPool.Put(e)
	}()
	return e.mapBody(obj, 0, false)
}

// encoder writes plain data to buf. keys is a stack of map keys: each map's keys are
// pushed, sorted, written and popped, so that writing allocates no slice per map (which
// was a good part of rendering's time).
type encoder struct {
	buf  *bytes.Buffer
	keys []string
}

var encoderPool = sync.Pool{New: func() any { return &encoder{keys: make([]string, 0, 64)} }}

// pushSorted pushes m's keys, sorted, and returns where they start.
func (e *encoder) pushSorted(m map[string]any) int {
	start := len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys[start:])
	return start
}

func indent(buf *bytes.Buffer, n int) {
	for range n {
		buf.WriteString("  ")
	}
}

// mapBody writes m's entries, sorted by key, each on its own line at depth; inline is
// the body of a list item, whose first key continues the "- " line (the rest line up
// with it).
func (e *encoder) mapBody(m map[string]any, depth int, inline bool) error {
	start := e.pushSorted(m)
	end := len(e.keys)
	for i := start; i < end; i++ {
		if !inline || i > start {
			indent(e.buf, depth)
		}
		if err := e.entry(e.keys[i], m[e.keys[i]], depth); err != nil {
			return err
		}
	}
	e.keys = e.keys[:start]
	return nil
}

func (e *encoder) entry(key string, v any, depth int) error {
	buf := e.buf
	writeString(buf, key)
	buf.WriteByte(':')
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			buf.WriteString(" {}\n")
			return nil
		}
		buf.WriteByte('\n')
		return e.mapBody(x, depth+1, false)
	case []any:
		if len(x) == 0 {
			buf.WriteString(" []\n")
			return nil
		}
		buf.WriteByte('\n')
		// Lists sit at their key's indentation, as kubectl writes them.
		return e.list(x, depth)
	default:
		buf.WriteByte(' ')
		if err := writeScalar(buf, v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		buf.WriteByte('\n')
		return nil
	}
}

func (e *encoder) list(items []any, depth int) error {
	buf := e.buf
	for _, item := range items {
		indent(buf, depth)
		buf.WriteString("- ")
		switch x := item.(type) {
		case map[string]any:
			if len(x) == 0 {
				buf.WriteString("{}\n")
				continue
			}
			if err := e.mapBody(x, depth+1, true); err != nil {
				return err
			}
		case []any:
			if len(x) == 0 {
				buf.WriteString("[]\n")
				continue
			}
			// A list directly inside a list: start it on the next line.
			buf.Truncate(buf.Len() - 1)
			buf.WriteByte('\n')
			if err := e.list(x, depth+1); err != nil {
				return err
			}
		default:
			if err := writeScalar(buf, item); err != nil {
				return err
			}
			buf.WriteByte('\n')
		}
	}
	return nil
}

func writeScalar(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		writeString(buf, x)
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case int:
		buf.WriteString(strconv.Itoa(x))
	case int32:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("value %v has no JSON form", x)
		}
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			buf.WriteString(strconv.FormatInt(int64(x), 10))
		} else {
			buf.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		}
	case json.Number:
		buf.WriteString(x.String())
	default:
		// Anything else (typed slices or maps a caller left in) goes through JSON, which
		// is valid YAML.
		raw, err := json.Marshal(x)
		if err != nil {
			return err
		}
		buf.Write(raw)
	}
	return nil
}

// writeString writes s plain when YAML would read it back as the same string, and
// double-quoted otherwise, with JSON's escapes (which are valid YAML escapes).
func writeString(buf *bytes.Buffer, s string) {
	if plainSafe(s) {
		buf.WriteString(s)
		return
	}
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x7f {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf.WriteString(s[start:i])
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\n':
				buf.WriteString(`\n`)
			case '\t':
				buf.WriteString(`\t`)
			case '\r':
				buf.WriteString(`\r`)
			default:
				fmt.Fprintf(buf, `\u%04x`, c)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		// Invalid UTF-8, C1 controls, and the separators YAML treats as breaks are
		// escaped; other characters are written as they are.
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' || r == '\ufeff' ||
			r >= 0x80 && r <= 0x9f || r == 0xfffe || r == 0xffff {
			buf.WriteString(s[start:i])
			if r == utf8.RuneError {
				buf.WriteString(`\ufffd`)
			} else {
				fmt.Fprintf(buf, `\u%04x`, r)
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// plainSafe reports whether s can be written as a plain scalar and read back as the
// same string by YAML 1.1 and 1.2 parsers alike. It is deliberately conservative: it
// allows letters, digits and a few punctuation marks, requires a letter (or '/' or '_')
// first so nothing reads as a number, date or indicator, and rules out the words YAML
// 1.1 reads as booleans or null. (Every byte it allows is ASCII, so a string it allows
// is valid UTF-8.)
func plainSafe(s string) bool {
	if s == "" || plainByte[s[0]]&plainFirst == 0 {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch plainByte[s[i]] {
		case 0:
			return false
		case plainColon:
			// A colon is fine inside a plain scalar unless a space or the end follows.
			if i == len(s)-1 {
				return false
			}
		}
	}
	if len(s) <= 5 {
		switch s {
		case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
			"true", "True", "TRUE", "false", "False", "FALSE",
			"on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL":
			return false
		}
	}
	return true
}

// What plainSafe allows of each byte: plainAny anywhere, plainFirst also first, and a
// colon (plainColon) anywhere but first and last.
const (
	plainAny   = 1
	plainFirst = 2
	plainColon = 4
)

var plainByte = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = plainAny|plainFirst, plainAny|plainFirst
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = plainAny
	}
	for _, c := range ".-=@+" {
		t[c] = plainAny
	}
	t['/'], t['_'] = plainAny|plainFirst, plainAny|plainFirst
	t[':'] = plainColon
	return t
}()
