// Package tenantfile reads tenant files (one EvaTenant per YAML file) strictly and
// reports every problem with the file, line, column and field path at fault.
package tenantfile

import (
	"cmp"
	"fmt"
	"slices"
)

// Problem is one thing wrong with a tenant file.
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

// SortProblems orders problems by file, line, column, field and message.
func SortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message))
	})
}
