package treediff

import (
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/yamldoc"
)

// Redactor says why the value under a key must not be shown (a short reason that
// never holds the value), or "" when it may be. evactl passes tenant.SecretReason, so
// diff never prints what the validator would refuse, even when the published side
// still holds it from before the rule existed.
type Redactor func(key string, value any) string

// Redact returns data with every value the redactor flags replaced by
// "<redacted: reason>" and with every line made printable (see safetext.Escape), so a
// diff built from it shows neither secrets nor terminal escapes. YAML documents are
// read as YAML, which finds multi-line values (a PEM key in a block scalar) whole;
// anything that does not parse is redacted line by line.
func Redact(data []byte, redact Redactor) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	r := &redaction{lines: lines, spans: map[int]span{}, replace: map[int]string{}, drop: map[int]bool{}}
	if redact != nil {
		docs, err := yamldoc.Documents(data)
		if err == nil {
			for _, doc := range docs {
				r.walk("", doc, redact)
			}
			r.apply()
		} else {
			r.byLine(redact)
		}
	}
	var b strings.Builder
	for i, l := range lines {
		n := i + 1
		if r.drop[n] {
			continue
		}
		if rep, ok := r.replace[n]; ok {
			l = rep
		}
		body, nl := strings.CutSuffix(l, "\n")
		b.WriteString(safetext.Escape(body))
		if nl {
			b.WriteByte('\n')
		}
	}
	return []byte(b.String())
}

type redaction struct {
	lines   []string
	spans   map[int]span   // 1-based line → the value redacted from it
	replace map[int]string // 1-based line → replacement
	drop    map[int]bool   // continuation lines of a redacted value
}

// span is a value to redact: from column col of its line to the end of the value,
// whose continuation lines are those indented deeper than entryCol.
type span struct {
	col, entryCol int
	reason        string
	// dashes: the value is a block list, whose "- " items may stand at the key's own
	// indentation.
	dashes bool
}

// walk redacts under node n, found under key. A container the redactor flags is
// searched for the flagged values themselves, so one secret does not hide a whole
// release; only when no single child is flagged (the key itself names a secret,
// credentials: {user: admin}) is the whole container redacted.
func (r *redaction) walk(key string, n *yaml.Node, redact Redactor) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.DocumentNode:
		found := false
		for _, c := range n.Content {
			found = r.walk(key, c, redact) || found
		}
		return found
	case yaml.MappingNode:
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			found = r.pair(k, v, redact) || found
		}
		return found
	case yaml.SequenceNode:
		found := false
		for _, item := range n.Content {
			found = r.item(key, item, redact) || found
		}
		return found
	}
	return false
}

