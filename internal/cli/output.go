package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"sigs.k8s.io/yaml"
)

// outputFormats are the values of -o/--output: text for people, json and yaml for
// programs, as kubectl, flux and helm take them.
var outputFormats = []string{"text", "json", "yaml"}

// checkOutput refuses an --output value outside outputFormats.
func checkOutput(output string) error {
	if !slices.Contains(outputFormats, output) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--output %q: want text, json or yaml", output)}
	}
	return nil
}

// writeStructured writes v as JSON (indented) or YAML, as output says.
func writeStructured(w io.Writer, output string, v any) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return checkOutput(output)
}
