package docsection

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestYAMLObjectReadsThePageAsWritten: the object of a kind in the first yaml block under
// a heading, indented blocks included; a block under another heading, or a kind the
// section does not show, is not taken; an edit of the block is what the next read
// returns.
func TestYAMLObjectReadsThePageAsWritten(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.md")
	text := "# Page\n\n## First\n\n```yaml\nkind: Other\n```\n\n## Source\n\nText.\n\n- a list item:\n\n  ```yaml\n  # a comment\n  kind: Thing\n  spec:\n    prune: true\n  ---\n  kind: Second\n  ```\n\n## Later\n\n```yaml\nkind: Late\n```\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ heading, kind, want string }{
		{"Source", "Thing", "map[kind:Thing spec:map[prune:true]]"},
		{"Source", "Second", "map[kind:Second]"},
		{"Source", "Other", "no yaml block of a Other"},
		{"Source", "Late", "no yaml block of a Late"},
		{"Later", "Late", "map[kind:Late]"},
		{"Missing", "Thing", "no yaml block of a Thing"},
	} {
		obj, err := YAMLObject(page, c.heading, c.kind)
		got := fmtObj(obj)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s %s: %s, want %s", c.heading, c.kind, got, c.want)
		}
	}
	if err := os.WriteFile(page, []byte(strings.Replace(text, "prune: true", "prune: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if obj, err := YAMLObject(page, "Source", "Thing"); err != nil || fmtObj(obj) != "map[kind:Thing spec:map[prune:false]]" {
		t.Errorf("after an edit of the page: %v %v", obj, err)
	}
}

func fmtObj(obj map[string]any) string {
	if obj == nil {
		return ""
	}
	return fmt.Sprint(obj)
}