// pair handles one key: value of a mapping.
func (r *redaction) pair(k, v *yaml.Node, redact Redactor) bool {
	reason := redact(k.Value, plain(v))
	if reason == "" {
		return false
	}
	// A block container is searched for the flagged values; a flow one ({a: b} on
	// one line) is redacted whole, which keeps the line well-formed.
	if (v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && v.Style&yaml.FlowStyle == 0 {
		if r.walk(k.Value, v, redact) {
			return true
		}
	}
	r.mark(span{col: k.Column, entryCol: k.Column, reason: reason, dashes: v.Kind == yaml.SequenceNode}, k.Line)
	return true
}

// item handles one item of a list, judged under the list's key.
func (r *redaction) item(key string, item *yaml.Node, redact Redactor) bool {
	reason := redact(key, plain(item))
	if reason == "" {
		return false
	}
	if (item.Kind == yaml.MappingNode || item.Kind == yaml.SequenceNode) && item.Style&yaml.FlowStyle == 0 {
		if r.walk(key, item, redact) {
			return true
		}
	}
	r.mark(span{col: item.Column, entryCol: dashColumn(r.line(item.Line), item.Column), reason: reason}, item.Line)
	return true
}

// mark records a value to redact; of two on one line (a flow mapping holding two
// secrets), the one starting first wins, and it covers the other.
func (r *redaction) mark(s span, line int) {
	if line < 1 || line > len(r.lines) {
		return
	}
	if prev, ok := r.spans[line]; ok && prev.col <= s.col {
		return
	}
	r.spans[line] = s
}

// apply turns the recorded spans into replaced and dropped lines, outermost first.
func (r *redaction) apply() {
	for line := 1; line <= len(r.lines); line++ {
		if s, ok := r.spans[line]; ok && !r.drop[line] {
			r.redactSpan(line, s)
		}
	}
}

// redactSpan replaces the text from column col of line (1-based) to the end of the
// value by the redaction note, dropping the value's continuation lines: every
// following line that is blank or indented deeper than the column the entry starts at
// (block scalars, multi-line flow scalars, nested blocks).
func (r *redaction) redactSpan(line int, s span) {
	col, entryCol := s.col, s.entryCol
	text := r.line(line)
	prefix := text
	if col-1 <= len(text) {
		prefix = text[:col-1]
	}
	if k := keyText(text, col); k != "" {
		prefix += k + ": "
	}
	note := "<redacted: " + s.reason + ">"
	nl := ""
	if strings.HasSuffix(r.lines[line-1], "\n") {
		nl = "\n"
	}
	r.replace[line] = prefix + note + nl
	for n := line + 1; n <= len(r.lines); n++ {
		next := strings.TrimRight(r.line(n), " \t\r")
		ownItem := s.dashes && indent(next) == entryCol && strings.HasPrefix(strings.TrimLeft(next, " \t"), "-")
		if next != "" && indent(next) <= entryCol && !ownItem {
			break
		}
		if next == "" && n == len(r.lines) {
			break
		}
		r.drop[n] = true
	}
}

// line returns line n (1-based) without its newline.
func (r *redaction) line(n int) string { return strings.TrimSuffix(r.lines[n-1], "\n") }

// keyText returns the key written at column col of a line ("password" of
// "  password: x"), or "" when a value (a list item) starts there.
func keyText(line string, col int) string {
	if col < 1 || col > len(line) {
		return ""
	}
	rest := line[col-1:]
	if m := keyRE.FindStringSubmatch(rest); m != nil {
		return m[1]
	}
	return ""
}

var keyRE = regexp.MustCompile(`^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s:#'"][^:#]*?)\s*:(?:\s|$)`)

// dashColumn returns the column of the "- " introducing a list item at col, so its
// continuation lines are those indented deeper than the dash.
func dashColumn(line string, col int) int {
	for i := min(col-2, len(line)-1); i >= 0; i-- {
		if line[i] == '-' {
			return i + 1
		}
	}
	return col
}

// indent returns the 1-based column of a line's first non-blank character.
func indent(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t")) + 1
}

// byLine redacts "key: value" lines of text that is not YAML, and any line whose
// content alone is flagged (a PEM header, a token).
func (r *redaction) byLine(redact Redactor) {
	for i := range r.lines {
		text := r.line(i + 1)
		if m := lineRE.FindStringSubmatch(text); m != nil {
			key := strings.Trim(m[2], `"'`)
			if reason := redact(key, scalar(m[3])); reason != "" {
				r.replace[i+1] = m[1] + m[2] + ": <redacted: " + reason + ">" + newline(r.lines[i])
				continue
			}
		}
		if reason := redact("", strings.TrimSpace(text)); reason != "" {
			r.replace[i+1] = "<redacted: " + reason + ">" + newline(r.lines[i])
		}
	}
}

var lineRE = regexp.MustCompile(`^(\s*(?:-\s+)?)("[^"]*"|'[^']*'|[^\s:#'"][^:#]*?)\s*:\s+(.*\S)\s*$`)

func newline(l string) string {
	if strings.HasSuffix(l, "\n") {
		return "\n"
	}
	return ""
}

// scalar reads one YAML scalar as a value (so 84736251 is a number, as in the file).
func scalar(s string) any {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	return normalize(v)
}

// plain converts a node into the JSON data model the redactor expects.
func plain(n *yaml.Node) any {
	var v any
	if err := n.Decode(&v); err != nil {
		return n.Value
	}
	return normalize(v)
}

// normalize turns YAML's decoded forms into JSON's: maps with string keys, integers
// as int64 where they fit.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, item := range x {
			x[k] = normalize(item)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[toString(k)] = normalize(item)
		}
		return out
	case []any:
		for i, item := range x {
			x[i] = normalize(item)
		}
		return x
	case int:
		return int64(x)
	case uint64:
		return float64(x)
	}
	return v
}

func toString(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(k)
	return strings.TrimSpace(string(b))
}
