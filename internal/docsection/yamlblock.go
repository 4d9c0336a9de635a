package docsection

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// YAMLObject returns the object of kind that the first ```yaml block under the heading
// (a line "## ..." or "### ..." equal to heading, up to the next heading of any level)
// of the page at path holds, parsed: the page is the fixture, so a test that applies
// what a user is told to apply changes when the page does. Blocks indented under a list
// item are read without their indentation.
func YAMLObject(path, heading, kind string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	in, fence, indent := false, false, ""
	var block []string
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case !fence && strings.HasPrefix(line, "#"):
			if in {
				return nil, fmt.Errorf("%s: no yaml block of a %s under %q", path, kind, heading)
			}
			in = strings.TrimLeft(line, "# ") == heading
		case in && !fence && trimmed == "```yaml":
			fence, indent, block = true, line[:len(line)-len(strings.TrimLeft(line, " "))], nil
		case in && fence && trimmed == "```":
			fence = false
			for doc := range strings.SplitSeq(strings.Join(block, "\n"), "\n---\n") {
				obj := map[string]any{}
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					return nil, fmt.Errorf("%s:%d: the yaml block does not parse: %w", path, i+1, err)
				}
				if obj["kind"] == kind {
					return obj, nil
				}
			}
		case in && fence:
			block = append(block, strings.TrimPrefix(line, indent))
		}
	}
	return nil, fmt.Errorf("%s: no yaml block of a %s under %q", path, kind, heading)
}
