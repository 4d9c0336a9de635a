package overlay

import (
	"regexp"
	"strings"

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
				line, col = tenantfile.Locate(doc.Content[0], path)
			}
		}
		problems = []tenantfile.Problem{tenantfile.ProblemIn(file, line, col, path, msg)}
	}
	return &SettingsError{Problems: problems}
}

// fieldPathRE matches the field path a settings check names first: natsConsumer.subjects[1].
var fieldPathRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*|\[[0-9]+\])*$`)
