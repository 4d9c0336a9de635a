// Package tenantfile reads tenant files (one EvaTenant per YAML file) strictly and
// reports every problem with the file, line, column and field path at fault.
package tenantfile

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/aidonow/eva/internal/safetext"
)

// Problem is one thing wrong with a tenant file. Its text fields are safe to print:
// escaped onto one line and bounded in length (see clean).
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// String formats the problem as file:line:col: field: message.
func (p Problem) String() string {
	if p.Field == "" {
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, p.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Column, p.Field, p.Message)
}

// ProblemIn is a problem at a line and column of a file other than a tenant file (an
// environment overlay whose value a chart refuses for every tenant), cleaned like every
// other problem.
func ProblemIn(file string, line, column int, fieldPath, message string) Problem {
	return Problem{File: file, Line: max(line, 1), Column: max(column, 1), Field: fieldPath, Message: message}.clean()
}

// maxField bounds a field path in a message; key names come from the file.
const maxField = 256

// clean makes a problem safe for every output format: key names in the field path,
// the file name and the message are escaped (a key named "x\n::warning::" cannot start
// a line of its own) and bounded. Values inside messages are already shortened where
// they are quoted; the bound here is the backstop for text from elsewhere.
func (p Problem) clean() Problem {
	p.File = safetext.Escape(p.File)
	p.Field = safetext.Limit(p.Field, maxField)
	p.Message = safetext.Limit(p.Message, safetext.MaxMessage)
	return p
}

// SortProblems orders problems by file, line, column, field and message.
func SortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message))
	})
}

// tooBig is the message for a file over MaxFileBytes.
func tooBig(size int64) string {
	return fmt.Sprintf("file is %d bytes; a tenant file may be at most %d (refused without reading it)", size, MaxFileBytes)
}
