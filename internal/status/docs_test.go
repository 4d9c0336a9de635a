package status

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryReasonIsDocumented: every condition, reason, event and phase a tenant can
// show is explained in docs/concepts.md, the page users read when one appears. The
// constants are read from the source, so a new one fails this test until it is
// documented.
func TestEveryReasonIsDocumented(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "concepts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, src := range []struct {
		file    string
		matches func(name string) bool
	}{
		{"reasons.go", func(n string) bool { return strings.HasPrefix(n, "Reason") || strings.HasPrefix(n, "Event") }},
		{filepath.Join("..", "..", "api", "v1alpha1", "evatenant_types.go"), func(n string) bool {
			return strings.HasPrefix(n, "Condition") || strings.HasPrefix(n, "Phase")
		}},
	} {
		values := stringConstants(t, src.file, src.matches)
		if len(values) < 6 {
			t.Fatalf("%s: found %d constants; the test reads the wrong file", src.file, len(values))
		}
		for name, value := range values {
			if !strings.Contains(string(page), "`"+value+"`") {
				names = append(names, name+" ("+value+")")
			}
		}
	}
	if len(names) > 0 {
		t.Errorf("docs/concepts.md does not explain %s: say what it means and what to do", strings.Join(names, ", "))
	}
}

// stringConstants returns the string constants of a Go file whose names match.
func stringConstants(t *testing.T, file string, matches func(string) bool) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if i >= len(spec.Values) || !matches(name.Name) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					out[name.Name] = v
				}
			}
		}
		return true
	})
	return out
}
