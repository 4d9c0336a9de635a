package docsection

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Block is one fenced code block of a page.
type Block struct {
	// Text is the block's content, without its fences and the indentation of its
	// opening fence; Line is the line of its closing fence.
	Text string
	Line int
}

// Blocks returns the ```lang blocks under the heading (a line "## ..." or "### ..."
// equal to heading, up to the next heading of any level) of the page at path, in page
// order: the page is the fixture, so a test that runs what a user is told to run
// changes when the page does. Blocks indented under a list item are read without their
// indentation.
func Blocks(path, heading, lang string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	in, fence, indent := false, false, ""
	var out []Block
	var block []string
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !fence && strings.HasPrefix(line, "#"):
			if in {
				return out, nil
			}
			in = strings.TrimLeft(line, "# ") == heading
		case in && !fence && trimmed == "```"+lang:
			fence, indent, block = true, line[:len(line)-len(strings.TrimLeft(line, " "))], nil
		case in && fence && trimmed == "```":
			fence = false
			out = append(out, Block{Text: strings.Join(block, "\n"), Line: i + 1})
		case in && fence:
			block = append(block, strings.TrimPrefix(line, indent))
		}
	}
	return out, nil
}

// YAMLObject returns the object of kind that the first ```yaml block under the heading
// of the page at path holds (Blocks), parsed.
func YAMLObject(path, heading, kind string) (map[string]any, error) {
	blocks, err := Blocks(path, heading, "yaml")
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		for doc := range strings.SplitSeq(b.Text, "\n---\n") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("%s:%d: the yaml block does not parse: %w", path, b.Line, err)
			}
			if obj["kind"] == kind {
				return obj, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: no yaml block of a %s under %q", path, kind, heading)
}
