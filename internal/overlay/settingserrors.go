package overlay

import (
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aidonow/eva/internal/tenantfile"
)

// SettingsError is an environment's settings file refused, each problem at its line
// and column, as tenant files' are: what evactl validate reports, and what render and
// publish print.
type SettingsError struct {
	Problems []tenantfile.Problem
}

func (e *SettingsError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// settingsError places err, ParseSettings' refusal of the settings file's data, in
// the file. ParseSettings alone decides what is accepted; the file is read again with
// the decoder tenant files go through only to say where: unknown fields (with the
// nearest known name), duplicate keys and wrong types at their own line and column, a
// refused value at its field's.
func settingsError(file string, data []byte, err error) *SettingsError {
	doc, problems := tenantfile.ParseDocument(file, data, "the environment's settings")
	if problems == nil {
		problems = tenantfile.DecodeStrict(file, doc.Content[0], &Settings{})
	}
	if len(problems) == 0 {
		line, col, path, msg := 1, 1, "", strings.TrimPrefix(err.Error(), "decoding: ")
		if doc != nil {
			line, col = doc.Content[0].Line, doc.Content[0].Column
		}
		if before, after, ok := strings.Cut(msg, ": "); ok && fieldPathRE.MatchString(before) {
			path, msg = before, after
			if doc != nil {
				line, col = locate(doc.Content[0], path)
			}
		}
		problems = []tenantfile.Problem{tenantfile.ProblemIn(file, line, col, path, msg)}
	}
	return &SettingsError{Problems: problems}
}

// fieldPathRE matches the field path a settings check names first: natsConsumer.subjects[1].
var fieldPathRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*|\[[0-9]+\])*$`)

// locate returns where the value of path stands under root, or where the deepest part
// of it that the file holds does (a required field left out: its object).
func locate(root *yaml.Node, path string) (line, col int) {
	n := root
	for _, part := range pathParts(path) {
		next := child(n, part)
		if next == nil {
			break
		}
		n = next
	}
	return n.Line, n.Column
}

// pathParts splits natsConsumer.subjects[1] into natsConsumer, subjects, 1.
func pathParts(path string) []string {
	return strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
}

// child is the value of key part of a mapping, or item part of a list.
func child(n *yaml.Node, part string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}
