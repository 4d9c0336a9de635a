// Package treediff compares a rendered GitOps tree with a published one, tenant by
// tenant, for review in a pull request.
package treediff

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/aidonow/eva/internal/safetext"
)

// FileDiff is one file that differs.
type FileDiff struct {
	Path   string `json:"path"`
	Status string `json:"status"` // added, changed, removed
	Diff   string `json:"diff"`   // unified diff
}

// Report lists what a render changes against a published tree.
type Report struct {
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
	// Objects are the objects that differ, file by file, with their changed fields.
	Objects []ObjectChange `json:"objects"`
	Files   []FileDiff     `json:"files"`
}

// Empty reports whether the trees are the same.
func (r *Report) Empty() bool { return len(r.Files) == 0 }

// Compare diffs the published tree (old) against the render (new), file by file and
// object by object (compareObjects). tenantOf maps a path
// to its tenant ("" for shared files such as the root kustomization). Whether a file
// changed is decided on its bytes; what the diff shows of both sides goes through
// Redact first (redact may be nil: nothing is redacted, lines are still escaped), so a
// change of a secret shows as a change without showing the secret.
func Compare(old, new map[string][]byte, tenantOf func(string) string, redact Redactor) *Report {
	r := &Report{Added: []string{}, Changed: []string{}, Removed: []string{}, Objects: []ObjectChange{}, Files: []FileDiff{}}
	paths := map[string]bool{}
	for p := range old {
		paths[p] = true
	}
	for p := range new {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	slices.Sort(sorted)
	oldTenants, newTenants := tenantSet(old, tenantOf), tenantSet(new, tenantOf)
	touched := map[string]bool{}
	for _, p := range sorted {
		a, inOld := old[p]
		b, inNew := new[p]
		status := ""
		switch {
		case !inOld:
			status = "added"
		case !inNew:
			status = "removed"
		case string(a) != string(b):
			status = "changed"
		default:
			continue
		}
		shownPath := safetext.Escape(p)
		diff := unified(shownPath, Redact(a, redact), Redact(b, redact), inOld, inNew)
		if diff == "" {
			diff = fmt.Sprintf("--- a/%s\n+++ b/%s\n(only redacted values differ)\n", shownPath, shownPath)
		}
		r.Files = append(r.Files, FileDiff{Path: shownPath, Status: status, Diff: diff})
		d := tenantOf(p)
		if d != "" {
			touched[d] = true
		}
		r.Objects = append(r.Objects, compareObjects(p, safetext.Escape(strings.ToUpper(d)), a, b, redact)...)
	}
	for d := range touched {
		name := safetext.Escape(strings.ToUpper(d))
		switch {
		case !oldTenants[d]:
			r.Added = append(r.Added, name)
		case !newTenants[d]:
			r.Removed = append(r.Removed, name)
		default:
			r.Changed = append(r.Changed, name)
		}
	}
	slices.Sort(r.Added)
	slices.Sort(r.Changed)
	slices.Sort(r.Removed)
	return r
}

func tenantSet(tree map[string][]byte, tenantOf func(string) string) map[string]bool {
	out := map[string]bool{}
	for p := range tree {
		if d := tenantOf(p); d != "" {
			out[d] = true
		}
	}
	return out
}

func unified(path string, a, b []byte, inOld, inNew bool) string {
	from, to := "a/"+path, "b/"+path
	if !inOld {
		from = "/dev/null"
	}
	if !inNew {
		to = "/dev/null"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		return ""
	}
	return text
}
