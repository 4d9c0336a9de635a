package tenantfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// DecodeStrict reads the YAML mapping root of file into out (a pointer to an API
// object) with the decoder tenant files go through: unknown fields (with the nearest
// known name), duplicate keys, wrong types, anchors and merge keys are problems at their
// line and column; only the well-typed parts reach out, through encoding/json, as the API
// server would read them. It is for the other files Eva reads from a pull request
// (release files), so they are held to the same errors as tenant files.
func DecodeStrict(file string, root *yaml.Node, out any) []Problem {
	t := reflect.TypeOf(out)
	if t == nil || t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("tenantfile.DecodeStrict: %T is not a pointer", out))
	}
	dec := newDecoder()
	value, _ := dec.decode(root, t.Elem(), nil)
	var problems []Problem
	for _, p := range dec.problems {
		problems = append(problems, Problem{File: file, Line: max(p.pos.line, 1), Column: max(p.pos.column, 1), Field: p.path, Message: p.message})
	}
	if len(problems) > 0 {
		return problems
	}
	raw, err := json.Marshal(value)
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		// The decoder only keeps well-typed values, so this means a bug, not bad input.
		return []Problem{{File: file, Line: max(root.Line, 1), Column: max(root.Column, 1), Message: fmt.Sprintf("internal decoding error: %v", err)}}
	}
	return nil
}

// ParseDocument reads data as the one YAML document of a file that holds one object
// (holds says which: "a release file holds one EvaRollout"), a mapping, and returns the
// document node; or the problem, at its line.
func ParseDocument(file string, data []byte, holds string) (*yaml.Node, []Problem) {
	fail := func(line int, msg string) []Problem {
		return []Problem{{File: file, Line: max(line, 1), Column: 1, Message: msg}}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fail(1, "not YAML: "+err.Error())
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fail(extra.Line, "more than one YAML document: "+holds)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fail(1, "not a YAML mapping: "+holds)
	}
	return &doc, nil
}
